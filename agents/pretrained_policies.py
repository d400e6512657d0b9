"""Pretrained policies shipped with the package: ``synergy_gym.agents.load_pretrained(name)``, ``--model pretrained:NAME``.

Each policy is a folder ``agents/pretrained/<name>/`` (package data) holding

``model.zip``         the Stable-Baselines3 model (without the optimiser's state, which only training needs)
``vecnormalize.pkl``  its observation-normalisation statistics (``VecNormalize``; absent for a policy
                      trained without them, ``normalize_obs = false``)
``config.json``       the training run's configuration (environment id and kwargs included)
``card.json``         where it comes from: the training command, run folder, training
                      seed and steps, the checkpoint's validation JCT

:func:`export_pretrained` writes such a folder from a training run's checkpoint
(``python -m synergy_gym.agents.export_pretrained``): whole or not at all – the files are checked
(:func:`export_sources`, the size limit) before anything is written, then written into a temporary
folder beside ``dest`` that replaces it, so a refused or failed export leaves ``dest`` as it was.
Loading needs only the ``rl`` extra and runs on the CPU; nothing is downloaded.
"""

from __future__ import annotations

import io
import json
import shutil
import stat
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synergy_gym.agents.checkpoints import config_of_step, saved_timesteps
from synergy_gym.agents.config import TrainConfig, first_line, load_run_config, read_text_file
from synergy_gym.agents.models import load_agent, load_model
from synergy_gym.agents.normalization import find_stats, stats_candidates
from synergy_gym.agents.provenance import run_folder
from synergy_gym.cli.files import current_umask, require_file
from synergy_gym.errors import ConfigError, PathError, UnknownNameError

if TYPE_CHECKING:  # pragma: no cover
    from torch.optim import Optimizer

    from synergy_gym.agents.wrappers import AgentPolicy

#: ``--model pretrained:NAME`` names a shipped policy.
PREFIX = "pretrained:"
MODEL_FILE = "model.zip"
STATS_FILE = "vecnormalize.pkl"
FILES = (MODEL_FILE, STATS_FILE, "config.json", "card.json")
#: The most a shipped policy's files may take together (the issue's limit, checked by the tests).
MAX_BYTES = 2 * 1024 * 1024


def pretrained_root() -> Path:
    """The folder of the shipped policies (inside the installed ``agents`` package)."""
    return Path(str(resources.files("synergy_gym.agents"))) / "pretrained"


def pretrained_names() -> tuple[str, ...]:
    """The names of the shipped policies, sorted."""
    root = pretrained_root()
    if not root.is_dir():
        return ()
    # (not the hidden folders an export writes beside a policy before it replaces it)
    return tuple(sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and (p / MODEL_FILE).is_file()))


def pretrained_model_path(name: str) -> Path:
    """``agents/pretrained/<name>/model.zip``; an unknown name lists the known ones (a name with the command line's
    ``pretrained:`` prefix says to drop it)."""
    names = pretrained_names()
    if not isinstance(name, str):
        raise ConfigError(f"a pretrained policy's name must be text ({', '.join(names)}), got {name!r}")
    if name.startswith(PREFIX) and name[len(PREFIX):] in names:
        raise ConfigError(f"pretrained policy {name!r}: give the name without {PREFIX!r} here, {name[len(PREFIX):]!r} "
                          f"(the prefix marks a shipped policy where a model path could stand, as in --model)")
    if name not in names:
        raise UnknownNameError("pretrained policy", name, names)
    return pretrained_root() / name / MODEL_FILE


def resolve_model_argument(text: str | Path) -> Path:
    """``--model``: ``pretrained:NAME`` → the shipped model's path; any other text or path is a path as given."""
    if not isinstance(text, (str, Path)):
        raise ConfigError(f"a model must be a path or 'pretrained:NAME', got {text!r}")
    text = str(text)
    if text.startswith(PREFIX):
        return pretrained_model_path(text[len(PREFIX):])
    return Path(text)


def pretrained_card(name: str) -> dict[str, Any]:
    """The policy's ``card.json``: its provenance and validation figures (a damaged card is one line naming it)."""
    path = pretrained_model_path(name).parent / "card.json"
    try:
        card = json.loads(read_text_file(path, "card"))
    except ValueError as exc:
        raise ConfigError(f"card {path} is malformed: {first_line(exc)}") from None
    if not isinstance(card, dict):
        raise ConfigError(f"card {path} must hold a table")
    return card


def load_pretrained(name: str, device: str = "cpu") -> AgentPolicy:
    """The shipped policy ``name`` as a policy for :func:`synergy_gym.evaluate` (SB3's ``predict`` signature).

    Observations are normalised with the policy's statistics and action masks are
    passed on, as in :class:`synergy_gym.agents.wrappers.AgentPolicy`. The environment it was
    trained on is ``pretrained_config(name).env_id`` with its ``env_kwargs``. ``device``: ``cpu``, ``cuda``,
    ``cuda:N`` or ``auto``; one PyTorch does not see is refused
    (:func:`synergy_gym.agents.models.resolve_device`).
    """
    path = pretrained_model_path(name)
    return load_agent(path, pretrained_config(name), device, name)


def pretrained_config(name: str) -> TrainConfig:
    """The :class:`synergy_gym.agents.config.TrainConfig` the policy was trained with."""
    return load_run_config(pretrained_model_path(name).parent / "config.json")


def export_sources(model_zip: Path) -> tuple[Path, Path | None, TrainConfig]:
    """What exporting ``model_zip`` reads, checked before any work: the run folder, the normalisation statistics
    (None for a model trained without observation normalisation, which loads without them) and the run's config.

    Missing files are one line naming them.
    """
    model_zip = require_file(model_zip, "export: model file", ConfigError)
    run = run_folder(model_zip)
    require_file(run / "config.json", "export: the run's config", ConfigError)
    cfg = load_run_config(export_config(model_zip))
    stats = find_stats(model_zip) if cfg.normalize_obs else None  # (a reward-only run's file: nothing to act with)
    if stats is None and cfg.normalize_obs:
        raise ConfigError(f"export: {model_zip}: its normalisation statistics are missing (looked for "
                          f"{', '.join(map(str, stats_candidates(model_zip)))}); its run normalised observations "
                          "(normalize_obs), so the policy cannot act without them")
    return run, stats, cfg


def export_config(model_zip: Path) -> Path:
    """The config file an export ships: the run's settings for the steps that trained ``model_zip`` (a run resumed
    in its own folder with other settings keeps the earlier ones, :func:`~synergy_gym.agents.checkpoints.config_of_step`)."""
    step = saved_timesteps(model_zip)
    run = run_folder(model_zip)
    return config_of_step(run, step) if step is not None else run / "config.json"


def check_export_dest(dest: Path, model_zip: Path | None = None) -> Path:
    """``dest`` if an export may write it: a new or empty folder, or a policy folder (which it replaces whole) other
    than the folder of ``model_zip`` itself (re-exporting a policy into its own folder lost its card's numbers).

    Returned absolute, symbolic links resolved (a link's target folder is what the export replaces).
    """
    dest = Path(dest).resolve()
    if dest.exists() and not dest.is_dir():
        raise PathError(f"export: --dest {str(dest)!r} is a file, not a folder")
    if model_zip is not None and run_folder(Path(model_zip)).resolve() == dest:
        raise PathError(f"export: --dest {str(dest)!r} is the folder of the model exported, which an export replaces "
                        "whole: give another folder")
    others = sorted(p.name for p in dest.iterdir() if p.name not in FILES) if dest.is_dir() else []
    if others:
        raise PathError(f"export: --dest {str(dest)!r} holds files that are not a policy's ({', '.join(others[:3])}"
                        f"{', …' if len(others) > 3 else ''}); an export replaces the whole folder: give a new one")
    return dest


def export_pretrained(model_zip: Path, dest: Path, card: dict[str, Any]) -> Path:
    """Write a pretrained-policy folder ``dest`` from a run's checkpoint; returns ``dest``.

    ``model_zip`` is a run's ``best_model.zip`` (with ``best_vecnormalize.pkl``),
    ``last_model.zip`` (with ``vecnormalize.pkl``) or a periodic checkpoint, beside the run's ``config.json``
    (:func:`export_sources`; a run without observation normalisation ships no statistics).
    The model is saved again with a fresh optimiser (its moment estimates are only
    needed to continue training and would triple the file); the policy's weights
    are unchanged. ``card`` is written as ``card.json``. The files are made in memory and checked against
    :data:`MAX_BYTES` first, then written into a temporary folder beside ``dest`` that replaces it: a refused or
    failed export leaves ``dest`` as it was (a previous policy there included).
    """
    model_zip = Path(model_zip)
    dest = check_export_dest(dest, model_zip)
    run, stats, cfg = export_sources(model_zip)
    model = load_model(model_zip, cfg.algo, "cpu")
    policy = model.policy
    optimizer_class: Callable[..., Optimizer] = policy.optimizer_class  # a torch optimiser, which takes lr
    policy.optimizer = optimizer_class(policy.parameters(), lr=cfg.learning_rate, **policy.optimizer_kwargs)
    buffer = io.BytesIO()
    model.save(buffer)
    files = {MODEL_FILE: buffer.getvalue(), "config.json": export_config(model_zip).read_bytes(),
             "card.json": (json.dumps(card, indent=2) + "\n").encode("utf-8")}
    if stats is not None:
        files[STATS_FILE] = stats.read_bytes()
    size = sum(len(data) for data in files.values())
    if size > MAX_BYTES:
        raise ConfigError(f"export: the policy of {model_zip} takes {size:,} bytes, more than the {MAX_BYTES:,} a "
                          f"shipped policy may; nothing was written to {dest}")
    try:
        _write_folder(dest, files)
    except OSError as exc:
        raise PathError(f"export: cannot write {dest}: {exc.strerror or first_line(exc)}") from None
    return dest


def _write_folder(dest: Path, files: dict[str, bytes]) -> None:
    """``dest`` holding exactly ``files``: written into a temporary folder beside it, which then replaces it (a folder
    already there is moved aside first and removed once the new one is in place, put back if that fails)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    old: Path | None = None
    try:
        for name, data in files.items():
            (staged / name).write_bytes(data)
        # mkdtemp makes folders private: the folder it replaces keeps its mode, a new one gets mkdir's
        staged.chmod(stat.S_IMODE(dest.stat().st_mode) if dest.is_dir() else 0o777 & ~current_umask())
        if dest.exists():
            old = dest.with_name(f"{staged.name[:-len('.tmp')]}.old")
            dest.rename(old)
        try:
            staged.rename(dest)
        except BaseException:
            if old is not None:
                old.rename(dest)
                old = None
            raise
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
