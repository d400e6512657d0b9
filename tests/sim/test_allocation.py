"""Hand-checked allocations on tiny clusters."""

import numpy as np
import pytest

from synergy_gym import ClusterSpec, FairShare, Greedy, Tune
from synergy_gym.sim.allocation import admit_by_gpus, reclaim_servers
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.ledger import ClusterLedger

# One server with 4 GPUs and a fair share of 3 CPUs, 62.5 GB per GPU.
ONE_SERVER = ClusterSpec(num_servers=1, gpus_per_server=4, cpus_per_server=12, mem_gb_per_server=250)


def allocate(mechanism, cluster, workload, placement="first_fit"):
    jobs = JobTable(cluster, workload)
    ledger = ClusterLedger(cluster, placement)
    mechanism.allocate(ledger, jobs, list(range(jobs.n)))
    ledger.check_capacity()
    grants = {ledger.jobs[s]: (ledger.cpu[s], ledger.mem[s], ledger.tput[s], ledger.parts[s]) for s in range(len(ledger.jobs))}
    return grants, ledger


@pytest.fixture
def two_res18_two_gnmt(make_workload):
    # res18 asks for 9 CPUs/62.5 GB (2.4×); gnmt for 1 CPU/20 GB (1.0×).
    return make_workload(["res18", "res18", "gnmt", "gnmt"], [0, 1, 2, 3], [100] * 4)


def test_fair_gives_every_job_the_gpu_proportional_share(two_res18_two_gnmt):
    grants, ledger = allocate(FairShare(), ONE_SERVER, two_res18_two_gnmt)
    assert {j: g[:3] for j, g in grants.items()} == {j: (3.0, 62.5, 1.0) for j in range(4)}
    assert ledger.free_cpu.tolist() == [0.0] and ledger.free_mem.tolist() == [0.0]


def test_greedy_skips_a_job_whose_demand_does_not_fit(two_res18_two_gnmt):
    grants, ledger = allocate(Greedy(), ONE_SERVER, two_res18_two_gnmt)
    # res18 #1 takes 9 CPUs; res18 #2 needs 9 of the 3 left and is skipped; the gnmt jobs fit.
    assert sorted(grants) == [0, 2, 3]
    assert grants[0][:3] == (9.0, 62.5, 2.4)
    assert grants[2][:3] == (1.0, 20.0, 1.0)
    assert ledger.free_gpu.tolist() == [1] and ledger.free_cpu.tolist() == [1.0]


def test_tune_downgrades_the_over_provisioned_job_to_make_room(two_res18_two_gnmt):
    grants, ledger = allocate(Tune(), ONE_SERVER, two_res18_two_gnmt)
    # res18 #1 gets 9 CPUs, res18 #2 its fair 3 (0 left); gnmt #1 then needs 1 CPU:
    # res18 #1 is switched to its fair share, freeing 6; gnmt #2 fits in what is left.
    assert grants[0][:3] == (3.0, 62.5, 1.0)
    assert grants[1][:3] == (3.0, 62.5, 1.0)
    assert grants[2][:3] == grants[3][:3] == (1.0, 20.0, 1.0)
    assert ledger.free_cpu.tolist() == [4.0] and ledger.free_mem.tolist() == pytest.approx([85.0])


def test_tune_downgrades_one_job_at_a_time_in_the_reference_order(make_workload):
    cluster = ClusterSpec(num_servers=1, gpus_per_server=4, cpus_per_server=24, mem_gb_per_server=500)  # fair: 6 CPUs, 125 GB
    w = make_workload(["alexnet", "alexnet", "res18", "gnmt"], [0, 1, 2, 3], [100] * 4)
    grants, ledger = allocate(Tune(), cluster, w)
    # Both alexnets get their 12 CPUs. res18 falls back to min(9, 6) = 6 CPUs: the first
    # alexnet is cut to its fair 6 (enough). gnmt's 1 CPU then needs the second alexnet cut.
    assert grants[0][:3] == (6.0, 125.0, 1.75)
    assert grants[1][:3] == (6.0, 125.0, 1.75)
    assert grants[2][:3] == (6.0, 62.5, 1.75)
    assert grants[3][:3] == (1.0, 20.0, 1.0)
    assert ledger.free_cpu.tolist() == [5.0]


def test_first_fit_spans_servers_but_consolidate_does_not(make_workload):
    cluster = ClusterSpec(num_servers=2, gpus_per_server=4, cpus_per_server=12, mem_gb_per_server=250)
    w = make_workload(["gnmt", "gnmt"], [0, 1], [10, 10], gpus=[3, 2])
    grants, _ = allocate(FairShare(), cluster, w)
    assert grants[0][3] == [(0, 3)] and grants[1][3] == [(0, 1), (1, 1)]
    grants, _ = allocate(FairShare(), cluster, w, placement="consolidate")
    assert grants[0][3] == [(0, 3)] and grants[1][3] == [(1, 2)]


def test_consolidate_prefers_the_fullest_server_that_holds_the_job(make_workload):
    cluster = ClusterSpec(num_servers=3, gpus_per_server=4, cpus_per_server=12, mem_gb_per_server=250)
    w = make_workload(["gnmt"] * 3, [0, 1, 2], [10] * 3, gpus=[4, 2, 1])
    grants, _ = allocate(FairShare(), cluster, w, placement="consolidate")
    assert grants[0][3] == [(0, 4)]
    assert grants[1][3] == [(1, 2)]
    assert grants[2][3] == [(1, 1)]  # server 1 has 2 free GPUs, server 2 has 4


def test_tune_places_multi_gpu_jobs_first(make_workload):
    cluster = ClusterSpec(num_servers=1, gpus_per_server=4, cpus_per_server=12, mem_gb_per_server=250)
    w = make_workload(["res18", "gnmt"], [0, 1], [10, 10], gpus=[1, 2])
    jobs = JobTable(cluster, w)
    ledger = ClusterLedger(cluster)
    Tune().allocate(ledger, jobs, [0, 1])
    assert ledger.jobs.tolist() == [1, 0]


def test_admission_backfills_smaller_jobs():
    assert admit_by_gpus([0, 1, 2, 3], [4, 8, 2, 2], free=7) == [0, 2]
    assert admit_by_gpus([0, 1], [1, 1], free=0) == []


def test_reclaim_servers_follow_the_reference_rule():
    # A multi-GPU job takes the first server with enough free GPUs...
    assert reclaim_servers([1, 3, 4], 3) == [(1, 3)]
    # ...else servers with the fewest free GPUs first (ties by index).
    assert reclaim_servers([2, 1, 2], 4) == [(1, 1), (0, 2), (2, 1)]
    assert reclaim_servers([0, 2, 1, 1], 1) == [(2, 1)]


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [3, 1, 0, 2], [1, 2]])
def test_set_targets_keeps_the_lists_equal_to_the_arrays(make_workload, order):
    # The Python lists are the hot path's copy of the target columns: a run of jobs is written as one
    # slice, any other order job by job; either way, they must equal the arrays.
    cluster = ClusterSpec(num_servers=1, gpus_per_server=8, cpus_per_server=24, mem_gb_per_server=500)
    jobs = JobTable(cluster, make_workload(["res18", "gnmt", "alexnet", "m5"], [0, 1, 2, 3], [10, 10, 10, 10]))
    cpu = [1.0 + i for i in range(len(order))]
    jobs.set_targets(np.array(order), np.array(cpu), np.full(len(order), 40.0))
    assert jobs.target_cpu[order].tolist() == cpu
    for array, values in [(jobs.target_cpu, jobs.target_cpu_l), (jobs.target_mem, jobs.target_mem_l),
                          (jobs.tput_target, jobs.tput_target_l), (jobs.fallback_cpu, jobs.fallback_cpu_l),
                          (jobs.fallback_mem, jobs.fallback_mem_l), (jobs.tput_fallback, jobs.tput_fallback_l)]:
        assert array.tolist() == values
