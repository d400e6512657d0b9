"""``synergy-gym train`` resumed in its own run folder: the checkpoints and settings of a replaced continuation are
kept aside, the settings follow the steps they trained, and one training process holds the folder at a time."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from synergy_gym.agents.checkpoints import latest_checkpoint
from synergy_gym.errors import SynergyGymError
from tests.agents.tiny_runs import one_line_error
from tests.support.cli_runs import run_cli, snapshot


def _zip_of(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_resuming_in_place_from_an_earlier_checkpoint_sets_the_later_ones_aside(run64, tmp_path):
    """The old last_model.zip (step 64) belongs to the continuation the resumed run replaces: killed before saving
    its own, ``--resume RUN_DIR`` went back to it. It is kept in superseded/, out of latest_checkpoint's way."""
    from stable_baselines3.common.callbacks import BaseCallback

    from synergy_gym.agents.config import load_run_config
    from synergy_gym.agents.train import train

    class Killed(BaseCallback):  # the run dies at its first step, as SIGKILL would leave it
        def _on_step(self) -> bool:
            self.seen = latest_checkpoint(run)
            raise RuntimeError("killed")

    run = shutil.copytree(run64, tmp_path / "run")
    old_last = (run / "last_model.zip").read_bytes()
    killed, lines = Killed(), []
    with pytest.raises(RuntimeError, match="killed"):
        train(load_run_config(run / "config.json"), out=run, resume=run / "checkpoints" / "rl_model_48_steps.zip",
              log=lines.append, callbacks=[killed])
    aside = run / "superseded" / "from-step-48"
    assert killed.seen == latest_checkpoint(run) == run / "checkpoints" / "rl_model_48_steps.zip"
    assert sorted(p.name for p in aside.iterdir()) == ["config.json", "last_model.zip", "vecnormalize.pkl",
                                                       "versions.json"]
    assert (aside / "last_model.zip").read_bytes() == old_last  # nothing lost
    # With the run's records beside them, they still evaluate on their environment (they fell back to the default).
    from synergy_gym.agents.provenance import run_config

    assert run_config(aside / "last_model.zip") == load_run_config(run64 / "config.json")
    assert f"note: the run's checkpoints past step 48 are kept in {aside} (this run replaces them)" in lines


def test_resuming_in_place_with_other_settings_keeps_the_earlier_ones_for_the_earlier_steps(run64, tmp_path, capsys):
    """config.json was rewritten with the resumed session's settings, and an export of a model trained before the
    resume shipped them as the settings it was trained with."""
    from synergy_gym.agents.checkpoints import config_of_step
    from synergy_gym.agents.pretrained_policies import export_config

    run = shutil.copytree(run64, tmp_path / "run")
    before = (run / "config.json").read_text()
    slower = tmp_path / "slower.toml"
    slower.write_text("learning_rate = 3e-5\n")
    code, out, err = run_cli(["train", "--resume", str(run), "--config", str(slower), "--timesteps", "96"], capsys)
    assert code == 0, err
    kept = run / "config.before-step-64.json"
    assert kept.read_text() == before and json.loads(before)["learning_rate"] != 3e-5
    assert json.loads((run / "config.json").read_text())["learning_rate"] == 3e-5
    assert ("note: config.json now holds this session's settings; those of the steps up to 64 are kept in "
            f"{kept}") in out.splitlines()
    assert [config_of_step(run, step).name for step in (0, 48, 64, 65, 96)] == [kept.name] * 3 + ["config.json"] * 2
    assert export_config(run / "checkpoints" / "rl_model_80_steps.zip") == run / "config.json"
    assert export_config(run64 / "checkpoints" / "rl_model_48_steps.zip") == run64 / "config.json"  # never resumed
    # Resumed again with the same settings (run folder's own): nothing more kept.
    (run / "last_model.zip").unlink()  # continue from the periodic checkpoint at step 80 (its steps past it set aside)
    code, _, err = run_cli(["train", "--resume", str(run), "--timesteps", "96"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in run.glob("config*.json")) == ["config.before-step-64.json", "config.json"]


def test_a_run_folder_in_use_by_another_training_process_is_refused(run64, tmp_path, capsys):
    """Two resumes of one run folder at once mixed their files (one session's model lost, config and eval.csv of
    different sessions). The lock of a process that no longer runs is taken over."""
    import os
    import socket

    from synergy_gym.agents.run_folder import LOCK_FILE, run_lock

    run = shutil.copytree(run64, tmp_path / "run")
    before = snapshot(run)
    with run_lock(run):  # another training process, running
        code, out, err = run_cli(["train", "--resume", str(run), "--timesteps", "80"], capsys)
        one_line_error(code, out, err, f"{str(run)!r}: another training process ({socket.gethostname()} "
                                       f"{os.getpid()}) is using this run folder")
        assert snapshot(run) == {**before, LOCK_FILE: snapshot(run)[LOCK_FILE]}
    assert not (run / LOCK_FILE).exists()  # released
    (run / LOCK_FILE).write_text(f"{socket.gethostname()} 999999999\n")  # killed, no longer running
    code, _, err = run_cli(["train", "--resume", str(run), "--timesteps", "80"], capsys)
    assert code == 0, err
    assert not (run / LOCK_FILE).exists()


def test_a_held_run_folder_is_refused_before_its_checkpoint_is_chosen(run64, tmp_path, capsys, monkeypatch):
    """The checkpoint was chosen before the lock was looked at: the running process pruned it meanwhile, and the
    second resume failed with "model file ... does not exist" instead of saying the folder was in use."""
    import os
    import socket

    from synergy_gym.agents import resume
    from synergy_gym.agents.run_folder import run_lock

    run = shutil.copytree(run64, tmp_path / "run")
    monkeypatch.setattr(resume, "latest_checkpoint", lambda folder: folder / "checkpoints" / "rl_model_1_steps.zip")
    with run_lock(run):  # another training process, which prunes the checkpoint as soon as it is chosen
        code, out, err = run_cli(["train", "--resume", str(run), "--timesteps", "80"], capsys)
    one_line_error(code, out, err, f"another training process ({socket.gethostname()} {os.getpid()}) is using")


def test_settings_kept_across_resumes_from_earlier_checkpoints_follow_the_steps(tmp_path):
    """S1 trained to 1024 (gamma 0.99), S2 resumed there to 1536 (0.98), S3 resumed from S1's step-512 best model
    (0.97): S3 kept S2's settings as those of the steps up to 512, and S1's file mapped S3's steps to S1."""
    from synergy_gym.agents.checkpoints import config_of_step, set_aside_later_checkpoints
    from synergy_gym.agents.config import TrainConfig
    from synergy_gym.agents.config_values import config_json
    from synergy_gym.agents.run_folder import keep_earlier_config

    run = tmp_path / "run"
    run.mkdir()
    s1, s2, s3 = (TrainConfig(gamma=g) for g in (0.99, 0.98, 0.97))
    (run / "config.before-step-1024.json").write_text(config_json(s1))
    (run / "config.json").write_text(config_json(s2))
    _zip_of(run / "last_model.zip", {"data": json.dumps({"num_timesteps": 1536}).encode()})
    kept = keep_earlier_config(run, s3, 512)
    aside = set_aside_later_checkpoints(run, 512)
    assert kept == run / "config.before-step-512.json" and kept.read_text() == config_json(s1)
    assert sorted(p.name for p in aside.iterdir()) == ["config.before-step-1024.json", "config.json", "last_model.zip"]
    (run / "config.json").write_text(config_json(s3))  # the resumed session's
    assert [config_of_step(run, step).name for step in (512, 513, 1024)] == [kept.name, "config.json", "config.json"]


def test_on_windows_a_lock_holder_is_never_signalled(tmp_path, monkeypatch):
    """os.kill(pid, 0) sends CTRL_C_EVENT on Windows: looking at a lock would have interrupted the training holding
    it. There a holder is taken to run (the message says to remove a killed run's lock by hand)."""
    import os
    import socket

    from synergy_gym.agents import run_folder

    sent = []
    monkeypatch.setattr(os, "kill", lambda *args: sent.append(args))
    monkeypatch.setattr(run_folder.sys, "platform", "win32")
    (tmp_path / run_folder.LOCK_FILE).write_text(f"{socket.gethostname()} 999999999\n")
    with pytest.raises(SynergyGymError, match="another training process"):
        run_folder.check_not_locked(tmp_path)
    assert sent == []
