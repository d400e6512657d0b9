"""A run's checkpoints: saving a model and its normalisation statistics atomically, and finding the latest.

Every file a run saves – ``best_model.zip``, ``last_model.zip``, the periodic checkpoints and their
``VecNormalize`` statistics – is written to a temporary file beside its place and renamed into it
(:func:`save_model`, :func:`save_stats`), so a run killed at any moment (SIGKILL, a power cut) leaves
each file whole: the old one or the new one.

Periodic checkpoints (``checkpoint_freq`` steps, :class:`synergy_gym.agents.callbacks.PeriodicCheckpoints`)
go to ``<run>/checkpoints/`` with Stable-Baselines3's names: ``rl_model_<step>_steps.zip`` and
``rl_model_vecnormalize_<step>_steps.pkl``. The statistics are written first, so a checkpoint's zip
never exists without its statistics; once a new checkpoint is complete the older ones are removed.
:func:`latest_checkpoint` finds what ``--resume RUN_DIR`` continues from: the newest of the
checkpoints and ``last_model.zip`` (by the step count saved in each). A run that continues in its folder first
removes the temporary files a kill in the middle of a write left there (:func:`remove_partial_files`), and
one resumed there from an earlier checkpoint sets the later ones aside (:func:`set_aside_later_checkpoints`).
"""

from __future__ import annotations

import io
import json
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

from synergy_gym.cli.files import atomic_write_bytes, unused_path

#: The sub-folder of a run that holds its periodic checkpoints.
CHECKPOINT_DIR = "checkpoints"
PREFIX = "rl_model"
#: ``rl_model_<step>_steps.zip`` (Stable-Baselines3's CheckpointCallback names them so too).
CHECKPOINT_NAME = re.compile(r"(?P<prefix>.+)_(?P<step>\d+)_steps\.zip")
#: The final model of a run (also saved on Ctrl-C) and its statistics.
LAST_MODEL, LAST_STATS = "last_model.zip", "vecnormalize.pkl"


def checkpoint_zip(folder: Path, step: int) -> Path:
    return Path(folder) / f"{PREFIX}_{step}_steps.zip"


def checkpoint_stats(model_zip: Path) -> Path | None:
    """The statistics of a checkpoint named ``<prefix>_<step>_steps.zip`` (None for other names)."""
    match = CHECKPOINT_NAME.fullmatch(Path(model_zip).name)
    if match is None:
        return None
    return Path(model_zip).with_name(f"{match['prefix']}_vecnormalize_{match['step']}_steps.pkl")


def save_model(model: Any, path: Path) -> Path:
    """``model.save`` to ``path`` atomically (in memory, then a temporary file renamed into place)."""
    buffer = io.BytesIO()
    model.save(buffer)
    return atomic_write_bytes(Path(path), buffer.getvalue())


def save_stats(vec_normalize: Any, path: Path) -> Path:
    """``VecNormalize.save`` to ``path`` atomically (the same pickle)."""
    return atomic_write_bytes(Path(path), pickle.dumps(vec_normalize))


def save_checkpoint(model: Any, run_dir: Path) -> Path:
    """Save ``model`` (and its statistics, first) as ``<run>/checkpoints/rl_model_<step>_steps.zip``; prune older ones."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = checkpoint_zip(folder, model.num_timesteps)
    vec_normalize = model.get_vec_normalize_env()
    stats = checkpoint_stats(path)
    if vec_normalize is not None and stats is not None:
        save_stats(vec_normalize, stats)
    save_model(model, path)
    for old in folder.iterdir():  # older checkpoints, and what a killed run left half-written
        if old != path and old != stats and (old.name.startswith((f"{PREFIX}_", f".{PREFIX}_"))):
            old.unlink(missing_ok=True)
    return path


#: What :func:`synergy_gym.cli.files.atomic_write_bytes` writes before renaming it into place: ``.<name>.<8 random>.tmp``.
PARTIAL_FILE = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")


def remove_partial_files(run_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """Remove what a run killed while writing left: the temporary files of ``names`` (a run's files) in ``run_dir``
    and of checkpoints in its ``checkpoints/``; the files removed."""
    removed = []
    for folder, whole in ((Path(run_dir), lambda name: name in names),
                          (Path(run_dir) / CHECKPOINT_DIR, lambda name: name.startswith(f"{PREFIX}_"))):
        for path in folder.glob(".*.tmp") if folder.is_dir() else ():
            match = PARTIAL_FILE.fullmatch(path.name)
            if match is not None and whole(match["name"]) and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def saved_timesteps(model_zip: Path) -> int | None:
    """The step count a model zip was saved at (``num_timesteps`` in its ``data``); None if it cannot be read."""
    return saved_count(model_zip, "num_timesteps")


def saved_count(model_zip: Path, key: str) -> int | None:
    """The integer ``key`` of a model zip's ``data`` (``num_timesteps``, ``n_envs``); None if it cannot be read."""
    try:
        with zipfile.ZipFile(model_zip) as archive:
            data = json.loads(archive.read("data"))
        value = data.get(key)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def run_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """The readable checkpoints of a run folder (periodic ones and ``last_model.zip``) as (step, path), oldest first."""
    run_dir = Path(run_dir)
    found = []
    folder = run_dir / CHECKPOINT_DIR
    candidates = sorted(folder.glob(f"{PREFIX}_*_steps.zip")) if folder.is_dir() else []
    for path in [*candidates, run_dir / LAST_MODEL]:
        steps = saved_timesteps(path) if path.is_file() else None
        if steps is not None:
            found.append((steps, path))
    return sorted(found, key=lambda item: (item[0], item[1].name == LAST_MODEL))


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint a run folder continues from: the highest step count (``last_model.zip`` on a tie); None if none."""
    found = run_checkpoints(run_dir)
    return found[-1][1] if found else None


#: Where a run resumed in its own folder from an earlier checkpoint puts the checkpoints of the continuation it
#: replaces (``<run>/superseded/from-step-<step>``), so that ``--resume RUN_DIR`` cannot pick them up again.
SUPERSEDED_DIR = "superseded"


def set_aside_later_checkpoints(run_dir: Path, step: int) -> Path | None:
    """Move the checkpoints of ``run_dir`` saved past ``step`` (``last_model.zip`` and periodic ones, with their
    statistics) to ``<run>/superseded/from-step-<step>[-N]`` – a run resumed in place from an earlier checkpoint
    replaces that continuation, and :func:`latest_checkpoint` would otherwise pick it up after a kill – with a copy
    of the run's records that say how they were trained (``config.json``, ``versions.json``), so that they still
    evaluate on their environment and export. Nothing is deleted; returns the folder (None: nothing was past
    ``step``)."""
    run_dir = Path(run_dir)
    later = [path for saved, path in run_checkpoints(run_dir) if saved > step]
    if not later:
        return None
    dest = unused_path(run_dir / SUPERSEDED_DIR, f"from-step-{step}")
    dest.mkdir(parents=True)
    for record in ("config.json", "versions.json"):  # (before the resumed session rewrites them)
        if (run_dir / record).is_file():
            atomic_write_bytes(dest / record, (run_dir / record).read_bytes())
    for until, _, path in kept_configs(run_dir):  # the settings of steps past ``step``: of that continuation
        if until > step:
            path.rename(dest / path.name)
    for path in later:
        stats = run_dir / LAST_STATS if path.name == LAST_MODEL else checkpoint_stats(path)
        for moved in (stats, path):  # the statistics first, as they were saved
            if moved is not None and moved.is_file():
                moved.rename(dest / moved.name)
    return dest


_EARLIER_CONFIG = re.compile(r"config\.before-step-(?P<step>\d+)(?:-(?P<n>\d+))?\.json")


def config_of_step(run_dir: Path, step: int) -> Path:
    """The config file of the session that trained a run's model up to ``step``: the first kept
    ``config.before-step-<S>.json`` (:func:`~synergy_gym.agents.run_folder.keep_earlier_config`) with
    ``step`` ≤ S, else ``config.json``. (A best model kept from a continuation that a resume from an earlier
    checkpoint replaced is counted as the resumed session's.)"""
    for until, _, path in kept_configs(run_dir):
        if step <= until:
            return path
    return Path(run_dir) / "config.json"


def kept_configs(run_dir: Path) -> list[tuple[int, int, Path]]:
    """A run's kept ``config.before-step-<S>[-N].json`` files as (S, N, path), in that order."""
    kept = []
    for path in Path(run_dir).glob("config.before-step-*.json"):
        match = _EARLIER_CONFIG.fullmatch(path.name)
        if match is not None:
            kept.append((int(match["step"]), int(match["n"] or 1), path))
    return sorted(kept)
