"""The compiled kernels (numba) and the numpy code they replace give identical results.

``kernels="numba"`` and ``kernels="numpy"`` environments are stepped side by side with the same
actions; every observation array, reward and info entry must be equal to the bit. The golden
files (tests/test_golden.py) then pin both paths, whichever one ``auto`` picks here.
"""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym import ClusterSpec, SimulationConfig, Simulator, SyntheticWorkload
from synergy_gym.baselines.registry import make_policy
from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.sim import kernels

needs_numba = pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba is not installed: only the numpy path exists")

#: Modes that take different paths: slots of jobs that never ran vs that may have run (preemptive),
#: re-placement in Tune's order (multi-GPU), scarce CPUs (reclaiming, fallbacks), the grid of levels,
#: the 128-GPU cluster.
CASES = [
    ("Synergy-small-v0", {}),
    ("Synergy-small-v0", {"preemptive": True}),
    ("Synergy-small-v0", {"multigpu": True}),
    ("Synergy-small-scarce-v0", {"levels": "grid"}),
    ("Synergy-scarce-v0", {"agent_orders": False}),
]


def assert_same(a, b, where):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b), f"{where}: {a} != {b}"
    else:
        assert a == b and type(a) is type(b), f"{where}: {a!r} != {b!r}"


@needs_numba
@pytest.mark.parametrize("env_id,kwargs", CASES)
def test_numba_and_numpy_environments_are_identical_step_by_step(env_id, kwargs):
    envs = [gym.make(env_id, kernels=k, **kwargs).unwrapped for k in ("numba", "numpy")]
    assert envs[0].sim_config.kernels == "numba" and envs[0].obs_builder.numba
    assert not envs[1].obs_builder.numba
    rng = np.random.default_rng(7)
    steps = 0
    for seed in (0, 1):
        obs = [env.reset(seed=seed)[0] for env in envs]
        assert_same(obs[0], obs[1], f"reset {seed}")
        done = False
        while not done and steps < 1500:
            valid = np.flatnonzero(envs[0].action_masks())
            # Mostly valid actions; now and then any action (falls back), and stop.
            a = int(rng.integers(envs[0].action_space.n)) if steps % 11 == 0 else int(rng.choice(valid))
            out = [env.step(a) for env in envs]
            assert_same(out[0][0], out[1][0], f"step {steps} observation")
            assert out[0][1:4] == out[1][1:4], f"step {steps}: reward/terminated/truncated"
            assert_same(out[0][4], out[1][4], f"step {steps} info")
            done = out[0][2] or out[0][3]
            steps += 1
    np.testing.assert_array_equal(envs[0].sim.jobs.progress, envs[1].sim.jobs.progress)


@needs_numba
@pytest.mark.parametrize("policy", ["fifo+tune", "srtf+tune", "fifo+fair"])
def test_numba_and_numpy_simulators_finish_every_job_at_the_same_time(policy):
    """Static orderings skip rounds (the kernel decides how many); dynamic ones run round by round."""
    cluster = ClusterSpec(num_servers=4)
    workload = SyntheticWorkload(jobs_per_hour=3.0, seed=3, num_jobs=200, multigpu=True, max_gpus=32).build()
    finish = []
    for k in ("numba", "numpy"):
        sim = Simulator(cluster, workload, make_policy(policy), SimulationConfig(kernels=k))
        sim.run()
        finish.append(sim.jobs.finish_s.copy())
        np.testing.assert_array_equal(finish[0], finish[-1])
    assert not np.isnan(finish[0]).any()


@needs_numba
@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), max_size=400))
def test_pairwise_sum_is_numpys_sum_to_the_bit(values):
    a = np.array(values, dtype=float)
    assert kernels.pairwise_sum(a) == np.add.reduce(a)


def test_kernels_setting_is_validated_by_name():
    with pytest.raises(UnknownNameError, match="unknown kernels 'fast'; valid: auto, numba, numpy"):
        SimulationConfig(kernels="fast")
    with pytest.raises(UnknownNameError, match="kernels"):
        gym.make("Synergy-small-v0", kernels="gpu")
    assert kernels.use_numba("numpy") is False
    assert kernels.use_numba("auto") is kernels.HAVE_NUMBA


def test_without_numba_auto_uses_numpy_and_numba_is_refused(monkeypatch):
    monkeypatch.setattr(kernels, "HAVE_NUMBA", False)
    assert kernels.use_numba("auto") is False
    with pytest.raises(ConfigError, match="kernels='numba' needs the numba package"):
        kernels.use_numba("numba")
    env = gym.make("Synergy-small-v0").unwrapped  # still works, on the numpy path
    assert not env.obs_builder.numba
    env.reset(seed=0)
    env.step(int(np.flatnonzero(env.action_masks())[0]))
