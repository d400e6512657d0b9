"""Without the rl extra the commands that need it stop in one line, before anything is written; the heuristics run.

The extra's modules are hidden the way a missing install looks to the code: ``sys.modules[name] = None`` makes
``import name`` fail, and :func:`synergy_gym.agents.extras.importable` reports it missing.
"""

from __future__ import annotations

import runpy
import sys

import pytest

from synergy_gym.agents.extras import MissingExtraError, importable, missing_extra, require_extra
from tests.agents.tiny_runs import usage_error
from tests.support.cli_runs import run_cli, snapshot
from tests.test_startup_imports import loaded

ALL = ("torch", "stable_baselines3", "sb3_contrib")


def hide(monkeypatch, *modules: str) -> None:
    """Make ``import MODULE`` fail, as when it is not installed (undone after the test)."""
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def needs(*missing: str, command: str = "synergy-gym train") -> str:
    return f'{command}: error: needs the rl extra: pip install "synergy-gym[rl]" (missing: {", ".join(missing)})\n'


def test_the_check_finds_modules_without_importing_them(tmp_path):
    assert importable("json") and not importable("no_such_module_of_synergy_gym")
    assert missing_extra("rl", ("json",)) is None
    with pytest.raises(MissingExtraError, match=r"missing: no_such_module_of_synergy_gym\)$") as raised:
        require_extra("rl", ("json", "no_such_module_of_synergy_gym"))
    assert isinstance(raised.value, ImportError)  # and a SynergyGymError: one line on the command line
    assert loaded(tmp_path, "from synergy_gym.agents.extras import missing_extra\nmissing_extra('rl')", ALL) == []


@pytest.mark.parametrize("hidden", [ALL, ("stable_baselines3", "sb3_contrib"), ("sb3_contrib",), ("tensorboard",)])
def test_train_without_the_rl_extra_is_one_line_and_writes_nothing(hidden, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the default run folder would be runs/… here
    hide(monkeypatch, *hidden)
    for argv in (["--timesteps", "100", "--out", str(tmp_path / "run")], ["--timesteps", "100"]):
        code, out, err = run_cli(["train", *argv], capsys)
        assert (code, out, err) == (2, "", needs(*hidden))
        assert snapshot(tmp_path) == {}  # no config.json, versions.json or baselines.json; not even runs/


@pytest.mark.parametrize("command", ["evaluate", "benchmark"])
@pytest.mark.parametrize("hidden", [ALL, ("sb3_contrib",)])
def test_a_model_without_the_rl_extra_is_one_line_and_writes_nothing(command, hidden, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    hide(monkeypatch, *hidden)
    code, out, err = run_cli([command, "--model", "pretrained:small", "--out", str(tmp_path / "out")], capsys)
    assert (code, out, err) == (2, "", needs(*hidden, command=f"synergy-gym {command}"))  # not "could not be loaded"
    assert snapshot(tmp_path) == {}


def test_evaluate_without_a_model_needs_no_rl_extra(tmp_path, monkeypatch, capsys):
    hide(monkeypatch, *ALL)
    code, _, err = run_cli(["evaluate", "--env", "Synergy-small-v0", "--env-kwargs", "num_jobs=10", "--seeds", "0",
                            "--baselines", "fifo+tune", "--quiet", "--out", str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert (tmp_path / "out" / "results.csv").is_file()


def test_the_minimal_ppo_script_without_torch_is_one_line(monkeypatch, capsys):
    hide(monkeypatch, "torch")
    monkeypatch.delitem(sys.modules, "synergy_gym.agents.ppo_masked_minimal", raising=False)
    monkeypatch.setattr(sys, "argv", ["ppo_masked_minimal.py", "--total-timesteps", "10"])
    message = usage_error(lambda: runpy.run_module("synergy_gym.agents.ppo_masked_minimal", run_name="__main__"), capsys)
    assert message == 'needs the rl extra: pip install "synergy-gym[rl]" (missing: torch)'


def test_the_rllib_script_without_ray_is_one_line(monkeypatch, capsys):
    from synergy_gym.agents.rllib_ppo import main

    hide(monkeypatch, "ray")
    message = usage_error(lambda: main(["--num-jobs", "10", "--iterations", "1"]), capsys)
    assert message == 'needs the ray extra: pip install "synergy-gym[ray]" (missing: ray)'
