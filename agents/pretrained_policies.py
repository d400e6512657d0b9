"""Pretrained policies shipped with the package: ``synergy_gym.agents.load_pretrained(name)``, ``--model pretrained:NAME``.

Each policy is a folder ``agents/pretrained/<name>/`` (package data) holding

``model.zip``         the Stable-Baselines3 model (without the optimiser's state, which only training needs)
``vecnormalize.pkl``  its observation-normalisation statistics (``VecNormalize``)
``config.json``       the training run's configuration (environment id and kwargs included)
``card.json``         where it comes from: the training command, run folder, training
                      seed and steps, the checkpoint's validation JCT

:func:`export_pretrained` writes such a folder from a training run's checkpoint
(``python -m synergy_gym.agents.export_pretrained``).
Loading needs only the ``rl`` extra and runs on the CPU; nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synergy_gym.agents.config import TrainConfig, first_line, load_run_config, read_text_file
from synergy_gym.agents.models import load_agent, load_model
from synergy_gym.agents.normalization import find_stats, stats_candidates
from synergy_gym.agents.provenance import run_folder
from synergy_gym.cli.files import atomic_write_text
from synergy_gym.errors import ConfigError, UnknownNameError

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
    return tuple(sorted(p.name for p in root.iterdir() if (p / MODEL_FILE).is_file()))


def pretrained_model_path(name: str) -> Path:
    """``agents/pretrained/<name>/model.zip``; an unknown name lists the known ones."""
    names = pretrained_names()
    if name not in names:
        raise UnknownNameError("pretrained policy", name, names)
    return pretrained_root() / name / MODEL_FILE


def resolve_model_argument(text: str | Path) -> Path:
    """``--model``: ``pretrained:NAME`` → the shipped model's path; anything else is a path as given."""
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
    trained on is ``pretrained_config(name).env_id`` with its ``env_kwargs``.
    """
    path = pretrained_model_path(name)
    return load_agent(path, pretrained_config(name), device, name)


def pretrained_config(name: str) -> TrainConfig:
    """The :class:`synergy_gym.agents.config.TrainConfig` the policy was trained with."""
    return load_run_config(pretrained_model_path(name).parent / "config.json")


def export_pretrained(model_zip: Path, dest: Path, card: dict[str, Any]) -> Path:
    """Write a pretrained-policy folder ``dest`` from a run's checkpoint; returns ``dest``.

    ``model_zip`` is a run's ``best_model.zip`` (with ``best_vecnormalize.pkl``) or
    ``last_model.zip`` (with ``vecnormalize.pkl``), beside the run's ``config.json``.
    The model is saved again with a fresh optimiser (its moment estimates are only
    needed to continue training and would triple the file); the policy's weights
    are unchanged. ``card`` is written as ``card.json``.
    """
    model_zip = Path(model_zip)
    run = run_folder(model_zip)
    stats = find_stats(model_zip)
    if stats is None:
        raise ConfigError(f"export: {stats_candidates(model_zip)[0]} does not exist")
    for needed in (model_zip, run / "config.json"):
        if not needed.is_file():
            raise ConfigError(f"export: {needed} does not exist")
    cfg = load_run_config(run / "config.json")
    model = load_model(model_zip, cfg.algo, "cpu")
    policy = model.policy
    optimizer_class: Callable[..., Optimizer] = policy.optimizer_class  # a torch optimiser, which takes lr
    policy.optimizer = optimizer_class(policy.parameters(), lr=cfg.learning_rate, **policy.optimizer_kwargs)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    model.save(dest / MODEL_FILE)
    shutil.copyfile(stats, dest / STATS_FILE)
    shutil.copyfile(run / "config.json", dest / "config.json")
    atomic_write_text(dest / "card.json", json.dumps(card, indent=2) + "\n")
    size = sum((dest / f).stat().st_size for f in FILES)
    if size > MAX_BYTES:
        raise ConfigError(f"export: {dest} takes {size:,} bytes, more than the {MAX_BYTES:,} a shipped policy may")
    return dest
