"""``synergy-gym train``'s configuration from its command line, in layers, with errors that name their file.

The layers, each over the one before: :class:`~synergy_gym.agents.config.TrainConfig`'s defaults, the
resumed run's ``config.json`` (``--resume``), the ``--config`` file, then the options; ``env_kwargs``
(a file's ``[env_kwargs]`` table, ``--env-kwargs``) merge key by key, a later layer's value winning. A file that
cannot be read is one line naming it (:func:`synergy_gym.agents.config.load_config_file`); a setting
that is invalid names the file it comes from when that file's layer alone is already invalid, and an environment
that cannot be made names the file that set it (unless ``--env`` or ``--env-kwargs`` took part).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import gymnasium as gym

from synergy_gym.agents.config import TrainConfig, load_config_file
from synergy_gym.agents.env_kwargs import parse_env_kwargs, unused_with_fixed_jobs
from synergy_gym.agents.resume import saved_config_path
from synergy_gym.agents.vec_envs import check_env_kwargs
from synergy_gym.errors import ConfigError, SynergyGymError

#: Options that set a TrainConfig field of the same name (``--env`` sets ``env_id``).
OPTION_FIELDS = ("algo", "env_id", "timesteps", "n_envs", "seed", "device", "eval_freq", "eval_episodes", "bc_policy",
                 "bc_steps", "torch_threads", "reward", "relative_to", "shared_workload", "ent_coef_final",
                 "stop_on_stall_after", "gamma", "action_head", "vec_env", "checkpoint_freq", "dagger_rounds",
                 "attention_heads")


def shipped_configs() -> dict[str, Path]:
    """The reference training configs the package ships (``agents/configs/NAME.toml``), by name."""
    from importlib import resources

    folder = Path(str(resources.files("synergy_gym.agents") / "configs"))
    return {p.stem: p for p in sorted(folder.glob("*.toml"))} if folder.is_dir() else {}


def config_argument(value: str | Path) -> Path:
    """``--config``: a file, or the name of a config the package ships (``small_scarce``: ``agents/configs/NAME.toml``,
    which an installed package holds too). A missing file whose name is a shipped config's is one line saying so; a
    missing bare name (no folder, no suffix: ``smal``) lists the shipped names."""
    path = Path(value)
    if path.exists():
        return path
    shipped = shipped_configs()
    if str(value) in shipped:
        return shipped[str(value)]
    if path.suffix == ".toml" and path.stem in shipped:
        raise ConfigError(f"config file {str(value)!r} does not exist; the package ships a config of that name: "
                          f"--config {path.stem}")
    if path.name == str(value) and not path.suffix and shipped:
        raise ConfigError(f"config file {str(value)!r} does not exist, and no config the package ships has that name: "
                          f"{', '.join(shipped)}")
    return path  # load_config_file says it does not exist


def config_from_args(args: argparse.Namespace, checkpoint: Path | None = None) -> TrainConfig:
    """The run's config: TrainConfig's defaults, under the resumed run's ``config.json``, ``--config``, then the options.

    ``checkpoint``: the checkpoint ``--resume`` continues from (default: ``args.resume`` itself).
    """
    layers: list[tuple[str, dict[str, Any]]] = []  # (the file, its settings)
    if checkpoint is None and args.resume is not None and Path(args.resume).is_file():
        checkpoint = Path(args.resume)
    saved = saved_config_path(checkpoint) if checkpoint is not None else None
    if saved is not None:
        layers.append((str(saved), load_config_file(saved)))
    if args.config is not None:
        layers.append((str(args.config), load_config_file(config_argument(args.config))))
    values: dict[str, Any] = {}
    for _, settings in layers:
        values = _over(values, settings)
    values.update({k: v for k in OPTION_FIELDS if (v := getattr(args, k, None)) is not None})
    env_layers = list(layers)
    if args.env_kwargs is not None:
        env_layers.append(("--env-kwargs", {"env_kwargs": parse_env_kwargs(args.env_kwargs)}))
        values = _over(values, env_layers[-1][1])
    _check_fixed_jobs(values.get("env_kwargs"), env_layers, saved)
    if args.no_progress:
        values["progress_bar"] = False
    try:
        cfg = TrainConfig.from_mapping(values, source=str(args.config) if args.config else "train")
    except SynergyGymError as exc:
        raise _blamed(exc, layers) from None
    try:
        check_env_kwargs(cfg)  # the environment the layers give: an unknown id or kwarg names its file
    except gym.error.Error as exc:
        raise _env_blamed(ConfigError(str(exc).splitlines()[0]), layers, args) from None
    except SynergyGymError as exc:
        raise _env_blamed(exc, layers, args) from None
    return cfg


def _check_fixed_jobs(env_kwargs: Any, layers: list[tuple[str, dict[str, Any]]], saved: Path | None) -> None:
    """Refuse a generator setting that ``workload=`` or ``trace=`` would leave unused, naming the layers that set the
    two; one that only the resumed run's own ``config.json`` sets is kept (a run saved before this check)."""
    if not isinstance(env_kwargs, dict):
        return  # TrainConfig names the bad table
    for source, key in unused_with_fixed_jobs(env_kwargs):
        setters = {name: [where for where, settings in layers
                          if isinstance(settings.get("env_kwargs"), dict) and name in settings["env_kwargs"]]
                   for name in (source, key)}
        if saved is not None and setters[key][-1] == str(saved):
            continue
        set_by = f", set by {setters[source][-1]}" if setters[source][-1] != setters[key][-1] else ""
        raise ConfigError(f"{setters[key][-1]}: env kwarg {key}={env_kwargs[key]!r} does not apply with "
                          f"{source}={env_kwargs[source]!r}{set_by} ({key} shapes generated workloads only)")


def _over(values: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` over ``values``: each setting replaces the one before, but ``env_kwargs`` tables merge key by key."""
    merged = {**values, **settings}
    if isinstance(values.get("env_kwargs"), dict) and isinstance(settings.get("env_kwargs"), dict):
        merged["env_kwargs"] = {**values["env_kwargs"], **settings["env_kwargs"]}
    return merged


def _env_blamed(exc: SynergyGymError, layers: list[tuple[str, dict[str, Any]]],
                args: argparse.Namespace) -> SynergyGymError:
    """``exc`` (the environment cannot be made) naming the last file that set ``env_id`` or ``env_kwargs``, unless
    ``--env`` or ``--env-kwargs`` took part."""
    if args.env_id is not None or args.env_kwargs is not None:
        return exc
    sources = [source for source, settings in layers if {"env_id", "env_kwargs"} & set(settings)]
    return ConfigError(f"{sources[-1]}: {exc}") if sources else exc


def _blamed(exc: SynergyGymError, layers: list[tuple[str, dict[str, Any]]]) -> SynergyGymError:
    """``exc`` naming the first file whose layer alone (over those before it) already gives it; else as it is."""
    values: dict[str, Any] = {}
    for source, settings in layers:
        values = _over(values, settings)
        try:
            TrainConfig.from_mapping(values, source=source)
        except SynergyGymError as alone:
            if str(alone) == str(exc) and not str(exc).startswith(source):
                return ConfigError(f"{source}: {exc}")
            return exc
    return exc
