"""Whether a saved model fits the environment it is to be evaluated on, and if not, why.

A trained network depends on the kinds, shapes and sizes of the observation and
action spaces (:func:`synergy_gym.experiments.policy_spaces.spaces_parts`), not on their bounds, so a model can be
evaluated on another load or cluster of the same shape. :func:`check_agent_fits`
refuses a model, or its normalisation statistics, whose spaces differ from the
environment's, naming the env settings behind the difference (read from the
run's ``config.json``, :func:`synergy_gym.agents.provenance.run_config`).
:func:`check_trained_env` refuses, unless allowed, a model trained on another
environment id or kwargs than the evaluation's (what it was trained on:
:mod:`synergy_gym.agents.provenance`). :func:`check_env_id` and
:func:`env_space_parts` check the environment itself first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.normalization import normalises_observations
from synergy_gym.agents.provenance import TrainedOn
from synergy_gym.env.config import same_env_kwarg
from synergy_gym.errors import ConfigError, SynergyGymError
from synergy_gym.experiments.policy_spaces import spaces_parts

if TYPE_CHECKING:  # pragma: no cover
    from synergy_gym.agents.wrappers import AgentPolicy


def model_space_parts(model: Any) -> dict[str, str]:
    """:func:`spaces_parts` of the environment ``model`` acts in: its own spaces, less the heuristic's action that a
    model trained with ``hint_policy`` observes (:class:`~synergy_gym.agents.wrappers.AgentPolicy` adds it)."""
    from synergy_gym.agents.heuristic_hint import env_observation_space

    return spaces_parts(env_observation_space(model), model.action_space)


def check_env_id(env_id: str) -> None:
    """An unknown environment id is a one-line error naming the registered scenarios."""
    import synergy_gym  # noqa: F401  (registers the environments)
    from synergy_gym.env.scenarios import SCENARIOS

    try:
        gym.spec(env_id)
    except gym.error.Error:
        raise ConfigError(f"--env {env_id!r}: unknown environment; valid: {', '.join(SCENARIOS)}") from None


def env_space_parts(env_id: str, kwargs: dict[str, Any]) -> dict[str, str]:
    """The observation and action space parts of ``env_id`` with ``kwargs`` (an unknown id or kwarg fails here)."""
    check_env_id(env_id)
    try:
        env = gym.make(env_id, **kwargs)
    except gym.error.Error as exc:
        raise ConfigError(f"--env {env_id!r}: {str(exc).splitlines()[0]}") from None
    try:
        return spaces_parts(env.observation_space, env.action_space)
    finally:
        env.close()


def effective_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every env kwarg's value: ``kwargs`` over the registered ones over the defaults."""
    from dataclasses import MISSING, fields

    from synergy_gym.env import EnvConfig

    values = {f.name: f.default for f in fields(EnvConfig) if f.default is not MISSING}
    try:
        values.update(gym.spec(env_id).kwargs)
    except gym.error.Error:
        pass
    return {**values, **kwargs}


def _mismatch_cause(cfg: TrainConfig | None, model_parts: dict[str, str], env_id: str, kwargs: dict[str, Any]) -> str:
    """``trained with max_queue=32 but the environment has max_queue=8`` – the settings behind a space mismatch.

    Each difference between the run's environment (``config.json``) and the
    requested one is tried alone on the run's; those that alone change the
    spaces are named (all differences when none does by itself).
    """
    if cfg is None:
        return "its run folder has no config.json to tell the environment it was trained on"
    trained, wanted = effective_env_kwargs(cfg.env_id, cfg.env_kwargs), effective_env_kwargs(env_id, kwargs)
    changes: list[tuple[str, Any, Any]] = [("env", cfg.env_id, env_id)] if cfg.env_id != env_id else []
    changes += [(k, trained.get(k), wanted.get(k)) for k in dict.fromkeys([*trained, *wanted])
                if not same_env_kwarg(k, trained.get(k), wanted.get(k))]
    if not changes:
        return (f"it was trained on {cfg.env_id} with the same env kwargs, by an older synergy-gym"
                f"{_older_hint(cfg, model_parts)}")
    causes = []
    for key, old, new in changes:
        try:
            if key == "env":
                parts = env_space_parts(new, dict(cfg.env_kwargs))
            else:
                parts = env_space_parts(cfg.env_id, {**cfg.env_kwargs, key: new})
        except SynergyGymError:
            continue
        if parts != model_parts:
            causes.append((key, old, new))
    causes = causes or changes
    return (f"this model was trained with {', '.join(f'{k}={old}' for k, old, _ in causes)} "
            f"but the environment has {', '.join(f'{k}={new}' for k, _, new in causes)}")


def _older_hint(cfg: TrainConfig, model_parts: dict[str, str]) -> str:
    """What reproduces the spaces of a model an older synergy-gym trained with the same kwargs (see CHANGELOG.md)."""
    legacy = {**cfg.env_kwargs, "redecide": "every_event"}  # preemptive=True re-decided every event before 2026-12-04
    if cfg.env_kwargs.get("preemptive") is True and "redecide" not in cfg.env_kwargs:
        try:
            if env_space_parts(cfg.env_id, legacy) == model_parts:
                given = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in legacy.items())
                return (" whose preemptive mode re-decided every running job at every event (env kwarg "
                        "redecide=every_event, which its config.json does not name): synergy-gym evaluate runs it with "
                        f"--env-kwargs {given} --allow-env-mismatch, train --resume continues it with --env-kwargs "
                        "redecide=every_event into a new --out; or retrain it")
        except SynergyGymError:
            pass
    return " whose environment had other spaces (CHANGELOG.md says what changed): retrain it"


def check_model_spaces(path: Path, model: Any, cfg: TrainConfig | None, env_id: str, kwargs: dict[str, Any],
                       env_parts: dict[str, str], flag: str = "--model") -> None:
    """Refuse a model whose spaces differ from the environment's, naming the env kwargs behind the difference."""
    model_parts = model_space_parts(model)
    differ = [k for k in dict.fromkeys([*model_parts, *env_parts]) if model_parts.get(k) != env_parts.get(k)]
    if differ:
        k = differ[0]
        what = "action space" if k == "action" else f"observation {k!r}"
        raise ConfigError(f"{flag} {path}: {_mismatch_cause(cfg, model_parts, env_id, kwargs)} "
                          f"({what}: {model_parts.get(k, 'absent')} in the model vs {env_parts.get(k, 'absent')})")


def check_stats_spaces(path: Path, vec_normalize: Any, model: Any, cfg: TrainConfig | None, env_id: str,
                       kwargs: dict[str, Any], env_parts: dict[str, str], flag: str = "--model") -> None:
    """Refuse normalisation statistics whose observation shapes differ from the environment's (another env's), or
    that normalise observations where the model's run (``cfg``) did not, or the other way round."""
    if vec_normalize is None:
        return
    normalises = normalises_observations(vec_normalize)
    if cfg is not None and normalises != cfg.normalize_obs:
        raise ConfigError(f"{flag} {path}: its normalisation statistics {'' if normalises else 'do not '}normalise "
                          f"observations, but its run was trained with normalize_obs {str(cfg.normalize_obs).lower()}: "
                          "they are another run's; give the model's own")
    rms = vec_normalize.obs_rms if normalises else None
    if rms is None:
        return
    model_parts = model_space_parts(model)
    for key, stats in (rms.items() if isinstance(rms, dict) else [("observation", rms)]):
        want = env_parts.get(key, "absent")
        mean = getattr(stats, "mean", None)
        have = f"Box{tuple(np.shape(mean)) if mean is not None else '()'}"
        if want != have:
            raise ConfigError(f"{flag} {path}: its normalisation statistics do not fit the environment "
                              f"({_mismatch_cause(cfg, model_parts, env_id, kwargs)}; observation {key!r}: "
                              f"{have} in the statistics vs {want})")


def check_agent_fits(path: Path, agent: AgentPolicy, cfg: TrainConfig | None, env_id: str, kwargs: dict[str, Any],
                     env_parts: dict[str, str], flag: str = "--model") -> None:
    """Refuse a model (:func:`check_model_spaces`) or its normalisation statistics whose spaces differ from the env's."""
    check_model_spaces(path, agent.model, cfg, env_id, kwargs, env_parts, flag=flag)
    check_stats_spaces(path, agent.vec_normalize, agent.model, cfg, env_id, kwargs, env_parts, flag=flag)

def env_differences(record: TrainedOn, env_id: str, kwargs: dict[str, Any]) -> tuple[str, str] | None:
    """How the environment ``record`` was trained on differs from ``env_id`` with ``kwargs`` (both described); None if alike.

    Kwargs are compared by their effective values (given over registered over defaults), so
    ``num_jobs=300`` where 300 is the default is no difference. With different ids only the
    kwargs given on either side are named (the ids' registered settings differ anyway).
    """
    if record.env_id is None:
        return None
    trained = effective_env_kwargs(record.env_id, record.env_kwargs)
    wanted = effective_env_kwargs(env_id, kwargs)
    if record.env_id == env_id:
        keys = [k for k in dict.fromkeys([*trained, *wanted]) if not same_env_kwarg(k, trained.get(k), wanted.get(k))]
        if not keys:
            return None
    else:
        keys = [k for k in dict.fromkeys([*record.env_kwargs, *kwargs])
                if not same_env_kwarg(k, trained.get(k), wanted.get(k))]

    def describe(name: str, values: dict[str, Any]) -> str:
        shown = ", ".join(f"{k}={values.get(k)}" for k in keys)
        return f"{name} ({shown})" if shown else name

    return describe(record.env_id, trained), describe(env_id, wanted)


def check_trained_env(path: Path | str, record: TrainedOn | None, env_id: str, kwargs: dict[str, Any],
                      allow: bool = False) -> str | None:
    """Refuse a model trained on another environment id or kwargs than ``env_id`` with ``kwargs``, naming both.

    With ``allow`` (``--allow-env-mismatch``) the difference is returned instead (a line to show);
    None when the model's records say nothing of its environment, or it is the same.
    """
    if record is None:
        return None
    differ = env_differences(record, env_id, kwargs)
    if differ is None:
        return None
    trained, wanted = differ
    if allow:
        return f"--model {path} was trained on {trained}; evaluating it on {wanted} (--allow-env-mismatch)"
    raise ConfigError(f"--model {path} was trained on {trained} ({record.source}) but the evaluation runs {wanted}; "
                      "give --allow-env-mismatch to evaluate it there anyway")
