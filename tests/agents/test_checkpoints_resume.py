"""``synergy-gym train --resume`` and periodic checkpoints.

A checkpoint that cannot be continued from is one line (exit status 2) and the run writes nothing; a resumed run
continues to the configured total number of steps (Stable-Baselines3's ``reset_num_timesteps=False``) and says so;
a run killed with SIGKILL resumes from its latest checkpoint, losing at most ``checkpoint_freq`` steps, with every
file in its folder whole; a damaged model zip is one line saying so.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from synergy_gym.agents.checkpoints import latest_checkpoint, run_checkpoints, saved_timesteps
from synergy_gym.agents.models import check_model_zip, load_model
from synergy_gym.agents.normalization import read_stats
from synergy_gym.errors import ConfigError
from tests.agents.tiny_runs import EVALUATE, QUICK, flip_a_byte, one_line_error, tiny_config
from tests.support import REPO
from tests.support.cli_runs import run_cli, snapshot

CHECKPOINT = re.compile(r"rl_model_(\d+)_steps\.zip")


def test_periodic_checkpoints_keep_the_latest_with_its_statistics(run64):
    assert sorted(p.name for p in (run64 / "checkpoints").iterdir()) == [
        "rl_model_48_steps.zip", "rl_model_vecnormalize_48_steps.pkl"]  # 16 and 32 were removed
    assert run_checkpoints(run64) == [(48, run64 / "checkpoints" / "rl_model_48_steps.zip"), (64, run64 / "last_model.zip")]
    assert latest_checkpoint(run64) == run64 / "last_model.zip"
    assert load_model(run64 / "checkpoints" / "rl_model_48_steps.zip", "maskable_ppo", "cpu").num_timesteps == 48
    assert read_stats(run64 / "checkpoints" / "rl_model_vecnormalize_48_steps.pkl").training is False


# -- a checkpoint that cannot be continued from: one line, nothing written ------------------------------------------


def _zip_of(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


TRUNCATED = "is not a Stable-Baselines3 model zip (not a zip file, or a truncated one)"


def _bad_resume(kind: str, run: Path, folder: Path) -> tuple[Path, list[str], list[str]]:
    """(--resume argument, further options, words of the message) for each kind of bad checkpoint."""
    last = run / "last_model.zip"
    if kind == "corrupt zip":
        (folder / "corrupt.zip").write_bytes(os.urandom(300))
        return folder / "corrupt.zip", [], [f"{folder / 'corrupt.zip'} {TRUNCATED}"]
    if kind.startswith("truncated model"):  # cut at 10 %, 50 %, 90 % or one byte short
        data = last.read_bytes()
        end = len(data) - 1 if kind.endswith("-1") else len(data) * int(kind.split()[-1]) // 100
        (folder / "cut.zip").write_bytes(data[:end])
        return folder / "cut.zip", [], [f"{folder / 'cut.zip'} {TRUNCATED}"]
    if kind == "zip of something else":
        notes = _zip_of(folder / "notes.zip", {"notes.txt": b"hello"})
        return notes, [], [f"{notes} is not a Stable-Baselines3 model zip (a zip of notes.txt)"]
    if kind == "zip that only looks like a model":
        fake = _zip_of(folder / "fake.zip", {"data": b"{not json", "policy.pth": b"\x00" * 64})
        return fake, [], [f"{fake} could not be loaded as a maskable_ppo model"]
    if kind == "damaged model":
        damaged = flip_a_byte(last, folder / "damaged.zip")
        return damaged, [], [f"model file {damaged} is damaged: its member policy.pth fails its checksum"]
    if kind == "missing file":
        return folder / "nope.zip", [], [f"{str(folder / 'nope.zip')!r} does not exist"]
    if kind == "folder without checkpoints":
        (folder / "empty" / "checkpoints").mkdir(parents=True)
        (folder / "empty" / "checkpoints" / "rl_model_9_steps.zip").write_bytes(b"not a zip")
        return folder / "empty", [], [f"--resume {str(folder / 'empty')!r} is a folder with no checkpoint to continue from"]
    copy = shutil.copytree(run, folder / "copy")
    model, stats = copy / "last_model.zip", copy / "vecnormalize.pkl"
    more = ["--timesteps", "128"]
    if kind == "other env shape":
        return model, ["--env-kwargs", "max_queue=8", *more], [
            f"--resume {model}: this model was trained with max_queue=32 but the environment has max_queue=8",
            "Box(161,) in the model vs Box(41,)"]
    if kind == "statistics missing":
        stats.unlink()
        return model, more, [f"--resume {model}: its normalisation statistics are missing (looked for {stats}"]
    if kind == "statistics corrupt":
        stats.write_bytes(b"\x80\x04garbage")
        return model, more, [f"normalisation statistics {stats} cannot be read"]
    if kind == "statistics of something else":
        stats.write_bytes(pickle.dumps({"obs_rms": None}))
        return model, more, [f"{stats} does not hold VecNormalize statistics"]
    if kind == "already at timesteps":
        return model, ["--timesteps", "64"], [f"--resume {model}: the checkpoint is at step 64 and timesteps is 64",
                                             "nothing is left to train"]
    if kind == "past timesteps":
        return copy, ["--timesteps", "32"], [f"--resume {model}: the checkpoint is at step 64 and timesteps is 32"]
    if kind == "other network":
        config = copy / "wider.toml"
        config.write_text("net_arch = [32, 32]\nslot_dim = 4\n")
        return model, ["--config", str(config), *more], [
            f"--resume {model}: a resumed run keeps its algorithm and network, but the config changes "
            "net_arch [32, 32] (the checkpoint's: [16]); slot_dim 4 (the checkpoint's: 8); leave them as trained"]
    if kind == "other algorithm":
        return model, ["--algo", "ppo", *more], [
            f"--resume {model}: a resumed run keeps its algorithm and network, but the config changes "
            "algo 'ppo' (the checkpoint's: 'maskable_ppo'); leave it as trained"]
    if kind == "lone checkpoint of another network":  # no config.json: the defaults would be recorded, not its network
        lone = folder / "lone"
        lone.mkdir()
        shutil.copy(model, lone / "last_model.zip")
        shutil.copy(stats, lone / "vecnormalize.pkl")
        return lone / "last_model.zip", more, [
            f"--resume {lone / 'last_model.zip'}: a resumed run keeps its algorithm and network, but the config changes "
            "net_arch [128, 128] (the checkpoint's: [16]); global_dim 128 (the checkpoint's: 16); slot_dim 32 (the "
            "checkpoint's: 8); its run's config.json is missing, so set them as the model has them (--config)"]
    if kind == "other evaluations in place":  # its eval.csv would mix 10-job and 30-job workloads
        return copy, ["--env-kwargs", "num_jobs=30", *more, "--out", str(copy)], [
            f"--resume {model}: continuing in the run's own folder keeps its evaluations, but the config changes "
            "env_kwargs {'num_jobs': 30} (the checkpoint's: {'num_jobs': 10}); leave it as trained, or continue into "
            "a new folder with --out"]
    if kind == "into another run's folder":  # its statistics and checkpoints would stay beside the new run's
        other = shutil.copytree(run, folder / "other")
        return model, [*more, "--out", str(other)], [
            f"--out {other}: the folder already holds a training run (config.json, versions.json, baselines.json, …); "
            f"train into a new folder, continue that run with --resume {other}, or remove it"]
    if kind == "malformed config.json":
        (copy / "config.json").write_text('{"timesteps": ')
        return model, [], [f"config file {copy / 'config.json'} is malformed"]
    raise AssertionError(kind)


BAD_RESUMES = ["corrupt zip", "truncated model 10", "truncated model 50", "truncated model 90", "truncated model -1",
               "zip of something else", "zip that only looks like a model",
               "damaged model", "missing file", "folder without checkpoints", "other env shape", "statistics missing",
               "statistics corrupt", "statistics of something else", "already at timesteps", "past timesteps",
               "other network", "other algorithm", "lone checkpoint of another network", "other evaluations in place",
               "into another run's folder",
               "malformed config.json"]


@pytest.mark.parametrize("kind", BAD_RESUMES)
@pytest.mark.parametrize("out", ["--out", "default"])
def test_a_checkpoint_that_cannot_be_continued_is_one_line_and_nothing_is_written(kind, out, run64, tmp_path, capsys,
                                                                                   monkeypatch):
    """Into ``--out``, or the default: ``runs/…`` for a checkpoint zip, the run folder itself for ``--resume RUN_DIR``."""
    monkeypatch.chdir(tmp_path)  # the default run folder would be runs/… here
    resume, options, words = _bad_resume(kind, run64, tmp_path)
    where = ["--out", str(tmp_path / "out")] if out == "--out" and "--out" not in options else []
    before = snapshot(tmp_path)
    code, printed, err = run_cli(["train", "--resume", str(resume), *options, *where], capsys)
    one_line_error(code, printed, err, *words)
    assert snapshot(tmp_path) == before  # no --out folder, no runs/, the resumed run folder unchanged


# -- resuming continues to the configured total ---------------------------------------------------------------------


def test_resume_continues_to_the_configured_total_and_says_so(run64, tmp_path, capsys):
    run = shutil.copytree(run64, tmp_path / "run")
    code, out, err = run_cli(["train", "--resume", str(run), "--timesteps", "128"], capsys)  # in its own folder
    assert code == 0, err
    assert f"resuming at step 64 of 128 from {run / 'last_model.zip'}" in out.splitlines()
    assert "note: eval_freq 1,000 is above timesteps 128: only the final evaluation runs" in out.splitlines()
    assert "this is a new run" not in out
    assert "trained maskable_ppo on Synergy-small-v0 for 128 steps" in out
    assert load_model(run / "last_model.zip", "maskable_ppo", "cpu").num_timesteps == 128  # not 64 + 128
    assert pd.read_csv(run / "eval.csv")["timesteps"].tolist() == [64, 128]  # the first run's evaluation kept
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "rl_model_112_steps.zip", "rl_model_vecnormalize_112_steps.pkl"]
    # From the periodic checkpoint into a new folder: 48 → 128.
    checkpoint = run64 / "checkpoints" / "rl_model_48_steps.zip"
    code, out, err = run_cli(["train", "--resume", str(checkpoint), "--timesteps", "128", "--out", str(tmp_path / "b")],
                             capsys)
    assert code == 0, err
    assert f"resuming at step 48 of 128 from {checkpoint}" in out.splitlines()
    # A checkpoint of a run, continued elsewhere: the new run's best_model.zip does not see the run's evaluations.
    assert (f"note: this is a new run: the evaluations of {run64} up to step 48 stay there, and this run's "
            f"best_model.zip is the best of its own (--resume {run64} or --out {run64} continues that run in its folder)"
            in out.splitlines())
    assert load_model(tmp_path / "b" / "last_model.zip", "maskable_ppo", "cpu").num_timesteps == 128
    assert pd.read_csv(tmp_path / "b" / "eval.csv")["timesteps"].tolist() == [128]
    # A model outside a training run (exported: no eval.csv) has no run to continue: no such note.
    exported = shutil.copytree(run64, tmp_path / "exported")
    (exported / "eval.csv").unlink()
    code, out, err = run_cli(["train", "--resume", str(exported / "last_model.zip"), "--timesteps", "128",
                              "--out", str(tmp_path / "c")], capsys)
    assert code == 0, err
    assert "resuming at step 64 of 128" in out and "this is a new run" not in out


def test_a_resumed_run_trains_with_the_hyperparameters_its_config_records(run64, tmp_path, capsys):
    """A learning rate, epochs and clip range changed on resuming apply to the rest of the run (SB3 would keep the
    saved ones), and the run's config.json says what it trained with."""
    config = tmp_path / "slower.toml"
    config.write_text("learning_rate = 3e-5\nn_epochs = 2\nclip_range = 0.1\n")
    out = tmp_path / "slower"
    code, printed, err = run_cli(["train", "--resume", str(run64 / "last_model.zip"), "--config", str(config),
                                  "--timesteps", "96", "--out", str(out)], capsys)
    assert code == 0, err
    model = load_model(out / "last_model.zip", "maskable_ppo", "cpu")
    recorded = json.loads((out / "config.json").read_text())
    assert (recorded["learning_rate"], recorded["n_epochs"], recorded["clip_range"]) == (3e-5, 2, 0.1)
    assert model.lr_schedule(0.5) == 3e-5 and model.policy.optimizer.param_groups[0]["lr"] == 3e-5
    assert model.n_epochs == 2 and model.clip_range(0.5) == 0.1
    assert load_model(run64 / "last_model.zip", "maskable_ppo", "cpu").lr_schedule(0.5) != 3e-5  # it did change


def test_resuming_in_place_from_before_the_best_keeps_the_best_model_and_its_row(run64, tmp_path, capsys):
    """Killed after a new best and before the next checkpoint: resumed from that checkpoint, the run keeps the best
    model (replaced only by a better one) and the eval.csv row that says what it is."""
    from synergy_gym.agents.config import load_run_config
    from synergy_gym.agents.models import load_agent
    from synergy_gym.experiments.evaluation import evaluate

    run = shutil.copytree(run64, tmp_path / "run")
    best_then = pd.read_csv(run / "eval.csv")  # one row: step 64, the model best_model.zip holds
    assert best_then["timesteps"].tolist() == [64]
    worse = best_then.assign(timesteps=16, mean_jct_h=best_then["mean_jct_h"] + 0.5)  # an earlier evaluation
    pd.concat([worse, best_then]).to_csv(run / "eval.csv", index=False)
    best_bytes = (run / "best_model.zip").read_bytes()
    code, out, err = run_cli(["train", "--resume", str(run / "checkpoints" / "rl_model_48_steps.zip"),
                              "--timesteps", "64", "--out", str(run)], capsys)
    assert code == 0, err
    history = pd.read_csv(run / "eval.csv")
    assert history["timesteps"].tolist() == [16, 64, 64]  # the best's row kept, then the new evaluation
    assert history["mean_jct_h"].iloc[1] == best_then["mean_jct_h"].iloc[0]
    cfg = load_run_config(run / "config.json")
    best_now = evaluate(load_agent(run / "best_model.zip", cfg, "cpu", "best"), cfg.env_id, cfg.eval_seeds,
                        name="best", **cfg.env_kwargs)["mean_jct_h"].mean()
    assert best_now == pytest.approx(history["mean_jct_h"].min(), rel=1e-12)  # eval.csv says what best_model.zip is
    replaced = (run / "best_model.zip").read_bytes() != best_bytes
    assert replaced == bool(history["mean_jct_h"].iloc[2] < history["mean_jct_h"].iloc[1])  # only by a better one


def test_a_lone_checkpoint_resumes_with_its_network_given(run64, tmp_path, capsys):
    """Without its run's config.json, the network settings given (--config) are checked against the model and recorded."""
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(run64 / "last_model.zip", lone / "last_model.zip")
    shutil.copy(run64 / "vecnormalize.pkl", lone / "vecnormalize.pkl")
    code, out, err = run_cli(["train", "--resume", str(lone / "last_model.zip"), *QUICK, "--config",
                              str(tiny_config(tmp_path)), "--timesteps", "80", "--out", str(tmp_path / "r")], capsys)
    assert code == 0, err
    recorded = json.loads((tmp_path / "r" / "config.json").read_text())
    assert (recorded["net_arch"], recorded["global_dim"], recorded["slot_dim"]) == ([16], 16, 8)


def test_warm_start_settings_given_on_resume_are_notes(run64, tmp_path, capsys):
    code, out, err = run_cli(["train", "--resume", str(run64 / "last_model.zip"), "--timesteps", "80", "--bc-steps",
                              "32", "--bc-policy", "srtf+tune", "--out", str(tmp_path / "r")], capsys)
    assert code == 0, err
    notes = [line for line in out.splitlines() if "has no effect on a run resumed" in line]
    assert notes == [f"note: {setting} has no effect on a run resumed at step 64: the warm start runs only at step 0"
                     for setting in ("bc_steps 32", "bc_policy 'srtf+tune'")]


# -- a damaged model zip ----------------------------------------------------------------------------------------------


def test_a_damaged_model_zip_is_one_line_saying_so(run64, tmp_path, capsys):
    (tmp_path / "m").mkdir()
    damaged = flip_a_byte(run64 / "last_model.zip", tmp_path / "m" / "last_model.zip")
    shutil.copy(run64 / "config.json", tmp_path / "m")
    shutil.copy(run64 / "vecnormalize.pkl", tmp_path / "m")
    with pytest.raises(ConfigError, match=r"model file .*last_model.zip is damaged: its member policy.pth fails its checksum"):
        check_model_zip(damaged)
    assert saved_timesteps(damaged) == 64  # its data member is whole: the damage is found only by reading every member
    before = snapshot(tmp_path)
    code, out, err = run_cli([*EVALUATE, "--model", str(damaged), "--out", str(tmp_path / "e")], capsys)
    one_line_error(code, out, err, f"model file {damaged} is damaged", command="evaluate")
    code, out, err = run_cli(["train", "--resume", str(tmp_path / "m"), "--timesteps", "128"], capsys)
    one_line_error(code, out, err, f"model file {damaged} is damaged")
    assert snapshot(tmp_path) == before


# -- SIGKILL ----------------------------------------------------------------------------------------------------------

#: ``synergy-gym train`` with one more callback: prints the step count after every step (flushed).
STEP_PRINTER = """
import sys

from stable_baselines3.common.callbacks import BaseCallback

from synergy_gym.agents import train as train_module
from synergy_gym.cli import main


class PrintSteps(BaseCallback):
    def _on_step(self):
        print(f"step {self.num_timesteps}", flush=True)
        return True


if __name__ == "__main__":  # not in the environments' worker processes, which import this module
    original = train_module.train
    train_module.train = lambda cfg, out=None, resume=None: original(cfg, out=out, resume=resume, callbacks=[PrintSteps()])
    sys.exit(main(sys.argv[1:]))
"""


def _killed_run(tmp_path: Path, freq: int, kill_after: int) -> tuple[Path, int]:
    """Train in a subprocess (2 environments in worker processes) and SIGKILL its process group once a checkpoint
    exists and it has passed step ``kill_after``; the run folder and the last step it reported."""
    script = tmp_path / "print_steps.py"
    script.write_text(STEP_PRINTER)
    run = tmp_path / "run"
    args = list(QUICK)
    args[args.index("--n-envs") + 1] = "2"
    proc = subprocess.Popen(
        [sys.executable, str(script), "train", *args, "--config", str(tiny_config(tmp_path)),
         "--timesteps", "1000000", "--checkpoint-freq", str(freq), "--out", str(run)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    steps = [0]
    try:
        deadline = time.monotonic() + 180
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("step "):
                steps.append(int(line.split()[1]))
            if steps[-1] >= kill_after and any((run / "checkpoints").glob("rl_model_*_steps.zip")):
                os.killpg(proc.pid, signal.SIGKILL)
                break
            assert time.monotonic() < deadline, "no checkpoint within 180 s"
        rest, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, stderr
    steps += [int(line.split()[1]) for line in rest.splitlines() if line.startswith("step ")]
    return run, max(steps)


def _all_whole(run: Path) -> None:
    """Every model zip, statistics pickle, JSON and CSV file of the run loads; no temporary file is left."""
    import json

    for path in run.rglob("*"):
        if path.suffix == ".zip":
            load_model(path, "maskable_ppo", "cpu")
        elif path.suffix == ".pkl":
            read_stats(path)
        elif path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".csv":
            pd.read_csv(path)


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_from_its_latest_checkpoint(tmp_path, capsys):
    freq = 32
    run, killed_at = _killed_run(tmp_path, freq, kill_after=150)
    names = [p.name for p in (run / "checkpoints").iterdir()]
    steps = sorted(int(m[1]) for name in names if (m := CHECKPOINT.fullmatch(name)))
    latest = steps[-1]
    assert killed_at - freq <= latest <= killed_at, (killed_at, names)  # at most checkpoint_freq steps lost
    assert not (run / "last_model.zip").exists()  # killed outright: nothing saved on the way out
    _all_whole(run)
    # What a kill in the middle of writing a file leaves: temporary files beside their place.
    (run / ".best_model.zip.k1ll3d_x.tmp").write_bytes(b"PK\x03\x04 half a zip")
    (run / "checkpoints" / f".rl_model_{latest + freq}_steps.zip.abcdefgh.tmp").write_bytes(b"PK")
    total = latest + 64
    code, out, err = run_cli(["train", "--resume", str(run), "--timesteps", str(total)], capsys)
    assert code == 0, err
    checkpoint = run / "checkpoints" / f"rl_model_{latest}_steps.zip"
    assert f"resuming at step {latest:,} of {total:,} from {checkpoint}" in out.splitlines(), out
    assert load_model(run / "last_model.zip", "maskable_ppo", "cpu").num_timesteps == total
    assert pd.read_csv(run / "eval.csv")["timesteps"].tolist() == [total]
    assert sorted(p.name for p in run.rglob(".*")) == []  # the temporary files of the killed run are gone
    _all_whole(run)
