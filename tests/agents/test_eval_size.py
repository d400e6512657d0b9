"""``evaluate``'s size guard: refused past the limits before anything runs, and a word under ``--quiet``."""

from __future__ import annotations

import pytest

import synergy_gym.cli.guards as guards
from synergy_gym.agents.eval_size import evaluation_estimate
from synergy_gym.agents.model_checks import effective_env_kwargs
from tests.support.cli_runs import run_cli, snapshot


def test_an_evaluation_past_the_limits_is_refused_naming_the_estimate_and_the_flag(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, out, err = run_cli(["evaluate", "--env", "Synergy-small-scarce-v0", "--env-kwargs", "preemptive=true",
                              "--seeds", "0..100000", "--baselines", "all", "--quiet"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("synergy-gym evaluate: error: ") and "episodes of 300 jobs on 4 servers would need about" in err
    assert "(over the limit of 1 h)" in err and err.rstrip().endswith("pass --allow-large to run it anyway")
    assert snapshot(tmp_path) == before


def test_quiet_says_once_what_a_long_evaluation_will_take(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(guards, "QUIET_NOTICE_S", 0.0)  # every evaluation is "long"
    code, out, err = run_cli(["evaluate", "--env", "Synergy-small-v0", "--env-kwargs", "num_jobs=10", "--seeds", "0,1",
                              "--baselines", "env:fifo+tune", "--quiet", "--out", str(tmp_path / "e")], capsys)
    assert code == 0, err
    assert err.startswith("synergy-gym evaluate: about ") and "for 2 episodes of 10 jobs on 4 servers" in err
    assert err.count("\n") == 1  # that line, and no progress


def test_the_estimate_grows_with_what_runs():
    small = effective_env_kwargs("Synergy-small-scarce-v0", {})
    base = evaluation_estimate(small, 10, 0, ("fifo+tune",), ())
    assert evaluation_estimate(small, 20, 0, ("fifo+tune",), ()).seconds > base.seconds
    assert evaluation_estimate(small, 10, 1, ("fifo+tune",), ()).seconds > base.seconds  # an agent's forward passes
    assert evaluation_estimate(small, 10, 1, ("fifo+tune",), ()).memory_bytes > base.memory_bytes  # and PyTorch
    assert evaluation_estimate({**small, "preemptive": True}, 10, 0, ("fifo+tune",), ()).seconds > base.seconds
    assert evaluation_estimate(small, 10, 0, ("fifo+tune",), ("fifo+opt",)).seconds > base.seconds
    assert base.what == "10 episodes of 300 jobs on 4 servers"


def test_the_preemptive_estimate_counts_the_decisions_of_its_redecide_mode():
    # Deciding only what changes takes about 6 decisions a job under tetris+greedy, every event about 45:
    # the estimate follows redecide, so a plain preemptive evaluation is no longer estimated as an every-event one.
    small = effective_env_kwargs("Synergy-small-scarce-v0", {})
    default = evaluation_estimate(small, 20, 1, ("tetris+greedy",), ()).seconds
    changes = evaluation_estimate(effective_env_kwargs("Synergy-small-scarce-v0", {"preemptive": True}),
                                  20, 1, ("tetris+greedy",), ()).seconds
    every_event = evaluation_estimate(effective_env_kwargs("Synergy-small-scarce-v0",
                                                           {"preemptive": True, "redecide": "every_event"}),
                                      20, 1, ("tetris+greedy",), ()).seconds
    assert default < changes < every_event
    assert every_event / changes > 3


@pytest.mark.parametrize(("options", "words"), [
    # a billion episodes built their seed list first (MemoryError)
    (["--episodes", "1000000000"], "--episodes 1,000,000,000: at most 1,000,000 episodes"),
    # a bad num_jobs was a traceback in the estimate, and 1e9 asked for --allow-large
    (["--seeds", "1", "--env-kwargs", "num_jobs=abc"], "env kwarg num_jobs must be a positive integer, got 'abc'"),
    (["--seeds", "1", "--env-kwargs", "num_jobs=NaN"], "env kwarg num_jobs must be a positive integer, got nan"),
    (["--seeds", "1", "--env-kwargs", "num_jobs=1e9"], "env kwarg num_jobs 1000000000 exceeds the maximum of 1,000,000"),
    # options that did nothing, silently
    (["--seeds", "1", "--sim-policies", "fifo+opt"], "--sim-policies fifo+opt: has no effect with --baselines "
                                                      "'env:fifo+tune'"),
    (["--seeds", "1", "--device", "cuda"], "--device 'cuda': needs --model"),
    (["--seeds", "1", "--no-normalize"], "--no-normalize needs --model"),
    (["--seeds", "1", "--allow-env-mismatch"], "--allow-env-mismatch needs --model"),
])
def test_evaluate_refuses_in_one_line_before_anything_runs(options, words, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, out, err = run_cli(["evaluate", "--baselines", "env:fifo+tune", "--quiet", *options], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("synergy-gym evaluate: error: ") and words in err, err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("decisions", ["O", "."])
def test_decisions_in_or_above_a_new_out_folder_write_both(decisions, tmp_path, capsys, monkeypatch):
    # The decisions' staging made the new --out folder first; --out's then took it for another command's.
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "O" if decisions == "O" else tmp_path / "sub"
    code, _, err = run_cli(["evaluate", "--baselines", "env:fifo+tune", "--sim-policies", "none", "--seeds", "1",
                            "--env-kwargs", "num_jobs=10", "--quiet", "--decisions", decisions, "--out", str(out)],
                           capsys)
    assert code == 0, err
    assert (out / "results.csv").is_file() and not list(tmp_path.glob("*-2"))
