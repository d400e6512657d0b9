"""The no-waiting bound: every job at its demand from the round boundary after its arrival (exact timing: from arrival)."""

import numpy as np
import pytest

from synergy_gym import ClusterSpec, ConfigError, SimulationConfig, Simulator, SyntheticWorkload, WorkloadError
from synergy_gym.baselines import make_policy
from synergy_gym.errors import UnknownNameError
from synergy_gym.sim.bounds import no_wait_jct_s, no_wait_start_s


def test_a_lone_job_takes_exactly_the_bound(make_workload):
    w = make_workload(["alexnet"], arrivals=[100.0], iters=[10_000])
    bound = no_wait_jct_s(w, ClusterSpec())
    # alexnet at its demand runs 2.94× faster than at 0.6 s per iteration: floor(300 / (0.6 / 2.94)) = 1470 a round.
    assert bound.tolist() == [(300 - 100) + np.ceil(10_000 / 1470) * 300]
    result = Simulator(ClusterSpec(), w, make_policy("fifo+tune")).run()
    assert result.jobs["jct_s"].tolist() == bound.tolist()


@pytest.mark.parametrize("policy", ["fifo+tune", "srtf+tune", "fifo+fair", "tetris+greedy"])
def test_no_policy_beats_the_bound_on_any_job(policy):
    cluster = ClusterSpec(num_servers=2, cpus_per_server=12)
    w = SyntheticWorkload(jobs_per_hour=2, seed=3, num_jobs=120, multigpu=True, max_gpus=16).build()
    bound = no_wait_jct_s(w, cluster)
    result = Simulator(cluster, w, make_policy(policy)).run()
    jct = result.jobs.set_index("job_id").loc[w.job_id, "jct_s"].to_numpy()
    assert np.all(jct >= bound - 1e-6)
    assert jct.mean() > bound.mean()  # a busy small cluster makes jobs wait


def test_round_length_is_checked(make_workload):
    w = make_workload(["gnmt"], arrivals=[0.0], iters=[10])
    with pytest.raises(ConfigError, match="round_s must be a positive number of seconds"):
        no_wait_jct_s(w, ClusterSpec(), round_s=0)
    # were: AttributeError from inside, and NaN or negative arrivals passed through
    with pytest.raises(WorkloadError, match=r"^no_wait_jct_s\(\): workload must be a Workload, got str$"):
        no_wait_jct_s("w", ClusterSpec())
    with pytest.raises(ConfigError, match=r"^no_wait_jct_s\(\): cluster must be a ClusterSpec .*got 'small'$"):
        no_wait_jct_s(w, "small")
    with pytest.raises(WorkloadError, match=r"^no_wait_start_s\(\): arrival_s\[1\]=nan must be a finite time ≥ 0 s$"):
        no_wait_start_s([0.0, float("nan")])
    with pytest.raises(WorkloadError, match=r"^no_wait_start_s\(\): arrival_s must be arrival times in seconds"):
        no_wait_start_s("x")


@pytest.mark.parametrize("policy", ["fifo+tune", "srtf+tune", "tetris+greedy"])
def test_no_policy_beats_the_bound_under_exact_timing(policy):
    # With exact timing a job runs from its arrival (or the first event after it) at its rate: the bound
    # counts from arrival, never from the next round boundary, which a job can beat by up to a round.
    cluster = ClusterSpec(num_servers=2, cpus_per_server=12)
    w = SyntheticWorkload(jobs_per_hour=2, seed=3, num_jobs=120, multigpu=True, max_gpus=16).build()
    bound = no_wait_jct_s(w, cluster, timing="exact")
    result = Simulator(cluster, w, make_policy(policy), SimulationConfig(timing="exact")).run()
    jct = result.jobs.set_index("job_id").loc[w.job_id, "jct_s"].to_numpy()
    assert np.all(jct >= bound * (1 - 1e-12))
    assert jct.mean() > bound.mean()


def test_under_exact_timing_a_lone_job_takes_its_run_time_from_the_next_event(make_workload):
    w = make_workload(["alexnet"], arrivals=[100.0], iters=[10_000])
    bound = no_wait_jct_s(w, ClusterSpec(), timing="exact")
    # 10,000 iterations at 2.94× the rate of 0.6 s each; the simulator starts it at the boundary at 300 s.
    assert bound[0] == pytest.approx(10_000 * 0.6 / 2.94, rel=1e-3)
    result = Simulator(ClusterSpec(), w, make_policy("fifo+tune"), SimulationConfig(timing="exact")).run()
    assert result.jobs["jct_s"].iloc[0] == pytest.approx(200 + bound[0], rel=1e-12)


def test_a_job_too_slow_for_a_round_is_refused_as_the_simulator_refuses_it(make_workload):
    w = make_workload(["alexnet"], arrivals=[0.0], iters=[10], iter_time_s=[5_000.0])
    with pytest.raises(WorkloadError, match="too long to finish an iteration in a 300 s round"):
        Simulator(ClusterSpec(), w, make_policy("fifo+tune")).run()
    with pytest.raises(WorkloadError, match="job 0: iter_time_s=5000 is too long to finish an iteration in a 300 s round"):
        no_wait_jct_s(w, ClusterSpec())
    assert no_wait_jct_s(w, ClusterSpec(), timing="exact")[0] > 0  # exact timing has no rounds to fit in


def test_timing_is_checked(make_workload):
    w = make_workload(["gnmt"], arrivals=[0.0], iters=[10])
    with pytest.raises(UnknownNameError, match="unknown timing 'exakt'; valid: round, exact"):
        no_wait_jct_s(w, ClusterSpec(), timing="exakt")
