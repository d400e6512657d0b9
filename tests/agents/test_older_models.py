"""Models an older synergy-gym saved: refused in one line that says why and what runs them, never a traceback.

* A preemptive model trained before ``redecide`` existed (its ``config.json`` says ``preemptive=true`` alone; the
  environment then re-decided every running job at every event, today's ``redecide="every_event"``): the message
  said it was "trained … with the same env kwargs" and stopped there; it now gives the kwargs that run it, and they
  do. ``export_pretrained`` failed deep inside SB3 ("cannot reshape array of size 353 into shape (161)").
* A model pickled before the one installed namespace names the module ``agents``: "No module named 'agents'".
"""

from __future__ import annotations

import base64
import json
import pickle
import sys
import types
import zipfile
from pathlib import Path

import pytest

from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.train import train
from tests.agents.test_resume_continuation import TINY
from tests.agents.tiny_runs import one_line_error
from tests.support.cli_runs import run_cli


@pytest.fixture(scope="module")
def legacy_preemptive(tmp_path_factory) -> Path:
    """A run trained in the every-event preemptive mode whose config.json does not name the mode (as before redecide)."""
    run = tmp_path_factory.mktemp("legacy") / "run"
    kwargs = {"num_jobs": 10, "preemptive": True}
    train(TrainConfig(**{**TINY, "env_kwargs": {**kwargs, "redecide": "every_event"}, "timesteps": 16}), out=run,
          log=None)
    config = json.loads((run / "config.json").read_text())
    config["env_kwargs"] = kwargs
    (run / "config.json").write_text(json.dumps(config))
    return run


def test_a_preemptive_model_from_before_redecide_is_told_how_it_runs_and_then_runs(legacy_preemptive, tmp_path, capsys):
    model = legacy_preemptive / "best_model.zip"
    base = ["evaluate", "--model", str(model), "--baselines", "none", "--seeds", "1000000", "--quiet"]
    code, out, err = run_cli([*base, "--out", str(tmp_path / "a")], capsys)
    line = one_line_error(code, out, err, "by an older synergy-gym whose preemptive mode re-decided every running job",
                          command="evaluate")
    given = line.split("synergy-gym evaluate runs it with ")[1].split(", train --resume")[0].split()
    assert given[0] == "--env-kwargs" and given[-1] == "--allow-env-mismatch"
    code, out, err = run_cli([*base, *given, "--out", str(tmp_path / "b")], capsys)
    assert code == 0, err
    assert (tmp_path / "b" / "results.csv").is_file()


def test_exporting_a_model_whose_spaces_the_environment_no_longer_has_is_one_line(legacy_preemptive, tmp_path, capsys):
    from synergy_gym.agents.export_pretrained import main

    code = main([str(legacy_preemptive / "best_model.zip"), "old", "--command", "c", "--dest", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "by an older synergy-gym" in err and not (tmp_path / "x").exists()
    assert "error: export: " in err and "--model" not in err  # export takes the model as an argument, not --model


def test_a_model_pickled_before_the_namespace_is_refused_naming_why(run64, tmp_path, capsys, monkeypatch):
    # Its policy_kwargs name a class of module 'agents.features', as the models of that time did.
    module = types.ModuleType("agents.features")
    extractor = type("SynergyExtractor", (), {"__module__": "agents.features"})
    module.SynergyExtractor = extractor
    sys.modules["agents.features"] = module
    try:
        pickled = base64.b64encode(pickle.dumps({"features_extractor_class": extractor})).decode()
    finally:
        del sys.modules["agents.features"]
    old = tmp_path / "old.zip"
    with zipfile.ZipFile(run64 / "best_model.zip") as source, zipfile.ZipFile(old, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "data":
                saved = json.loads(data)
                saved["policy_kwargs"] = {":type:": "<class 'dict'>", ":serialized:": pickled}
                data = json.dumps(saved).encode()
            target.writestr(item, data)
    # The tests run from the checkout, where the folder agents/ is importable as 'agents': not so for a user.
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "agents.features", raising=False)
    code, out, err = run_cli(["evaluate", "--model", str(old), "--no-normalize", "--baselines", "none", "--seeds",
                              "1000000", "--quiet", "--out", str(tmp_path / "e")], capsys)
    one_line_error(code, out, err, "from before its one installed namespace", "module 'agents'", command="evaluate")
