"""Property tests on random small clusters and workloads."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synergy_gym import ClusterSpec, SimulationConfig, Simulator, Workload
from synergy_gym.baselines import make_policy, policy_names
from synergy_gym.sim.generator import SyntheticWorkload
from synergy_gym.sim.profiles import ModelZoo

ZOO = ModelZoo.default()


class EveryRound(Simulator):
    def _skippable(self) -> bool:
        return False


@st.composite
def scenarios(draw):
    gpus_per_server = draw(st.sampled_from([1, 2, 4, 8]))
    cluster = ClusterSpec(
        num_servers=draw(st.integers(1, 4)),
        gpus_per_server=gpus_per_server,
        cpus_per_server=gpus_per_server * draw(st.sampled_from([2, 3, 4, 6])),
        mem_gb_per_server=gpus_per_server * draw(st.sampled_from([31.25, 62.5, 125.0, 250.0])),
    )
    n = draw(st.integers(1, 16))
    sizes = [g for g in (1, 2, 3, 4, 8, 16) if g <= cluster.total_gpus]
    workload = Workload.build(
        ZOO,
        job_id=np.arange(n),
        model=draw(st.lists(st.integers(0, len(ZOO) - 1), min_size=n, max_size=n)),
        gpus=draw(st.lists(st.sampled_from(sizes), min_size=n, max_size=n)),
        arrival_s=draw(st.lists(st.floats(0, 6 * 3600, allow_nan=False), min_size=n, max_size=n)),
        total_iters=draw(st.lists(st.integers(1, 30000), min_size=n, max_size=n)),
        # Some jobs carry their own request (as trace jobs do), possibly below the fair share.
        cpu_demand_per_gpu=draw(st.lists(st.one_of(st.just(float("nan")), st.sampled_from([0.5, 1.0, 3.0, 9.0, 24.0])),
                                         min_size=n, max_size=n)),
        mem_demand_per_gpu=draw(st.lists(st.one_of(st.just(float("nan")), st.sampled_from([10.0, 62.5, 250.0])),
                                         min_size=n, max_size=n)),
        run_until="all",
    )
    config = SimulationConfig(
        placement=draw(st.sampled_from(["first_fit", "consolidate"])),
        timing=draw(st.sampled_from(["round", "exact"])),
        starvation_s=draw(st.sampled_from([3600.0, 1000 * 3600.0])),
        debug=True,  # asserts after every round that no server is over any capacity
    )
    return cluster, workload, draw(st.sampled_from(policy_names())), config


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_runs_respect_the_invariants(scenario):
    cluster, workload, policy_name, config = scenario
    policy = make_policy(policy_name)
    below_fair = []

    def watch(sim, placed, tput):
        below = tput < sim.jobs.tput_fair[placed] - 1e-12
        if policy.mechanism.name == "tune" and below.any():
            below_fair.append((sim.now, placed[below].tolist()))

    sim = Simulator(cluster, workload, policy, config, observer=watch)
    result = sim.run()
    jobs = result.jobs
    # Every job finishes.
    assert jobs["finish_s"].notna().all()
    # No job finishes faster than at its best allocation.
    best = ZOO.tput_tensor().max(axis=(1, 2))[workload.model]
    fastest = workload.total_iters * workload.iter_time_s / best
    assert jobs["job_id"].tolist() == workload.job_id.tolist()  # rows follow the workload
    assert np.all(jobs["jct_s"].to_numpy() >= fastest - 1e-6)
    # Tune never runs a job slower than at its fair share.
    assert below_fair == []
    # The same input gives the same result, and skipping identical rounds changes nothing.
    again = (EveryRound if policy.ordering.static else Simulator)(cluster, workload, policy, config).run()
    np.testing.assert_allclose(again.jobs["finish_s"], jobs["finish_s"], rtol=1e-9)
    assert again.jobs["job_id"].equals(jobs["job_id"])


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31), load=st.floats(1, 30), multigpu=st.booleans())
def test_same_seed_gives_identical_workloads_and_results(seed, load, multigpu):
    spec = SyntheticWorkload(jobs_per_hour=load, seed=seed, num_jobs=40, multigpu=multigpu, max_gpus=32)
    a, b = spec.build(), spec.build()
    for name in ("job_id", "model", "gpus", "arrival_s", "total_iters", "measured"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    cluster = ClusterSpec(num_servers=4)
    ra = Simulator(cluster, a, make_policy("fifo+tune")).run()
    rb = Simulator(cluster, b, make_policy("fifo+tune")).run()
    assert ra.jobs.equals(rb.jobs)
    assert ra.summary.mean_jct_h == rb.summary.mean_jct_h
