"""DRF, Tetris and FTF orders, checked by hand on small job sets."""

import numpy as np
import pytest

from synergy_gym import ClusterSpec
from synergy_gym.baselines.orderings import DRF, FTF, FTFReference, Tetris
from synergy_gym.sim.job_table import JobTable


@pytest.fixture
def four_jobs(make_workload):
    # alexnet asks 12 CPUs/125 GB (2.94×), gnmt 1/20 (1.0×), m5 6/187.5 (2.5×); D is an 8-GPU gnmt.
    w = make_workload(["alexnet", "gnmt", "m5", "gnmt"], arrivals=[0, 1, 2, 3], iters=[1000, 10000, 1000, 100],
                      gpus=[1, 1, 1, 8])
    return JobTable(ClusterSpec(), w)  # 128 GPUs, 384 CPUs, 8000 GB


def test_drf_serves_the_smallest_dominant_share_first(four_jobs):
    # Dominant shares: A cpu 12/384 = 0.031, B gpu 1/128 = 0.0078, C mem 187.5/8000 = 0.023, D gpu 8/128 = 0.0625.
    order = DRF().order(four_jobs, np.arange(4), now=0.0, uses_targets=True)
    assert order.tolist() == [1, 2, 0, 3]


def test_tetris_weighs_remaining_time_by_normalised_demand(four_jobs):
    # remaining s × (gpu + cpu + mem shares):
    # A 1000·0.6/2.94 = 204 s × 0.0547 = 11.2;  B 1200 s × 0.0129 = 15.5;
    # C 1000·0.6/2.5 = 240 s × 0.0469 = 11.25; D 12 s × 0.1033 = 1.24.
    order = Tetris().order(four_jobs, np.arange(4), now=0.0, uses_targets=True)
    assert order.tolist() == [3, 0, 2, 1]
    # At the fair share alexnet and m5 take 600 s: C (28.1) before A (32.8).
    assert Tetris().order(four_jobs, np.arange(4), now=0.0, uses_targets=False).tolist() == [3, 1, 2, 0]


def test_ftf_serves_the_job_furthest_behind_and_ftf_ref_the_reverse(make_workload):
    w = make_workload(["gnmt"] * 3, arrivals=[0, 1000, 2000], iters=[10000, 1000, 100000])
    jobs = JobTable(ClusterSpec(), w)
    jobs.executed[0] = 5000
    # ρ at t = 3000 s: J0 (3000 + 600) / 1200 = 3.0; J1 (2000 + 120) / 120 = 17.7; J2 (1000 + 12000) / 12000 = 1.08.
    assert FTF().order(jobs, np.arange(3), now=3000.0, uses_targets=True).tolist() == [1, 0, 2]
    assert FTFReference().order(jobs, np.arange(3), now=3000.0, uses_targets=True).tolist() == [2, 0, 1]


def test_starved_jobs_go_first_under_every_extra_ordering(four_jobs):
    four_jobs.priority[3] = True
    for ordering in (DRF(), Tetris(), FTF(), FTFReference()):
        assert ordering.order(four_jobs, np.arange(4), now=0.0, uses_targets=True)[0] == 3


@pytest.mark.parametrize("ordering", ["srtf", "tetris"])
def test_under_tune_a_request_slower_than_the_fair_share_is_ranked_at_the_fair_share_tune_grants(ordering):
    # res18 asking 1 CPU per GPU runs at 0.37 of the fair share, so Tune grants it the fair share: 2 h, not 5.4 h.
    # It was ranked at its request, after a 3 h job (mean JCT 4.1 h against 3.6 h on one GPU); under Greedy, which
    # grants the request, it still goes second.
    from synergy_gym import ModelZoo, Simulator, Workload
    from synergy_gym.baselines.registry import make_policy

    zoo = ModelZoo.default()
    res18 = zoo.index("res18")
    assert zoo[res18].throughput(1.0, 62.5) == pytest.approx(0.37)
    hours = np.array([2.0, 3.0])
    w = Workload.build(zoo, job_id=[0, 1], model=[res18] * 2, gpus=[1, 1], arrival_s=[0.0, 0.0],
                       total_iters=hours * 3600 / zoo[res18].iter_time_s, cpu_demand_per_gpu=[1.0, np.nan],
                       run_until="all")
    one_gpu = ClusterSpec(num_servers=1, gpus_per_server=1, cpus_per_server=3, mem_gb_per_server=62.5)
    finish_order = {}
    for mechanism in ("tune", "greedy"):
        sim = Simulator(one_gpu, w, make_policy(f"{ordering}+{mechanism}"))
        sim.run()
        finish_order[mechanism] = np.argsort(sim.jobs.finish_s).tolist()
        assert sim.jobs.floors_targets == (mechanism == "tune")
    assert finish_order == {"tune": [0, 1], "greedy": [1, 0]}
