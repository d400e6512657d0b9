"""Timing, progress, skipping and ordering of the round-based simulator."""

import math

import numpy as np
import pytest

from synergy_gym import (
    FIFO,
    LAS,
    SRTF,
    ClusterSpec,
    ConfigError,
    FairShare,
    Greedy,
    SchedulingPolicy,
    SimulationConfig,
    Simulator,
    Tune,
    UnknownNameError,
    WorkloadError,
)

ONE_GPU = ClusterSpec(num_servers=1, gpus_per_server=1, cpus_per_server=3, mem_gb_per_server=62.5)
FIFO_TUNE = SchedulingPolicy(FIFO(), Tune())
FIFO_FAIR = SchedulingPolicy(FIFO(), FairShare())


class EveryRound(Simulator):
    """The simulator without skipping: plans every single round."""

    def _skippable(self) -> bool:
        return False


def run(cluster, workload, policy=FIFO_TUNE, sim_class=Simulator, **config):
    return sim_class(cluster, workload, policy, SimulationConfig(debug=True, **config)).run()


def test_arrival_waits_for_the_next_round_and_completes_at_round_end(make_workload):
    # gnmt: 0.12 s per iteration → 2,500 iterations per 300 s round; 3,000 need two rounds.
    w = make_workload(["gnmt"], arrivals=[100], iters=[3000])
    jobs = run(ONE_GPU, w).jobs
    assert jobs.loc[0, "start_s"] == 300 and jobs.loc[0, "finish_s"] == 900 and jobs.loc[0, "jct_s"] == 800


def test_exact_timing_completes_at_the_exact_finish(make_workload):
    w = make_workload(["gnmt"], arrivals=[100], iters=[3000])
    jobs = run(ONE_GPU, w, timing="exact").jobs
    assert jobs.loc[0, "finish_s"] == pytest.approx(300 + 3000 * 0.12)


def test_exact_timing_frees_resources_at_the_finish(make_workload):
    # Job 1 finishes 60 s into a round; with exact timing job 2 starts right then.
    w = make_workload(["gnmt", "gnmt"], arrivals=[0, 10], iters=[500, 500])
    exact = run(ONE_GPU, w, timing="exact").jobs
    rounds = run(ONE_GPU, w).jobs
    assert exact.loc[1, "start_s"] == pytest.approx(60.0) and exact.loc[1, "finish_s"] == pytest.approx(120.0)
    assert rounds.loc[1, "start_s"] == 300 and rounds.loc[1, "finish_s"] == 600


def test_whole_round_credit_uses_the_throughput_of_the_allocation(make_workload):
    cluster = ClusterSpec(num_servers=1, gpus_per_server=8, cpus_per_server=24, mem_gb_per_server=500)
    # res18: 0.64 s per iteration at fair (468 per round), 2.4× at its demand: floor(300 / (0.64 / 2.4)) = 1125.
    w = make_workload(["res18"], arrivals=[0], iters=[1125 * 3])
    assert run(cluster, w).jobs.loc[0, "finish_s"] == 900  # tune: 3 rounds
    assert run(cluster, w, policy=FIFO_FAIR).jobs.loc[0, "finish_s"] == 300 * math.ceil(3375 / 468)


def test_fifo_queues_jobs_on_a_full_cluster(make_workload):
    w = make_workload(["gnmt", "gnmt", "gnmt"], arrivals=[0, 0, 0], iters=[2500, 5000, 2500])
    jobs = run(ONE_GPU, w).jobs
    assert jobs["finish_s"].tolist() == [300, 900, 1200]


def test_an_arrival_just_after_a_boundary_waits_for_the_next_one(make_workload):
    w = make_workload(["gnmt"], arrivals=[300.0000000000001], iters=[100])
    assert run(ONE_GPU, w).jobs.loc[0, "start_s"] == 600


def test_idle_gaps_are_skipped_and_rounds_stay_aligned(make_workload):
    w = make_workload(["gnmt", "gnmt"], arrivals=[0, 10 * 86400 + 1], iters=[100, 100])
    sim = Simulator(ONE_GPU, w, FIFO_TUNE)
    result = sim.run()
    assert result.jobs["finish_s"].tolist() == [300, 10 * 86400 + 600]
    assert sim.rounds_planned == 2


def test_skipping_identical_rounds_changes_nothing(make_workload, zoo):
    rng = np.random.default_rng(3)
    n = 150
    names = list(zoo.names)
    w = make_workload(
        [names[i] for i in rng.integers(0, len(names), n)],
        arrivals=np.sort(rng.uniform(0, 20 * 3600, n)),
        iters=rng.integers(1000, 200000, n),
        gpus=rng.choice([1, 1, 1, 2, 4, 8], n),
    )
    cluster = ClusterSpec(num_servers=4)
    for mech in (Tune(), Greedy(), FairShare()):
        for timing in ("round", "exact"):
            policy = SchedulingPolicy(FIFO(), mech)
            skipped = Simulator(cluster, w, policy, SimulationConfig(timing=timing))
            every = EveryRound(cluster, w, policy, SimulationConfig(timing=timing))
            a, b = skipped.run(), every.run()
            np.testing.assert_allclose(a.jobs["finish_s"], b.jobs["finish_s"], rtol=1e-9)
            assert skipped.rounds_planned < every.rounds_planned


@pytest.mark.parametrize("ordering", ["srtf", "las"])
def test_one_job_in_the_system_is_skipped_under_any_ordering(make_workload, zoo, ordering):
    # Sparse arrivals: most rounds hold one job, whose order cannot change; they were planned one by one.
    from synergy_gym.baselines import make_policy

    rng = np.random.default_rng(5)
    n = 40
    names = list(zoo.names)
    w = make_workload([names[i] for i in rng.integers(0, len(names), n)], arrivals=np.sort(rng.uniform(0, 4000 * 3600, n)),
                      iters=rng.integers(1000, 200000, n), gpus=rng.choice([1, 2, 8], n))
    cluster = ClusterSpec(num_servers=1)
    for timing in ("round", "exact"):
        policy = make_policy(f"{ordering}+tune")
        skipped = Simulator(cluster, w, policy, SimulationConfig(timing=timing))
        every = EveryRound(cluster, w, policy, SimulationConfig(timing=timing))
        a, b = skipped.run(), every.run()
        np.testing.assert_allclose(a.jobs["finish_s"], b.jobs["finish_s"], rtol=1e-9)
        assert skipped.rounds_planned < every.rounds_planned / 2


def test_same_input_gives_identical_results(make_workload):
    w = make_workload(["res18", "gnmt", "m5", "alexnet"] * 5, arrivals=np.arange(20) * 500.0, iters=[20000] * 20)
    cluster = ClusterSpec(num_servers=1)
    a, b = run(cluster, w), run(cluster, w)
    assert a.jobs.equals(b.jobs) and a.rounds.equals(b.rounds)


def test_srtf_serves_the_shortest_remaining_job_first(make_workload):
    w = make_workload(["gnmt", "gnmt", "gnmt"], arrivals=[0, 0, 0], iters=[7500, 2500, 5000])
    jobs = run(ONE_GPU, w, policy=SchedulingPolicy(SRTF(), Tune())).jobs
    assert jobs["finish_s"].tolist() == [1800, 300, 900]


def test_las_shares_time_between_jobs(make_workload):
    w = make_workload(["gnmt", "gnmt"], arrivals=[0, 0], iters=[5000, 5000])
    jobs = run(ONE_GPU, w, policy=SchedulingPolicy(LAS(), FairShare())).jobs
    # Job 0 runs round 1, job 1 (less service) round 2, then they alternate.
    assert jobs["finish_s"].tolist() == [900, 1200]


def test_starvation_guard_serves_a_starving_job_first(make_workload):
    # Under SRTF a stream of short jobs starves the long job; with a 900 s guard it runs anyway.
    n_short = 10
    arrivals = [0] + [300 * i for i in range(n_short)]  # a short job every round
    w = make_workload(["gnmt"] * (n_short + 1), arrivals=arrivals, iters=[25000] + [2500] * n_short)
    policy = SchedulingPolicy(SRTF(), Tune())
    starved = run(ONE_GPU, w, policy=policy).jobs
    guarded = run(ONE_GPU, w, policy=policy, starvation_s=900).jobs
    assert starved.loc[0, "start_s"] == 300 * n_short
    # Waiting since 0, it is bumped at the first round after 900 s and then keeps the GPU.
    assert guarded.loc[0, "start_s"] == 1200


def test_utilisation_and_throughput_are_recorded(make_workload):
    cluster = ClusterSpec(num_servers=1, gpus_per_server=2, cpus_per_server=24, mem_gb_per_server=500)
    w = make_workload(["alexnet"], arrivals=[0], iters=[1470 * 2])  # 2.94× at its demand: 1470 per round
    result = run(cluster, w)
    rounds = result.rounds
    assert rounds["rounds"].sum() == 2 and rounds["gpu_util"].iloc[0] == 0.5
    assert rounds["cpu_util"].iloc[0] == 0.5 and rounds["mem_util"].iloc[0] == 0.25
    assert rounds["throughput"].iloc[0] == 2.94
    assert result.summary.mean_throughput == pytest.approx(2.94)


def test_summary_is_over_the_measured_window(make_workload):
    w = make_workload(["gnmt"] * 3, arrivals=[0, 0, 0], iters=[2500] * 3, measured=[False, True, False], run_until="window")
    sim = Simulator(ONE_GPU, w, FIFO_TUNE)
    s = sim.run().summary
    assert s.jobs_measured == 1 and s.mean_jct_h == pytest.approx(600 / 3600)
    assert s.jobs_finished == 2  # the run ends when the window is done


def test_round_too_short_for_an_iteration_is_rejected(make_workload):
    w = make_workload(["gnmt"], arrivals=[0], iters=[10], iter_time_s=[400.0])
    with pytest.raises(WorkloadError, match="job 0: iter_time_s=400 is too long"):
        Simulator(ONE_GPU, w, FIFO_TUNE)
    assert run(ONE_GPU, w, timing="exact").jobs.loc[0, "finish_s"] == pytest.approx(4000)


def test_bad_config_values_are_named():
    with pytest.raises(ConfigError, match="round_s must be a positive number of seconds, got 0"):
        SimulationConfig(round_s=0)
    with pytest.raises(UnknownNameError, match="unknown timing 'fast'"):
        SimulationConfig(timing="fast")
    with pytest.raises(UnknownNameError, match="unknown placement 'random'"):
        SimulationConfig(placement="random")
    with pytest.raises(UnknownNameError, match=r"^unknown timing None; valid: round, exact$"):
        SimulationConfig(timing=None)  # was: "unknown timing 'None'", as if the text 'None' had been given


def test_observer_sees_every_planned_round(make_workload):
    w = make_workload(["gnmt"], arrivals=[0], iters=[7000])
    seen = []
    Simulator(ONE_GPU, w, FIFO_TUNE, observer=lambda sim, placed, tput: seen.append((sim.now, placed.tolist()))).run()
    assert seen == [(0.0, [0])]  # three identical rounds planned once


def test_per_round_utilisation_expands_stretches_and_idle_gaps(make_workload):
    w = make_workload(["gnmt", "gnmt"], arrivals=[0, 3000], iters=[5000, 2500])
    per_round = run(ONE_GPU, w).per_round()
    assert per_round["round_start_s"].tolist() == [300.0 * k for k in range(11)]
    assert per_round["gpu_util"].tolist() == [1, 1] + [0] * 8 + [1]
    exact = run(ONE_GPU, make_workload(["gnmt"], arrivals=[0], iters=[500]), timing="exact").per_round()
    assert exact["gpu_util"].tolist() == pytest.approx([0.2])  # 60 s of a 300 s round
