"""``synergy-gym train`` into a folder that already holds a run: refused, unless it resumes that run in place."""

from __future__ import annotations

import json
import shutil

from tests.agents.tiny_runs import QUICK, one_line_error, tiny_config
from tests.support.cli_runs import run_cli, snapshot


def test_a_fresh_run_into_a_run_folder_is_refused_and_leaves_it_as_it_was(run64, tmp_path, capsys):
    """Training afresh into a folder that holds a run would keep the old run's statistics and checkpoints beside the
    new model (evaluate would pick up the old statistics, --resume the old checkpoint)."""
    run = shutil.copytree(run64, tmp_path / "run")
    config = tiny_config(tmp_path)
    before = snapshot(tmp_path)
    code, out, err = run_cli(["train", *QUICK, "--config", str(config), "--timesteps", "16", "--out", str(run)], capsys)
    one_line_error(code, out, err, f"--out {run}: the folder already holds a training run (config.json, versions.json, "
                                   f"baselines.json, …); train into a new folder, continue that run with --resume {run}")
    assert snapshot(tmp_path) == before
    (run / "checkpoints").rename(tmp_path / "kept")  # killed before its first checkpoint: --resume could not continue it
    (run / "last_model.zip").rename(tmp_path / "kept.zip")
    code, out, err = run_cli(["train", *QUICK, "--config", str(config), "--timesteps", "16", "--out", str(run)], capsys)
    line = one_line_error(code, out, err, f"--out {run}: the folder already holds a training run")
    assert line.endswith("train into a new folder, or remove it") and "--resume" not in line
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run_cli(["train", *QUICK, "--config", str(config), "--timesteps", "16",
                              "--out", str(empty)], capsys)
    assert code == 0, err  # an empty folder is fine


def test_run_records_keep_the_device_asked_for_and_the_one_used(tmp_path):
    from synergy_gym.agents.config import TrainConfig
    from synergy_gym.agents.run_folder import write_run_records

    write_run_records(tmp_path, TrainConfig(), "cpu")
    assert json.loads((tmp_path / "config.json").read_text())["device"] == "auto"  # resumes resolve it again
    versions = json.loads((tmp_path / "versions.json").read_text())
    assert versions["device"] == "cpu" and "device_name" not in versions
