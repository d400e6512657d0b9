"""The simulator's policies and the bounds on the environment's workloads (synergy_gym.baselines.sim_on_env)."""

from __future__ import annotations

import numpy as np
import pytest

import synergy_gym
from synergy_gym.baselines.env_heuristics import env_heuristics
from synergy_gym.baselines.sim_on_env import NO_WAIT_BOUND, simulate_on_env
from synergy_gym.errors import ConfigError

ENV = "Synergy-small-v0"
KWARGS = {"num_jobs": 30, "timing": "exact"}


def test_no_policy_goes_below_the_no_wait_bound_under_exact_timing():
    # Under exact timing a job can start at a completion before the next round boundary: the bound
    # counts from its arrival (from the next boundary it was 15.294 h against fifo+tune's 15.244 h).
    bound = simulate_on_env(NO_WAIT_BOUND, ENV, seeds=[1, 2], keep_jcts=True, keep_jobs=True, **KWARGS)
    runs = [simulate_on_env(p, ENV, seeds=[1, 2], keep_jcts=True, **KWARGS) for p in ("fifo+tune", "srtf+tune")]
    runs.append(synergy_gym.evaluate(env_heuristics()["fifo+tune"], ENV, seeds=[1, 2], **KWARGS))
    for run in runs:
        assert (run["mean_jct_h"].to_numpy() >= bound["mean_jct_h"].to_numpy()).all()
    for seed in range(2):  # job by job, against the simulator's (its per-job JCTs are in the workload's order)
        for run in runs[:2]:
            assert np.all(np.array(run.loc[seed, "jct_h"]) >= np.array(bound.loc[seed, "jct_h"]) * (1 - 1e-12))
    jobs = bound.loc[0, "jobs"]  # under exact timing the bound starts each job at its arrival
    assert np.array_equal(jobs["start_h"].to_numpy(), jobs["arrival_h"].to_numpy())


@pytest.mark.parametrize("seeds", [[1.7], [True], [-1], [np.float64(2.5)], ["1"], [float("inf")]])
def test_seeds_must_be_non_negative_integers(seeds):
    with pytest.raises(ConfigError, match=r"simulate_on_env\(\): seeds must be non-negative integers, got"):
        simulate_on_env("fifo+tune", ENV, seeds=seeds, num_jobs=5)


@pytest.mark.parametrize("env_id, kwargs, words", [
    (ENV, {"seeds": []}, "seeds must be a non-empty list of non-negative integers, got an empty one"),  # was: no rows
    (5, {}, "env_id must be an environment id such as 'Synergy-small-v0' or a callable that makes the environment, "
            "got 5"),  # was: TypeError: 'int' object is not callable
    (ENV, {"on_episode": 5}, "on_episode must be None or a function (done, total), got an int"),
    (ENV, {"keep_jcts": 1}, "keep_jcts must be True or False, got 1"),
])
def test_arguments_are_checked_at_entry(env_id, kwargs, words):
    with pytest.raises(ConfigError) as info:
        simulate_on_env("fifo+tune", env_id, num_jobs=5, **kwargs)
    assert str(info.value) == f"simulate_on_env(): {words}"


def test_seeds_must_be_a_list():
    with pytest.raises(ConfigError, match="seeds must be a list of non-negative integers, got 3"):
        simulate_on_env("fifo+tune", ENV, seeds=3, num_jobs=5)
    assert simulate_on_env("fifo+tune", ENV, seeds=[np.int64(1)], num_jobs=5).loc[0, "seed"] == 1
    assert simulate_on_env("fifo+tune", ENV, seeds=[np.float64(1.0)], num_jobs=5).loc[0, "seed"] == 1  # a whole float
