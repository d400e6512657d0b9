"""The registered scenarios, and the search that chose the scarce ones, on the environment's workloads."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym
from synergy_gym import SCENARIOS, ConfigError
from synergy_gym.baselines.scenario_search import BOUND, ScarceConfig, run_grid


def test_every_scenario_is_registered_with_its_kwargs():
    assert set(SCENARIOS) == {"Synergy-v0", "Synergy-small-v0", "Synergy-scarce-v0", "Synergy-small-scarce-v0"}
    for env_id, scenario in SCENARIOS.items():
        assert gym.spec(env_id).kwargs == scenario.kwargs
        env = gym.make(env_id).unwrapped
        assert env.cfg.jobs_per_hour == scenario.kwargs["jobs_per_hour"]
        assert env.cfg.num_jobs == scenario.kwargs["num_jobs"]


def test_every_scenario_spec_survives_gymnasiums_json_round_trip():
    # The scarce ids registered their class split as a tuple, which JSON gives back as a list: the spec read back
    # from env.spec.to_json() was not the environment's (a recorded dataset's spec check would fail).
    from gymnasium.envs.registration import EnvSpec

    for env_id in SCENARIOS:
        spec = gym.make(env_id, num_jobs=10).spec
        assert EnvSpec.from_json(spec.to_json()) == spec, env_id


def test_small_scarce_is_the_searched_config():
    env = gym.make("Synergy-small-scarce-v0").unwrapped
    cfg = ScarceConfig(cpus_per_server=16.0, split=(60, 20, 20), jobs_per_hour=3.0)
    assert env.cluster == cfg.cluster()
    # The search's workloads are exactly the environment's episodes.
    a, b = env.workload_for_seed(7), cfg.source(synergy_gym.ModelZoo.default()).workload(7)
    for column in ("arrival_s", "model", "gpus", "total_iters"):
        np.testing.assert_array_equal(getattr(a, column), getattr(b, column))


def test_run_grid_bound_is_below_every_policy():
    rows = run_grid([ScarceConfig(16.0, (60, 20, 20), 3.0, num_jobs=60)], seeds=[0, 1], policies=("fifo+tune", "srtf+tune"))
    assert set(rows.policy) == {BOUND, "fifo+tune", "srtf+tune"}
    per_seed = rows.pivot(index="seed", columns="policy", values="mean_jct_h")
    assert (per_seed[BOUND] <= per_seed["fifo+tune"] + 1e-9).all()
    assert (per_seed[BOUND] <= per_seed["srtf+tune"] + 1e-9).all()


def test_config_parse_rejects_malformed_text():
    assert ScarceConfig.parse("12:20/70/10:2.25") == ScarceConfig(12.0, (20, 70, 10), 2.25)
    with pytest.raises(ConfigError, match="expected CPUS:V/L/S:JOBS_PER_HOUR"):
        ScarceConfig.parse("12:20/70:2.25")
