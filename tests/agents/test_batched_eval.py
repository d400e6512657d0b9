"""Agents evaluated in batches (episodes side by side, one forward pass a step) act exactly as one at a time.

The reference is :func:`synergy_gym.evaluate` with the same agent behind a wrapper that offers only
``predict`` (one observation at a time, SB3's own path). Every action of every seed is recorded by an
environment wrapper and compared, and so are the rows (all but ``wall_s``) and the per-job JCTs.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.agents.batched_policy import TIE_TOLERANCE
from synergy_gym.agents.pretrained_policies import load_pretrained
from synergy_gym.agents.wrappers import AgentPolicy
from synergy_gym.experiments.evaluation import evaluate

SEEDS = [3, 5, 8]


class OneAtATime:
    """The agent without ``batch_predictor``: evaluated one observation at a time through its ``predict``."""

    def __init__(self, agent: AgentPolicy) -> None:
        self.agent, self.name = agent, agent.name

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True, action_masks=None):
        return self.agent.predict(observation, state, episode_start, deterministic, action_masks)


class Spy:
    """The agent, keeping the batch predictor it hands out (to count its calls and its rows decided again)."""

    def __init__(self, agent: AgentPolicy) -> None:
        self.agent, self.name, self.predictors = agent, agent.name, []
        self.calls = 0

    def predict(self, *args, **kwargs):
        return self.agent.predict(*args, **kwargs)

    def batch_predictor(self, deterministic: bool = True):
        inner = self.agent.batch_predictor(deterministic)
        self.predictors.append(inner)

        def predict(observations, action_masks):
            self.calls += 1
            return inner(observations, action_masks)

        return None if inner is None else predict


def recording(env_id: str, actions: dict[int, list[int]]):
    """An environment factory for ``evaluate`` whose environments note every action by episode seed."""

    class Record(gym.Wrapper):
        def reset(self, *, seed=None, options=None):
            self.seed_ = seed
            actions[seed] = []
            return self.env.reset(seed=seed, options=options)

        def step(self, action):
            actions[self.seed_].append(int(action))
            return self.env.step(action)

    return lambda **kwargs: Record(gym.make(env_id, **kwargs))


def both_ways(agent: AgentPolicy, env_id: str, seeds: list[int], **env_kwargs: Any):
    """(rows, actions) one at a time, then in batches (checking the batches were used)."""
    runs = []
    for policy in (OneAtATime(agent), Spy(agent)):
        actions: dict[int, list[int]] = defaultdict(list)
        df = evaluate(policy, recording(env_id, actions), seeds, keep_jcts=True, keep_jobs=True, log_decisions=True,
                      **env_kwargs)
        runs.append((df, dict(actions), policy))
    (one, one_actions, _), (batched, batched_actions, spy) = runs
    assert spy.predictors and spy.predictors[0] is not None and 0 < spy.calls < sum(map(len, one_actions.values()))
    assert batched_actions == one_actions  # every action of every seed
    assert list(batched["seed"]) == seeds
    for a, b in zip(one["jct_h"], batched["jct_h"]):
        assert a == b  # bit-identical per-job JCTs
    for a, b in zip(one["jobs"], batched["jobs"]):
        pd.testing.assert_frame_equal(a, b)
    assert one["decision_log"].iloc[0] == batched["decision_log"].iloc[0] and batched["decision_log"].iloc[1:].isna().all()
    plain = ["jct_h", "jobs", "decision_log", "wall_s"]
    pd.testing.assert_frame_equal(one.drop(columns=plain), batched.drop(columns=plain))
    return one, spy.predictors[0]


def _tiny(algo: str, env_id: str, action_head: str = "linear", normalized: bool = False, **env_kwargs) -> AgentPolicy:
    """An untrained model (and, ``normalized``, statistics gathered from a few random steps)."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from synergy_gym.agents.features import SynergyExtractor

    vec: Any = DummyVecEnv([lambda: gym.make(env_id, **env_kwargs)])
    if normalized:
        vec = VecNormalize(vec, norm_reward=False)
        vec.reset()
        rng = np.random.default_rng(0)
        for _ in range(60):
            vec.step(np.array([int(rng.integers(vec.action_space.n))]))
        vec.training = False
    policy_kwargs: dict[str, Any] = {"features_extractor_class": SynergyExtractor,
                                     "features_extractor_kwargs": {"global_dim": 16, "slot_dim": 8}, "net_arch": [16]}
    policy: Any = "MultiInputPolicy"
    if action_head == "per_slot":
        from synergy_gym.agents.slot_policy import MaskableSlotPolicy

        policy, policy_kwargs["net_arch"] = MaskableSlotPolicy, {"pi": [], "vf": [16]}
    cls: Any = MaskablePPO if algo == "maskable_ppo" else PPO
    model = cls(policy, vec, n_steps=8, batch_size=8, policy_kwargs=policy_kwargs, device="cpu", seed=1)
    return AgentPolicy(model, vec if normalized else None, name=algo)


@pytest.mark.parametrize("algo, action_head, normalized, env_kwargs", [
    ("maskable_ppo", "linear", True, {"num_jobs": 12, "max_rounds": 300}),
    ("maskable_ppo", "per_slot", True, {"num_jobs": 10, "preemptive": True}),
    ("maskable_ppo", "linear", False, {"num_jobs": 8, "preemptive": True, "max_rounds": 300}),  # some cut off
    ("ppo", "linear", False, {"num_jobs": 12}),
    ("ppo", "linear", True, {"num_jobs": 8, "preemptive": True, "max_rounds": 300}),
])
def test_tiny_models_act_the_same_in_batches_as_one_at_a_time(algo, action_head, normalized, env_kwargs):
    agent = _tiny(algo, "Synergy-small-v0", action_head, normalized, **env_kwargs)
    one, _ = both_ways(agent, "Synergy-small-v0", SEEDS, **env_kwargs)
    assert (one["decisions"] > 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("preemptive", [False, True])
def test_the_pretrained_policy_acts_the_same_in_batches_as_one_at_a_time(preemptive):
    # A default-mode policy: with preemption, in the mode that re-decides every job (the same spaces).
    agent = load_pretrained("small-scarce")
    mode = {"preemptive": True, "redecide": "every_event"} if preemptive else {}
    one, predictor = both_ways(agent, "Synergy-small-scarce-v0", [1000000, 1000001], num_jobs=40, **mode)
    decisions = int(one["decisions"].sum())
    assert predictor.redone < 0.05 * decisions  # near-ties are rare for a trained policy: the batches do the work


def test_batched_logits_differ_from_one_row_by_far_less_than_the_tie_tolerance():
    """The margin the exactness rests on: a batch's logits against each row's own forward pass."""
    agent = load_pretrained("small-scarce")
    predictor = agent.batch_predictor(True)
    env = gym.make("Synergy-small-scarce-v0", num_jobs=40, preemptive=True, redecide="every_event")
    obs, _ = env.reset(seed=1000002, options={"workload_seed": 1000002})
    seen = []
    for _ in range(64):
        seen.append(obs)
        action, _ = agent.predict(obs, action_masks=env.unwrapped.action_masks())
        obs, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            break
    env.close()
    batch = predictor.logits({k: np.stack([o[k] for o in seen]) for k in seen[0]})
    for i, o in enumerate(seen):
        row = predictor.logits({k: v[None] for k, v in o.items()})[0]
        scale = 1.0 + float(row.abs().max())
        assert float((batch[i] - row).abs().max()) <= TIE_TOLERANCE * scale / 100


def test_only_deterministic_actor_critic_decisions_are_batched():
    from stable_baselines3 import DQN

    agent = _tiny("ppo", "Synergy-small-v0", num_jobs=5)
    assert agent.batch_predictor(True) is not None and agent.batch_predictor(False) is None
    env = gym.make("Synergy-small-v0", num_jobs=5)
    dqn = AgentPolicy(DQN("MultiInputPolicy", env, buffer_size=100, learning_starts=1, device="cpu"), None)
    assert dqn.batch_predictor(True) is None  # DQN runs one observation at a time
    env.close()


def test_evaluate_and_benchmark_decide_with_one_torch_thread_on_the_cpu_and_restore_it_after(tmp_path, capsys,
                                                                                           monkeypatch):
    # PyTorch's default thread count made an agent's episode 20x slower on a busy 2-core machine; the two
    # commands now decide with one thread on the CPU (as train trains) and leave the caller's setting as it was.
    import torch

    import synergy_gym.agents.batched_policy as batched_policy
    from tests.support.cli_runs import run_cli

    seen: list[int] = []
    original = batched_policy._Predictor.__call__

    def spy(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(batched_policy._Predictor, "__call__", spy)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for argv in (["evaluate", "--model", "pretrained:small", "--env", "Synergy-small-v0", "--seeds", "7",
                      "--env-kwargs", "num_jobs=12", "--allow-env-mismatch", "--baselines", "none", "--device", "cpu",
                      "--quiet", "--out", str(tmp_path / "e")],
                     ["benchmark", "--model", "pretrained:small", "--env", "Synergy-small-v0", "--mode", "default",
                      "--seeds", "7", "--env-kwargs", "num_jobs=12", "--device", "cpu", "--quiet",
                      "--out", str(tmp_path / "b")]):
            seen.clear()
            code, _, err = run_cli(argv, capsys)
            assert code == 0, err
            assert seen and set(seen) == {1}, (argv[0], seen)
            assert torch.get_num_threads() == 2, argv[0]
    finally:
        torch.set_num_threads(previous)
