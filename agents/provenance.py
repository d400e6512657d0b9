"""What a saved model was trained on: its run's environment id and kwargs, and whether observations were normalised.

Three kinds of record say so, looked up from the model's path (:func:`trained_on`):

* a ``synergy-gym train`` run's ``config.json`` in the model's run folder (:func:`run_folder`: the
  folder of the zip, or the run above ``checkpoints/`` for a periodic checkpoint); a shipped
  pretrained policy has one too, and its ``card.json`` stands in where ``config.json`` is missing;
* RL Baselines3 Zoo's run folder: the model ``<run>/<env>.zip`` (or ``best_model.zip``,
  ``rl_model_<n>_steps.zip``) beside a sub-folder ``<run>/<env>/`` with ``args.yml`` (``env``,
  ``env_kwargs``) and ``config.yml`` (``normalize``) – :func:`rl_zoo_folder`.

A model with none of these (a bare zip) has no record: nothing is known of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synergy_gym.agents.checkpoints import CHECKPOINT_DIR
from synergy_gym.agents.config import TrainConfig, first_line, load_run_config, read_text_file
from synergy_gym.errors import ConfigError

#: RL Zoo's records in its sub-folder ``<run>/<env>/``.
ZOO_ARGS, ZOO_CONFIG = "args.yml", "config.yml"


@dataclass(frozen=True)
class TrainedOn:
    """The environment a model was trained on, whether its observations were normalised, and the file that says so."""

    env_id: str | None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    #: True/False as the record says; None where it does not say.
    normalized: bool | None = None
    source: Path | None = None
    #: The file that says whether observations were normalised, where not ``source`` (RL Zoo's ``config.yml``).
    normalized_by: Path | None = None


def run_folder(model_path: Path) -> Path:
    """The run folder of a model: its folder, or the run above ``checkpoints/`` for a periodic checkpoint."""
    folder = Path(model_path).parent
    if folder.name == CHECKPOINT_DIR and (folder.parent / "config.json").is_file():
        return folder.parent
    return folder


def run_config(model_path: Path) -> TrainConfig | None:
    """The config of the ``synergy-gym train`` run the model comes from (``config.json``; None if absent)."""
    saved = run_folder(model_path) / "config.json"
    if not saved.is_file():
        return None
    return load_run_config(saved)


def rl_zoo_folder(model_path: Path) -> Path | None:
    """RL Zoo's sub-folder of the model's run (``<run>/<env>/`` with ``args.yml`` or ``config.yml``); None if none."""
    model_path = Path(model_path)
    named = model_path.parent / model_path.stem  # the final model is saved as <run>/<env>.zip
    if (named / ZOO_ARGS).is_file() or (named / ZOO_CONFIG).is_file():
        return named
    try:
        found = [p for p in model_path.parent.iterdir() if p.is_dir() and (p / ZOO_ARGS).is_file()]
    except OSError:
        return None
    return found[0] if len(found) == 1 else None


def read_zoo_yaml(path: Path) -> dict[str, Any]:
    """An RL Zoo record (``args.yml``, ``config.yml``: YAML dumps of ordered dicts) as a dict; errors name the file."""
    import yaml

    class ZooLoader(yaml.SafeLoader):
        """Safe YAML plus RL Zoo's ``!!python/object/apply:collections.OrderedDict`` (a list of pairs)."""

    def ordered(loader: yaml.SafeLoader, node: yaml.Node) -> dict[Any, Any]:
        assert isinstance(node, yaml.SequenceNode)
        pairs = loader.construct_sequence(node, deep=True)
        items = pairs[0] if len(pairs) == 1 and isinstance(pairs[0], list) else pairs
        return {key: value for key, value in items}

    ZooLoader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", ordered)
    try:
        data = yaml.load(read_text_file(path, "RL Zoo record"), Loader=ZooLoader)  # noqa: S506 (a safe loader)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"RL Zoo record {path} is malformed: {first_line(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"RL Zoo record {path} must hold a table of settings")
    return data


def _zoo_normalized(value: Any) -> bool:
    """RL Zoo's ``normalize`` hyper-parameter: true/false, or a ``dict(norm_obs=…, …)`` string or mapping."""
    if isinstance(value, dict):
        return bool(value.get("norm_obs", True))
    if isinstance(value, str):  # "dict(norm_obs=False, …)" or "{'norm_obs': False, …}"
        text = value.replace(" ", "").replace('"', "'").lower()
        return "norm_obs=false" not in text and "'norm_obs':false" not in text
    return bool(value)


def trained_on(model_path: Path) -> TrainedOn | None:
    """What the records beside ``model_path`` say it was trained on (see the module); None without any."""
    cfg = run_config(model_path)
    if cfg is not None:
        return TrainedOn(cfg.env_id, dict(cfg.env_kwargs), cfg.normalize_obs, run_folder(model_path) / "config.json")
    card = Path(model_path).parent / "card.json"
    if card.is_file():
        try:
            data = json.loads(read_text_file(card, "card"))
        except ValueError as exc:
            raise ConfigError(f"card {card} is malformed: {first_line(exc)}") from None
        if isinstance(data, dict) and isinstance(data.get("env_id"), str):
            return TrainedOn(data["env_id"], dict(data.get("env_kwargs") or {}), None, card)
    zoo = rl_zoo_folder(model_path)
    if zoo is None:
        return None
    args = read_zoo_yaml(zoo / ZOO_ARGS) if (zoo / ZOO_ARGS).is_file() else {}
    hyper = read_zoo_yaml(zoo / ZOO_CONFIG) if (zoo / ZOO_CONFIG).is_file() else {}
    env_id = args.get("env") if isinstance(args.get("env"), str) else None
    given = args.get("env_kwargs")
    kwargs: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    normalized = _zoo_normalized(hyper.get("normalize", False)) if (zoo / ZOO_CONFIG).is_file() else None
    return TrainedOn(env_id, kwargs, normalized, zoo / (ZOO_ARGS if args else ZOO_CONFIG), zoo / ZOO_CONFIG)
