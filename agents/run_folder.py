"""A training run's folder: its default name, the files it holds, and the records written before training.

``synergy-gym train`` writes ``config.json`` (the resolved
:class:`~synergy_gym.agents.config.TrainConfig`) and ``versions.json`` (package
versions and the git commit of the code) first (:func:`write_run_records`), then
``baselines.json`` (the env heuristics' scores, :func:`write_baselines`); the rest
of :data:`RUN_FILES` comes from training (``synergy_gym.agents.train``).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from synergy_gym.agents.baseline_scores import best_heuristic
from synergy_gym.agents.checkpoints import config_of_step, latest_checkpoint
from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.config_values import config_json
from synergy_gym.cli.files import atomic_write_text, unused_path
from synergy_gym.errors import PathError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: Written when an evaluation starts and removed when its row is in ``eval.csv``: ``{"step": N, "final": bool}``. Left by
#: Ctrl-C during an evaluation (the model saved at step N), it tells ``--resume RUN_DIR`` to run that evaluation again.
UNFINISHED_EVALUATION = ".unfinished_evaluation.json"
#: What a run folder holds (see ``synergy_gym.agents.train``); checked before training starts.
RUN_FILES = ("config.json", "versions.json", "baselines.json", "tb/", "eval.csv", "best_model.zip",
             "best_vecnormalize.pkl", "last_model.zip", "vecnormalize.pkl", "checkpoints/", UNFINISHED_EVALUATION)


def unfinished_evaluation(run_dir: Path, step: int) -> bool | None:
    """Whether the run's evaluation at ``step`` was cut short: None if not (no such record), else whether it was the
    run's final one (after its last update: the run had ended, at its ``timesteps`` or on a stall)."""
    try:
        record = json.loads((Path(run_dir) / UNFINISHED_EVALUATION).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("step") != step:
        return None  # another step's: a killed run's, resumed from an earlier checkpoint
    return bool(record.get("final"))


def check_no_other_run(run_dir: Path, flag: str = "--out") -> None:
    """Refuse a folder that already holds a run's files (a fresh run, or one resumed from another folder's
    checkpoint, would leave them beside its own: another run's statistics or checkpoints picked up later)."""
    found = [name for name in RUN_FILES if (Path(run_dir) / name.rstrip("/")).exists()]
    if found:
        resume = f"continue that run with --resume {run_dir}, " if latest_checkpoint(Path(run_dir)) is not None else ""
        raise PathError(f"{flag} {run_dir}: the folder already holds a training run ({', '.join(found[:3])}"
                        f"{', …' if len(found) > 3 else ''}); train into a new folder, {resume}or remove it")


def default_run_dir(cfg: TrainConfig) -> Path:
    """``runs/<env>__<algo>__<seed>__<time>``."""
    return unused_path(Path("runs"), f"{cfg.env_id}__{cfg.algo}__{cfg.seed}__{datetime.now():%Y%m%d-%H%M%S}")


def versions() -> dict[str, Any]:
    """``versions.json``: Python's and the packages' versions, the git commit of the code and whether it was modified
    (both null unless the code runs from a synergy-gym git checkout: :func:`code_root`, :func:`git_state`)."""
    out: dict[str, Any] = {"python": platform.python_version()}
    for pkg in ("synergy-gym", "numpy", "pandas", "gymnasium", "torch", "stable-baselines3", "sb3-contrib", "tensorboard"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    out["git_commit"], out["git_dirty"] = git_state(code_root())
    return out


def code_root() -> Path | None:
    """The synergy-gym source checkout this code runs from (its ``pyproject.toml`` names synergy-gym), else None.

    In a checkout (installed editable) this module is ``<checkout>/agents/run_folder.py``; installed from a wheel it
    is ``site-packages/synergy_gym/agents/run_folder.py``, whose folder two up is no checkout.
    """
    root = Path(__file__).resolve().parents[1]
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, ValueError):  # none there, or not TOML (TOMLDecodeError is a ValueError)
        return None
    return root if isinstance(project, dict) and project.get("name") == "synergy-gym" else None


def git_state(root: Path | None) -> tuple[str | None, bool | None]:
    """The commit checked out in ``root`` and whether files differ from it, where ``root`` is the top of its own git
    repository (None, None otherwise: not a repository, git missing, or a folder inside another project's
    repository – a virtual environment in the user's own project, whose commit says nothing about this code)."""
    if root is None:
        return None, None

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode != 0 or not top.stdout.strip() or Path(top.stdout.strip()).resolve() != root.resolve():
            return None, None
        commit = git("rev-parse", "HEAD")
        if commit.returncode != 0 or not commit.stdout.strip():  # a repository without a commit yet
            return None, None
        dirty = git("status", "--porcelain")
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit.stdout.strip(), (bool(dirty.stdout.strip()) if dirty.returncode == 0 else None)


def write_run_records(run_dir: Path, cfg: TrainConfig, device: str) -> None:
    """Create ``run_dir`` and write ``config.json`` (the settings asked for: ``device`` may be ``"auto"``) and
    ``versions.json`` (with the ``device`` the run trains on, and a CUDA device's name).

    A setting ``config.json`` cannot hold (an object in ``env_kwargs``) is a one-line ConfigError before ``run_dir``
    is made.
    """
    config_text = config_json(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.json", config_text)
    record = {**versions(), "device": device}
    if device.startswith("cuda"):
        import torch

        record["device_name"] = torch.cuda.get_device_name(device)
    atomic_write_text(run_dir / "versions.json", json.dumps(record, indent=2) + "\n")


def write_baselines(run_dir: Path, cfg: TrainConfig, means: dict[str, float], relative_to: str | None) -> None:
    """``baselines.json``: the evaluation seeds, each heuristic's mean JCT, the best, and the relative reward's heuristic."""
    atomic_write_text(run_dir / "baselines.json", json.dumps(
        {"eval_seeds": cfg.eval_seeds, "mean_jct_h": means, "best": best_heuristic(means),
         "relative_to": relative_to}, indent=2) + "\n")


def keep_earlier_config(run_dir: Path, cfg: TrainConfig, step: int) -> Path | None:
    """Before a run resumed in its own folder at ``step`` rewrites ``config.json`` with other settings, keep the
    settings that trained the steps up to ``step`` (:func:`config_of_step`) as ``config.before-step-<step>.json``
    (``-2``, … when there is one). Returns it (None: the settings are the same, or there are none). Called before
    :func:`set_aside_later_checkpoints` moves the kept settings of later steps away."""
    current = config_of_step(Path(run_dir), step)  # (after resumes from earlier checkpoints: not config.json)
    if not current.is_file() or current.read_text(encoding="utf-8") == config_json(cfg):
        return None
    kept = unused_path(Path(run_dir), f"config.before-step-{step}", ".json")
    atomic_write_text(kept, current.read_text(encoding="utf-8"))
    return kept


#: The file that marks a run folder in use by a training process (``<host> <pid>``), removed when it ends.
LOCK_FILE = ".train.lock"


def check_not_locked(run_dir: Path) -> None:
    """Refuse, in one line, a run folder another training process of this machine (or of another one) holds: before
    ``--resume RUN_DIR`` picks a checkpoint that process may prune meanwhile. A killed process's lock does not count."""
    holder = _live_holder(Path(run_dir) / LOCK_FILE)
    if holder is not None:
        raise PathError(f"{str(run_dir)!r}: another training process ({holder or 'unknown'}) is using this run folder; "
                        f"wait for it to end, or remove {Path(run_dir) / LOCK_FILE} if none is")


def _live_holder(path: Path) -> str | None:
    """The ``<host> <pid>`` of the lock file ``path`` ('' if unreadable) unless it is gone or a killed process's of
    this machine (None)."""
    try:
        holder = path.read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    host, _, pid = holder.partition(" ")
    return None if host == socket.gethostname() and pid.isdigit() and not _running(int(pid)) else holder


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for this training process: a second one (``train --resume RUN_DIR`` started twice, two runs
    into one ``--out``) is refused in one line while this one runs. A lock left by a process of this machine that
    no longer runs (killed) is taken over; one of another machine is respected (the message says how to remove it)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path, mine = run_dir / LOCK_FILE, f"{socket.gethostname()} {os.getpid()}"
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        check_not_locked(run_dir)
        atomic_write_text(path, mine + "\n")  # (a killed run's: taken over)
    else:
        with os.fdopen(fd, "w", encoding="utf-8") as lock:
            lock.write(mine + "\n")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    """Whether process ``pid`` of this machine runs (on Windows: assumed, so a killed run's lock is removed by hand)."""
    if sys.platform == "win32":  # os.kill(pid, 0) there sends CTRL_C_EVENT (0): it would interrupt that training
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    return True
