"""What the environment tests share: a small configuration, the registered ids and modes, an episode runner."""

from __future__ import annotations

import numpy as np
import pytest

SMALL = {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 60, "max_rounds": 4000}
ENV_IDS = ["Synergy-v0", "Synergy-small-v0", "Synergy-scarce-v0", "Synergy-small-scarce-v0"]
MODES = [pytest.param(False, id="default"), pytest.param(True, id="preemptive")]
L = 5  # default levels per slot
Q = 32  # default max_queue


def run_episode(env, seed, actions="valid", rng_seed=0, max_steps=None, options=None):
    """Run an episode: ``actions`` "valid" (random valid), "any" (random over the space) or an int.

    Returns (observations, rewards, infos, actions taken).
    """
    rng = np.random.default_rng(rng_seed)
    u = env.unwrapped
    obs, info = env.reset(seed=seed, options=options)
    observations, rewards, infos, taken = [obs], [], [info], []
    done, steps = False, 0
    while not done and (max_steps is None or steps < max_steps):
        if actions == "valid":
            valid = np.flatnonzero(u.action_masks())
            a = int(valid[rng.integers(valid.size)])
        elif actions == "any":
            a = int(rng.integers(u.action_space.n))
        else:
            a = int(actions)
        obs, reward, terminated, truncated, info = env.step(a)
        observations.append(obs)
        rewards.append(reward)
        infos.append(info)
        taken.append(a)
        done = terminated or truncated
        steps += 1
    return observations, rewards, infos, taken


def assert_same_obs(x, y):
    assert x.keys() == y.keys()
    for key in x:
        np.testing.assert_array_equal(x[key], y[key], err_msg=key)
