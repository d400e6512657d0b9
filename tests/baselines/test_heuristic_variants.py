"""The named heuristic variant ``tetris+greedy+readmit``: what it does, and its name (the agents' side:
tests/agents/test_heuristic_variant_names.py)."""

from __future__ import annotations

import gymnasium as gym
import pytest

from synergy_gym.baselines.env_heuristics import (
    HEURISTIC_NAMES,
    NAMED_HEURISTICS,
    VARIANT_NAMES,
    TetrisGreedy,
    env_heuristic,
)
from synergy_gym.baselines.rollout_bound import base_policy
from synergy_gym.env.observation import SLOT_FEATURES
from synergy_gym.errors import UnknownNameError

ENV = "Synergy-small-scarce-v0"
_WAS_RUNNING = SLOT_FEATURES.index("was_running")


def episode(policy: TetrisGreedy, seed: int, **kwargs) -> tuple[list[int], int, float]:
    """(the actions, how many admitted a job preempted earlier in the same event, mean JCT h)."""
    env = gym.make(ENV, num_jobs=60, **kwargs)
    u = env.unwrapped
    obs, _ = env.reset(seed=seed)
    actions, readmitted = [], 0
    while True:
        a = int(policy.predict(obs, action_masks=u.action_masks())[0])
        if a < u.layout.preempt and "running_slots" in obs:  # an admission (ahead or not): its slot
            readmitted += int(policy.structured(obs)["slots"][(a % u.layout.ahead) // u.layout.n_levels, _WAS_RUNNING] > 0)
        actions.append(a)
        obs, _, terminated, truncated, info = env.step(a)
        if terminated or truncated:
            return actions, readmitted, float(info["mean_jct_h"])


@pytest.mark.parametrize("seed", [0, 1])
def test_readmit_admits_a_job_preempted_in_the_same_event_and_the_default_never_does(seed):
    default, default_readmitted, default_jct = episode(TetrisGreedy(), seed, preemptive=True)
    readmit, readmitted, readmit_jct = episode(TetrisGreedy(readmit=True), seed, preemptive=True)
    assert default_readmitted == 0
    assert readmitted > 0
    assert readmit != default and readmit_jct != default_jct


def test_readmit_is_tetris_greedy_without_preemption():
    default, _, default_jct = episode(TetrisGreedy(), 3)
    readmit, _, readmit_jct = episode(TetrisGreedy(readmit=True), 3)
    assert readmit == default and readmit_jct == default_jct


def test_the_variant_is_named_and_looked_up_but_not_one_of_the_default_heuristics():
    assert VARIANT_NAMES == ("tetris+greedy+readmit",)
    assert not set(VARIANT_NAMES) & set(HEURISTIC_NAMES)
    assert NAMED_HEURISTICS == HEURISTIC_NAMES + VARIANT_NAMES
    policy = env_heuristic("tetris+greedy+readmit")
    assert isinstance(policy, TetrisGreedy) and policy.readmit and policy.name == "tetris+greedy+readmit"
    plain = env_heuristic("tetris+greedy")
    assert not plain.readmit and plain.name == "tetris+greedy"
    with pytest.raises(UnknownNameError, match="unknown env heuristic 'tetris\\+readmit'; valid: .*tetris\\+greedy\\+readmit"):
        env_heuristic("tetris+readmit")


def test_the_variant_is_a_rollout_base():
    assert base_policy("tetris+greedy+readmit").readmit
    assert not any(getattr(base_policy(name), "readmit", False) for name in HEURISTIC_NAMES if name != "random")
