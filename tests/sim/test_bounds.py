"""The no-waiting bound: every job at its demand from the round boundary after its arrival."""

import numpy as np
import pytest

from synergy_gym import ClusterSpec, ConfigError, Simulator, SyntheticWorkload
from synergy_gym.baselines import make_policy
from synergy_gym.sim.bounds import no_wait_jct_s


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
