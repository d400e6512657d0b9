"""The clairvoyant rollout bound (synergy_gym.baselines.rollout_bound).

Faithful copies, never worse than its base, clear errors.
"""

from __future__ import annotations

import copy
import json

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.baselines.base_episode import base_episode, finish_with_base, total_jct_s
from synergy_gym.baselines.rollout_bound import BASE_NAMES, RolloutPolicy, SeedRow, base_policy, compare_seed, main
from synergy_gym.errors import ConfigError, UnknownNameError

#: How the module's one-line errors start (as its argument parser's own).
ERROR = "python -m synergy_gym.baselines.rollout_bound: error: "

ENV = "Synergy-small-scarce-v0"
TINY = {"num_jobs": 14}


def _random_valid(env, rng: np.random.Generator) -> int:
    return int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))


def _play(env, actions_rng: np.random.Generator, obs) -> list:
    """Step ``env`` to the end with random valid actions; the trajectory (action, obs, reward, flags, info)."""
    out = []
    while True:
        a = _random_valid(env, actions_rng)
        obs, r, te, tr, info = env.step(a)
        out.append((a, obs, r, te, tr, info))
        if te or tr:
            return out


def _same(t1: list, t2: list) -> None:
    assert len(t1) == len(t2)
    for (a1, o1, r1, te1, tr1, i1), (a2, o2, r2, te2, tr2, i2) in zip(t1, t2):
        assert a1 == a2 and r1 == r2 and te1 == te2 and tr1 == tr2
        assert o1.keys() == o2.keys() and all(np.array_equal(o1[k], o2[k]) for k in o1)
        assert i1 == i2


def test_deepcopy_reproduces_the_trajectory_and_is_independent():
    env = gym.make(ENV, **TINY).unwrapped
    obs, _ = env.reset(seed=3, options={"workload_seed": 3})
    base = base_policy("srtf+price")
    for _ in range(3):  # some jobs admitted and running before the copy
        a, _ = base.predict(obs, action_masks=env.action_masks())
        obs, *_ = env.step(int(a))
    twin = copy.deepcopy(env)
    now, mask = env.sim.now, env.action_masks().copy()
    copied = _play(twin, np.random.default_rng(7), obs)  # the copy first, to the end
    assert env.sim.now == now and np.array_equal(env.action_masks(), mask)  # the original is untouched
    original = _play(env, np.random.default_rng(7), obs)
    _same(copied, original)
    assert total_jct_s(twin) == total_jct_s(env)
    assert abs(total_jct_s(env) - original[-1][5]["mean_jct_h"] * 3600 * original[-1][5]["jobs_total"]) < 1e-3


@pytest.mark.parametrize("base", ["srtf+price", "srtf+tune"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rollout_is_never_worse_than_its_base(base, seed):
    policy = RolloutPolicy(base, "all")
    env = gym.make(ENV, **TINY)
    base_h, base_total = base_episode(env, policy.base, seed)
    ep = policy.run_episode(env, seed, verify=True)  # verify: re-simulated base candidates agree with the cache
    assert ep.total_jct_s <= base_total + 1e-6
    assert ep.mean_jct_h <= base_h + 1e-9
    assert ep.decisions > 0 and ep.rollouts > 0


def test_reduced_candidates_and_the_comparison_row():
    row = compare_seed(ENV, RolloutPolicy("srtf+price", "reduced"), 1, TINY)
    assert row.rollout_mean_jct_h < row.base_mean_jct_h and row.diff_pct < 0 and row.deviations > 0  # a real gain
    full = compare_seed(ENV, RolloutPolicy("srtf+price", "all"), 1, TINY)
    assert full.base_mean_jct_h == row.base_mean_jct_h and full.mean_candidates >= row.mean_candidates


def test_dedupe_merges_only_actions_with_the_same_outcome():
    env = gym.make(ENV, **TINY)
    obs, _ = env.reset(seed=5, options={"workload_seed": 5})
    u = env.unwrapped
    policy = RolloutPolicy("srtf+price", "all", dedupe=False)
    merged = 0
    for _ in range(4):
        b = int(policy.base.predict(obs, action_masks=u.action_masks())[0])
        every = policy.candidate_actions(env, obs, b)
        kept = RolloutPolicy("srtf+price", "all").candidate_actions(env, obs, b)
        assert kept[0] == every[0] == b and set(kept) <= set(every)
        assert set(every) == set(np.flatnonzero(u.action_masks()).tolist())
        values = {a: policy.value(env, a) for a in every}
        L = u.layout.n_levels
        for a in set(every) - set(kept):  # each dropped action has a kept twin with the same value
            j, lv = int(u.slot_jobs[a // L]), a % L
            cpu, mem = u.state.level_cpu[j], u.state.level_mem[j]
            twin = next(k for k in kept if k != u.layout.stop and int(u.slot_jobs[k // L]) == j
                        and cpu[k % L] == cpu[lv] and mem[k % L] == mem[lv])
            assert values[a] == values[twin]
            merged += 1
        obs, *_ = env.step(b)
    assert merged > 0  # the scarce cluster has coinciding levels


def test_unknown_names_raise_naming_the_valid_ones(capsys):
    with pytest.raises(UnknownNameError, match=r"unknown base policy 'nope'; valid: .*srtf\+price"):
        RolloutPolicy("nope")
    with pytest.raises(UnknownNameError, match="random"):  # not deterministic, so not a base
        base_policy("random")
    with pytest.raises(UnknownNameError, match="candidate set 'some'"):
        RolloutPolicy("srtf+price", "some")
    assert "srtf+price" in BASE_NAMES and "random" not in BASE_NAMES
    assert main(["--base", "nope", "--seeds", "0"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["--env", "Nope-v0", "--seeds", "0"]) == 2
    capsys.readouterr()
    assert main(["--env", "CartPole-v1", "--seeds", "0"]) == 2  # registered, but not this project's: one line
    assert capsys.readouterr().err.strip().startswith(ERROR + "unknown environment id 'CartPole-v1'")


def test_a_json_path_that_cannot_be_written_is_refused_before_any_rollout(tmp_path, capsys, monkeypatch):
    def no_rollouts(*args, **kwargs):
        raise AssertionError("a rollout ran")

    monkeypatch.setattr("synergy_gym.baselines.rollout_bound.compare_seed", no_rollouts)
    assert main(["--seeds", "1", "--candidates", "reduced", "--json", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == ERROR + f"--json {tmp_path}: is a folder, not a file\n"
    assert main(["--seeds", "1", "--json", str(tmp_path / "missing" / "rows.json")]) == 2
    assert "parent folder" in capsys.readouterr().err and not (tmp_path / "missing").exists()


def test_reduced_candidates_are_refused_in_a_preemptive_environment_up_front(capsys):
    with pytest.raises(ConfigError, match="--candidates reduced runs only non-preemptive environments"):
        compare_seed(ENV, RolloutPolicy(candidates="reduced"), 1, {**TINY, "preemptive": True})
    env = gym.make(ENV, preemptive=True, **TINY)
    with pytest.raises(ConfigError, match="preemptive=True needs --candidates all"):
        RolloutPolicy(candidates="reduced").run_episode(env, 1)
    assert main(["--preemptive", "--candidates", "reduced", "--seeds", "1"]) == 2
    assert capsys.readouterr().err == (
        ERROR + "--candidates reduced runs only non-preemptive environments "
        "(--preemptive needs --candidates all or heuristics)\n")


@pytest.mark.parametrize("every", [1, 3])
def test_a_preemptive_rollout_is_never_worse_and_improves_every_kth_decision(every):
    env = gym.make(ENV, preemptive=True, **TINY)
    policy = RolloutPolicy("tetris+greedy", "all", every=every)
    base_h, base_total = base_episode(env, policy.base, 1)
    ep = policy.run_episode(env, 1, verify=True)
    assert ep.total_jct_s <= base_total + 1e-6 and ep.mean_jct_h <= base_h + 1e-9
    assert ep.sampled == -(-ep.decisions // every) and ep.rollouts > 0
    assert sum(ep.deviation_kinds.values()) == ep.deviations <= ep.sampled
    if every == 1:  # seed 1 has a better action than tetris+greedy's (an admission after the running jobs)
        assert ep.total_jct_s < base_total - 1.0 and ep.deviation_kinds == {"admit ahead -> admit": 2}
    kinds = {env.unwrapped.layout.kind(a) for a in ep.actions}
    assert "admit ahead" in kinds  # an action only the preemptive layout has


def test_preemptive_dedupe_keeps_ahead_admissions_and_preemptions_apart():
    env = gym.make(ENV, preemptive=True, **TINY)
    obs, _ = env.reset(seed=4, options={"workload_seed": 4})
    u = env.unwrapped
    policy = RolloutPolicy("tetris+greedy", "all", dedupe=False)
    deduped = RolloutPolicy("tetris+greedy", "all")
    seen = set()
    for _ in range(25):
        b = int(policy.base.predict(obs, action_masks=u.action_masks())[0])
        every, kept = policy.candidate_actions(env, obs, b), deduped.candidate_actions(env, obs, b)
        assert set(every) == set(np.flatnonzero(u.action_masks()).tolist()) and set(kept) <= set(every)
        for a in every:
            seen.add(u.layout.kind(a))
            if u.layout.kind(a) in ("preempt", "stop"):
                assert a in kept  # never merged
        dropped = set(every) - set(kept)
        values = {a: policy.value(env, a) for a in dropped | set(kept)} if dropped else {}
        for a in dropped:  # a kept twin of the same kind with the same value
            assert any(values[k] == values[a] and u.layout.kind(k) == u.layout.kind(a) for k in kept)
        obs, _, te, tr, _ = env.step(b)
        if te or tr:
            break
    assert {"admit", "admit ahead", "preempt"} <= seen


def test_a_hidden_future_scores_candidates_on_the_jobs_already_there():
    env = gym.make(ENV, preemptive=True, num_jobs=30)
    obs, _ = env.reset(seed=2, options={"workload_seed": 2})
    u = env.unwrapped
    known, hidden = RolloutPolicy("tetris+greedy"), RolloutPolicy("tetris+greedy", future="hidden")
    for _ in range(3):
        obs, *_ = env.step(int(known.base.predict(obs, action_masks=u.action_masks())[0]))
    arrived = u.sim.jobs.arrival_s <= u.sim.now
    assert 0 < arrived.sum() < 30
    b = int(known.base.predict(obs, action_masks=u.action_masks())[0])
    twin = copy.deepcopy(u)
    twin.sim.forget_future()
    o2, *_ = twin.step(b)
    expected = total_jct_s(twin) if twin.sim.done else finish_with_base(twin, o2, known.base)[0]
    assert hidden.value(env, b) == expected < known.value(env, b)  # fewer jobs, less contention
    assert u.sim.jobs.arrival_s[~arrived].min() < float("inf")  # the real environment keeps its future


def test_a_hidden_future_rollout_scores_every_sampled_base_candidate_and_may_lose(capsys):
    env = gym.make(ENV, preemptive=True, **TINY)
    ep = RolloutPolicy("tetris+greedy", future="hidden", every=2).run_episode(env, 3)
    assert ep.sampled == -(-ep.decisions // 2)
    assert ep.rollouts == round(ep.mean_candidates * ep.sampled)  # every candidate simulated, the base one too
    with pytest.raises(UnknownNameError, match="unknown future 'soon'; valid: known, hidden"):
        RolloutPolicy(future="soon")
    assert main(["--future", "soon", "--seeds", "1"]) == 2
    assert capsys.readouterr().err.startswith(ERROR + "unknown future 'soon'")


@pytest.mark.parametrize("every", [0, -1, True, 1.5])
def test_every_must_be_a_whole_number_of_at_least_one(every, capsys):
    with pytest.raises(ConfigError, match=f"--every must be a whole number of at least 1, got {every!r}"):
        RolloutPolicy(every=every)
    if isinstance(every, int) and not isinstance(every, bool):
        assert main(["--every", str(every), "--seeds", "1"]) == 2
        assert capsys.readouterr().err == ERROR + f"--every must be a whole number of at least 1, got {every}\n"


def test_one_seed_has_no_ci_printed_as_dash_and_written_as_null(tmp_path, capsys, monkeypatch):
    def row(env_id, policy, seed, env_kwargs=None):  # the rollout itself is tested above; here only the report
        return SeedRow(seed=seed, base_mean_jct_h=10.0, rollout_mean_jct_h=9.0 + seed / 10, diff_pct=-5.0, decisions=3,
                       deviations=1, rollouts=4, mean_candidates=2.0, truncated=False, wall_s=0.5)

    def reject(constant):
        raise AssertionError(f"{constant} is not JSON")

    monkeypatch.setattr("synergy_gym.baselines.rollout_bound.compare_seed", row)
    path = tmp_path / "rows.json"
    assert main(["--seeds", "1", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "paired -0.900 h ± - (-9.00 %)" in out and "nan" not in out.lower()
    document = json.loads(path.read_text(), parse_constant=reject)  # no bare NaN
    assert document["summary"]["paired_diff_ci95_h"] is None and document["summary"]["episodes"] == 1
    assert main(["--seeds", "1,2", "--json", str(path)]) == 0
    assert "paired -0.850 h ± 0.635 (-8.50 %)" in capsys.readouterr().out
    two = json.loads(path.read_text(), parse_constant=reject)["summary"]
    assert two["paired_diff_ci95_h"] == pytest.approx(0.6353, abs=1e-4)
