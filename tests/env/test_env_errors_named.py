"""Errors that name what the caller gave – the key set twice, the action sent, the call made – and the
fallback of a masked action where no waiting job fits (``preemptive=True``), as the docs describe it."""

import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym.env.masks as masks
from synergy_gym.env import SynergyEnv
from synergy_gym.env.calls import EnvCallError, shown
from synergy_gym.errors import ConfigError

DOCS = Path(__file__).resolve().parents[2] / "docs"
SMALL = {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 40, "max_rounds": 20_000, "preemptive": True}


def one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text, text
    return text


# -- SynergyEnv(config, **kwargs) --------------------------------------------------------------------


@pytest.mark.parametrize("key, in_config, in_kwargs", [
    ("num_jobs", 5, 7),
    ("preemptive", True, False),
    ("cluster", "small", {"num_servers": 1, "gpus_per_server": 2}),
    ("class_split", (60, 20, 20), (20, 70, 10)),
])
def test_a_key_set_differently_in_config_and_kwargs_is_refused_naming_both(key, in_config, in_kwargs):
    config = {"num_jobs": 5, "preemptive": True, key: in_config}
    with pytest.raises(ConfigError) as excinfo:
        SynergyEnv(config, **{key: in_kwargs})
    message = one_line(excinfo)
    assert isinstance(excinfo.value, EnvCallError) and isinstance(excinfo.value, ValueError)
    assert message.startswith(f"SynergyEnv(config, **kwargs): config sets {key}="), message
    assert f"config sets {key}={shown(in_config)}, but a keyword argument sets {key}={shown(in_kwargs)};" in message


def test_a_key_set_to_the_same_value_in_config_and_kwargs_is_fine():
    config = {"num_jobs": 5, "preemptive": True, "cluster": "small", "class_split": [60, 20, 20]}
    env = SynergyEnv(config, num_jobs=5, preemptive=True, cluster="small", class_split=(60.0, 20.0, 20.0))
    assert env.cfg.num_jobs == 5 and env.cfg.preemptive
    assert SynergyEnv({"num_jobs": 5}, max_queue=4).cfg.max_queue == 4  # different keys: both apply
    env = gym.make("Synergy-small-v0", config={"max_queue": 6, "cluster": "small"})  # as the id's: fine
    assert env.unwrapped.cfg.max_queue == 6


# -- a masked admission where no waiting job fits: stop ----------------------------------------------


def test_a_masked_admission_falls_back_to_stop_where_only_preemptions_are_offered_and_the_docs_say_so():
    env = gym.make("Synergy-small-v0", num_jobs=12, jobs_per_hour=30.0,
                   cluster={"num_servers": 1, "gpus_per_server": 2}, preemptive=True)
    env.reset(seed=0)
    u = env.unwrapped
    for _ in range(200):
        mask = u.action_masks()
        if not mask[: u.layout.preempt].any():  # only preemptions and stop
            break
        env.step(int(np.flatnonzero(mask)[0]))
    else:
        pytest.fail("no decision offering only preemptions and stop")
    assert mask[u.layout.preempt] and mask[u.layout.stop]
    for a in (0, u.layout.ahead):
        decision = u.decode(a)
        assert decision.kind == "stop" and decision.invalid, decision
    # What the docs say about it: the stop fallback in redecide="changes", and what its slots hold.
    assert "falls back to *stop*" in masks.__doc__
    text = (DOCS / "environment.md").read_text(encoding="utf-8")
    decisions = text[text.index("## Decisions") : text.index("## Modes")]
    assert "falls back to **stop**" in " ".join(decisions.split())
    row = next(line for line in text.splitlines() if line.startswith("| `max_queue` |"))
    assert 'redecide="changes"' in row and "do not fit" in row, row


# -- the action named is the action sent, and the call named is the call made --------------------------


def test_a_masked_ahead_admission_names_the_action_sent():
    env = gym.make("Synergy-small-scarce-v0", num_jobs=6, preemptive=True, invalid_action="raise")
    env.reset(seed=0)
    u = env.unwrapped
    while u.state.n_kept == 0:
        env.step(int(np.flatnonzero(u.action_masks())[0]))
    assert u.layout.ahead == 160 and u.slot_jobs.size < 32
    for call, method in (("env.step()", env.step), ("env.decode()", u.decode)):
        with pytest.raises(EnvCallError) as excinfo:
            method(160 + 31 * 5)
        assert one_line(excinfo).startswith(
            f"{call}: action 315 (an ahead admission: slot 31, level 0) is masked: slot 31 is empty ("
        ), one_line(excinfo)


def test_decode_names_decode_for_masked_actions():
    env = SynergyEnv(**{**SMALL, "num_jobs": 5}, invalid_action="raise")
    env.reset(seed=0)
    lay, decisions = env.layout, env.state.decisions
    expected = {
        155: "action 155 is masked: slot 31 is empty",
        lay.preempt: f"action {lay.preempt} is masked: no running job can be preempted now",
        lay.ahead: f"action {lay.ahead} is masked: no running job to place the admission ahead of",
    }
    for a, message in expected.items():
        for call, method in (("env.decode()", env.decode), ("env.step()", env.step)):
            with pytest.raises(EnvCallError) as excinfo:
                method(a)
            assert one_line(excinfo).startswith(f"{call}: {message}"), one_line(excinfo)
    assert env.state.decisions == decisions
    policy_env = SynergyEnv(**SMALL, invalid_action="raise")  # an empty running row
    policy_env.reset(seed=0)
    while not (policy_env.state.n_preemptable and policy_env.state.n_waiting):
        policy_env.step(int(np.flatnonzero(policy_env.action_masks())[0]))
    empty_row = policy_env.layout.stop - 1
    assert policy_env.state.n_preemptable < policy_env.cfg.max_running
    with pytest.raises(EnvCallError, match=rf"^env\.decode\(\): action {empty_row} is masked: running row \d+ is empty"):
        policy_env.decode(empty_row)


@pytest.mark.parametrize("kwargs", [
    pytest.param({}, id="single-gpu"),
    pytest.param({"cluster": {"num_servers": 4, "cpus_per_server": 16}, "multigpu": True, "max_queue": 3,
                  "max_running": 4}, id="scarce-multigpu-few-rows"),
])
def test_every_masked_action_names_the_action_sent_and_the_call(kwargs):
    env = SynergyEnv(**{**SMALL, **kwargs}, invalid_action="raise")
    lay, rng = env.layout, np.random.default_rng(5)
    env.reset(seed=1)
    checked, ahead_checked = 0, 0
    for _ in range(300):
        mask = env.action_masks()
        masked = np.flatnonzero(~mask)
        for a in rng.choice(masked, size=min(4, masked.size), replace=False).tolist():
            for call, method in (("env.step()", env.step), ("env.decode()", env.decode)):
                with pytest.raises(EnvCallError) as excinfo:
                    method(a)
                ahead = r" \(an ahead admission: slot \d+, level \d+\)" if lay.ahead <= a < lay.preempt else ""
                assert re.match(rf"{re.escape(call)}: action {a}(?:{ahead})? is masked: ", one_line(excinfo)), (
                    one_line(excinfo))
            checked += 1
            ahead_checked += lay.ahead <= a < lay.preempt and env.state.n_kept > 0
        _, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if terminated or truncated:
            break
    assert checked > 100 and ahead_checked > 10, (checked, ahead_checked)
