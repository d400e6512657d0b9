"""The clairvoyant per-event switching rollout (synergy_gym.baselines.switching_rollout).

Events as the environment has them, never worse than its base, a real gain, clear errors.
"""

from __future__ import annotations

import json
import multiprocessing

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.baselines.base_episode import base_action, base_episode, total_jct_s
from synergy_gym.baselines.rollout_bound import base_policy
from synergy_gym.baselines.switching_rollout import DEFAULT_POLICIES, SwitchingRollout, main, play_event
from synergy_gym.errors import ConfigError, UnknownNameError

#: How the module's one-line errors start (as its argument parser's own).
ERROR = "python -m synergy_gym.baselines.switching_rollout: error: "

ENV = "Synergy-small-scarce-v0"
SMALL = {"num_jobs": 20, "preemptive": True}


def test_an_event_is_every_decision_at_one_clock_reading():
    env = gym.make(ENV, **SMALL).unwrapped
    obs, _ = env.reset(seed=4, options={"workload_seed": 4})
    base = base_policy("tetris+greedy")
    clocks = []  # the simulator's clock at each decision of a plain base episode
    while True:
        clocks.append(env.sim.now)
        obs, _, te, tr, _ = env.step(base_action(base, env, obs))
        if te or tr:
            break
    obs, _ = env.reset(seed=4, options={"workload_seed": 4})
    starts, ended = [], False
    while not ended:
        starts.append(env.sim.now)
        obs, terminated, truncated, _ = play_event(env, obs, base)
        ended = terminated or truncated
    assert starts == sorted(set(clocks)) and len(clocks) > len(starts)  # one event a reading; several decisions in some


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_switching_is_never_worse_than_its_base_and_counts_its_choices(seed):
    rollout = SwitchingRollout()
    env = gym.make(ENV, **SMALL)
    base_h, base_total = base_episode(env, rollout.base, seed)
    ep = rollout.run_episode(env, seed)
    assert ep.base_mean_jct_h == base_h
    assert ep.total_jct_s <= base_total + 1e-6 and ep.mean_jct_h <= base_h + 1e-9
    assert sum(ep.chosen.values()) == ep.events and ep.switches == ep.events - ep.chosen.get("tetris+greedy", 0)
    assert ep.rollouts == ep.events * (len(DEFAULT_POLICIES) - 1)
    assert set(ep.chosen) <= set(DEFAULT_POLICIES)


def test_switching_gains_where_another_heuristic_decides_an_event_better():
    ep = SwitchingRollout().run_episode(gym.make(ENV, **SMALL), 0)
    assert ep.switches > 0 and ep.mean_jct_h < ep.base_mean_jct_h - 1e-3


def test_a_candidate_is_judged_on_a_copy_and_the_default_mode_runs_too():
    rollout = SwitchingRollout(policies=("tetris+greedy", "srtf+price"))
    env = gym.make(ENV, num_jobs=20).unwrapped
    obs, _ = env.reset(seed=1, options={"workload_seed": 1})
    now, mask, total = env.sim.now, env.action_masks().copy(), total_jct_s(env)
    rollout.value(env, obs, "srtf+price")
    assert env.sim.now == now and np.array_equal(env.action_masks(), mask) and total_jct_s(env) == total
    ep = rollout.run_episode(gym.make(ENV, num_jobs=20), 1)
    assert ep.mean_jct_h <= ep.base_mean_jct_h + 1e-9 and ep.events > 1


def test_bad_candidate_lists_raise_naming_the_list():
    with pytest.raises(ConfigError, match="twice: tetris,tetris"):
        SwitchingRollout(policies=("tetris", "tetris"))
    with pytest.raises(ConfigError, match="other than the base 'tetris\\+greedy'"):
        SwitchingRollout(policies=("tetris+greedy",))
    with pytest.raises(UnknownNameError, match="tetrus"):
        SwitchingRollout(policies=("tetris+greedy", "tetrus"))
    with pytest.raises(UnknownNameError, match="random"):  # not deterministic: not a candidate
        SwitchingRollout(policies=("tetris+greedy", "random"))


@pytest.mark.parametrize("args, words", [
    (["--workers", "0"], "--workers must be a whole number of at least 1, got 0"),
    (["--env", "Synergy-nope-v0"], "Synergy-nope-v0"),
    (["--policies", "tetris+greedy,nope"], "nope"),
    (["--seeds", "x"], "--seeds"),
    (["--env", "CartPole-v1"], "unknown environment id 'CartPole-v1'"),  # registered, but not this project's
])
def test_the_command_refuses_bad_input_in_one_line(args, words, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(ERROR) and words in err and "\n" not in err


def test_a_json_path_that_cannot_be_written_is_refused_before_any_rollout(tmp_path, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a rollout ran")

    monkeypatch.setattr(SwitchingRollout, "run_episode", never)
    assert main(["--json", str(tmp_path / "missing" / "out.json")]) == 2
    assert "--json" in capsys.readouterr().err


def test_the_command_prints_each_seed_and_writes_the_json(tmp_path, capsys, monkeypatch):
    make = gym.make
    monkeypatch.setattr(gym, "make", lambda env_id, **kw: make(env_id, num_jobs=20, **kw))
    out = tmp_path / "switching.json"
    assert main(["--preemptive", "--seeds", "0,1", "--policies", "tetris+greedy,tetris,srtf+tune", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["env_kwargs"] == {"preemptive": True} and record["clairvoyant"] is True
    assert [r["seed"] for r in record["rows"]] == [0, 1]
    for r in record["rows"]:
        assert sum(r["events_by_heuristic"].values()) == r["decisions"] and r["rollout_mean_jct_h"] <= r["base_mean_jct_h"]
        assert f"{r['rollout_mean_jct_h']:.3f}" in printed
    assert record["summary"]["episodes"] == 2 and record["summary"]["paired_diff_h"] <= 0


def test_an_error_in_an_episode_is_one_line_and_the_truncation_is_recorded(tmp_path, capsys, monkeypatch):
    def refuse(self, env, seed):
        raise ConfigError(f"workload seed {seed} refused")

    with monkeypatch.context() as patch:
        patch.setattr(SwitchingRollout, "run_episode", refuse)
        assert main(["--seeds", "3"]) == 2
        err = capsys.readouterr().err.strip()
        assert err == ERROR + "workload seed 3 refused"
    make = gym.make
    monkeypatch.setattr(gym, "make", lambda env_id, **kw: make(env_id, num_jobs=20, max_rounds=30, **kw))
    out = tmp_path / "cut.json"
    assert main(["--preemptive", "--seeds", "0", "--policies", "tetris+greedy,tetris", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rows"][0]["truncated"] is True


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                    reason="the workers see the patched gym.make (20-job workloads) only when forked")
def test_workers_give_the_rows_one_process_gives(tmp_path, monkeypatch):
    make = gym.make
    monkeypatch.setattr(gym, "make", lambda env_id, **kw: make(env_id, num_jobs=20, **kw))
    rows = {}
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}.json"
        assert main(["--preemptive", "--seeds", "0..2", "--policies", "tetris+greedy,tetris", "--workers", workers,
                     "--json", str(out)]) == 0
        rows[workers] = [{k: v for k, v in r.items() if k != "wall_s"} for r in json.loads(out.read_text())["rows"]]
    assert rows["1"] == rows["2"] and [r["seed"] for r in rows["2"]] == [0, 1, 2]
