"""The rollout's candidate sets (synergy_gym.baselines.rollout_candidates) and its departure rule (``--depart``)."""

from __future__ import annotations

from collections import Counter

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.baselines.base_episode import base_action
from synergy_gym.baselines.env_heuristics import env_heuristics
from synergy_gym.baselines.rollout_bound import RolloutPolicy, check_env, compare_seed, main
from synergy_gym.baselines.rollout_candidates import BASE_NAMES, candidate_actions, distinct_outcomes
from synergy_gym.baselines.sampled_futures import future_models
from synergy_gym.errors import ConfigError, UnknownNameError

#: How the module's one-line errors start (as its argument parser's own).
ERROR = "python -m synergy_gym.baselines.rollout_bound: error: "

ENV = "Synergy-small-scarce-v0"


@pytest.mark.parametrize("preemptive", [False, True])
def test_heuristic_candidates_are_the_base_action_then_every_heuristics_action(preemptive):
    env = gym.make(ENV, preemptive=preemptive, num_jobs=30)
    obs, _ = env.reset(seed=5, options={"workload_seed": 5})
    u = env.unwrapped
    policies = {name: env_heuristics()[name] for name in BASE_NAMES}
    base = policies["tetris+greedy"]
    sizes = []
    for _ in range(60):
        b = base_action(base, env, obs)
        every = candidate_actions(env, obs, b, "heuristics", base, dedupe=False)
        others = {base_action(h, env, obs) for h in policies.values()} - {b}
        assert every == [b, *sorted(others)]
        assert all(u.action_masks()[a] for a in every)
        assert candidate_actions(env, obs, b, "heuristics", base) == distinct_outcomes(u, every)
        assert RolloutPolicy("tetris+greedy", "heuristics").candidate_actions(env, obs, b) == distinct_outcomes(u, every)
        sizes.append(len(every))
        obs, _, terminated, truncated, _ = env.step(b)
        if terminated or truncated:
            break
    assert max(sizes) >= 3  # the heuristics disagree, so the set is more than the base action


def test_a_rollout_over_the_heuristics_runs_in_the_preemptive_mode_and_is_never_worse():
    check_env(None, "heuristics", "--preemptive")  # what the command line checks before any rollout: no error
    policy = RolloutPolicy("tetris+greedy", "heuristics", every=2)
    row = compare_seed(ENV, policy, 4, {"preemptive": True, "num_jobs": 14})
    assert row.rollout_mean_jct_h <= row.base_mean_jct_h + 1e-9
    assert 1 <= row.mean_candidates <= len(BASE_NAMES)
    full = compare_seed(ENV, RolloutPolicy("tetris+greedy", "all", every=2), 4, {"preemptive": True, "num_jobs": 14})
    assert full.mean_candidates > row.mean_candidates


def _expected(actions: list[int], totals: np.ndarray, agree: bool) -> int:
    """The rule written out: the least mean (the base first on ties), among those beating the base on every future."""
    means = totals.mean(axis=1)
    allowed = [k for k in range(len(actions)) if k == 0 or not agree or bool(np.all(totals[k] < totals[0] - 1e-6))]
    best = min(means[k] for k in allowed)
    if means[0] <= best + 1e-6:
        return actions[0]
    return actions[next(k for k in allowed if means[k] <= best + 1e-6)]


@pytest.mark.slow
def test_agree_departs_only_for_a_candidate_that_beats_the_base_on_every_future():
    env = gym.make(ENV, preemptive=True, num_jobs=30)
    obs, _ = env.reset(seed=5, options={"workload_seed": 5})
    best = RolloutPolicy("tetris+greedy", "heuristics", future="sampled", futures=3)
    agree = RolloutPolicy("tetris+greedy", "heuristics", future="sampled", futures=3, depart="agree")
    known = RolloutPolicy("tetris+greedy")
    history: list[int] = []
    outcomes: Counter[str] = Counter()
    for step in range(34):
        b = base_action(best.base, env, obs)
        if step < 20:  # the first decisions, where the heuristics mostly agree, are only played
            history.append(b)
            obs, *_ = env.step(b)
            continue
        actions = best.candidate_actions(env, obs, b)
        models = future_models(env, 5, history, 3)
        totals = np.array([[known.value(m, a) for m in models] for a in actions])
        d_best, d_agree = best.decide(env, obs, seed=5, history=history), agree.decide(env, obs, seed=5, history=history)
        assert d_best.action == _expected(actions, totals, agree=False)
        assert d_agree.action == _expected(actions, totals, agree=True)
        assert d_agree.base_value_s == pytest.approx(totals[0].mean(), rel=1e-12)
        kind = {True: "departs", False: "stays"}
        outcomes[f"best {kind[d_best.action != b]}, agree {kind[d_agree.action != b]}"] += 1
        history.append(b)
        obs, *_ = env.step(b)
    # both kinds of decision the rule tells apart occurred: departures it keeps and ones it refuses
    assert outcomes["best departs, agree departs"] > 0 and outcomes["best departs, agree stays"] > 0, outcomes


def test_departure_rules_are_checked(capsys):
    with pytest.raises(UnknownNameError, match="departure rule"):
        RolloutPolicy(future="sampled", depart="vote")
    with pytest.raises(ConfigError, match="--depart agree applies only with --future sampled, not --future hidden"):
        RolloutPolicy(future="hidden", depart="agree")
    assert main(["--depart", "agree", "--seeds", "1"]) == 2
    assert capsys.readouterr().err == ERROR + "--depart agree applies only with --future sampled, not --future known\n"
    assert main(["--future", "sampled", "--depart", "vote", "--seeds", "1"]) == 2
    assert capsys.readouterr().err.startswith(ERROR + "unknown departure rule 'vote'")


def test_candidate_actions_refuses_an_unknown_set_and_reduced_with_preemption():
    env = gym.make(ENV, num_jobs=14)
    obs, _ = env.reset(seed=3, options={"workload_seed": 3})
    base = env_heuristics()["srtf+price"]
    b = base_action(base, env, obs)
    with pytest.raises(UnknownNameError, match="unknown candidate set 'bogus'; valid: all, reduced, heuristics"):
        candidate_actions(env, obs, b, "bogus", base)
    pre = gym.make(ENV, preemptive=True, num_jobs=14)
    obs, _ = pre.reset(seed=3, options={"workload_seed": 3})
    with pytest.raises(ConfigError, match="candidates 'reduced' runs only non-preemptive environments"):
        candidate_actions(pre, obs, base_action(base, pre, obs), "reduced", base)


def test_a_carried_base_value_is_refused_without_a_known_future():
    env = gym.make(ENV, preemptive=True, num_jobs=14)
    obs, _ = env.reset(seed=3, options={"workload_seed": 3})
    policy = RolloutPolicy("tetris+greedy", "heuristics", future="sampled", futures=2, depart="agree")
    with pytest.raises(ConfigError, match="base_value_s carries over only with a known future, not future='sampled'"):
        policy.decide(env, obs, base_value_s=1.0, seed=3)
