"""A model's observation-normalisation statistics (``VecNormalize``): where they are, whether it needs them, reading them.

A policy trained on normalised observations acts on the raw ones as a different, worse policy,
without any error: a model whose statistics are missing is refused (:func:`resolve_stats`) unless
its records say it was trained without normalisation (:mod:`synergy_gym.agents.provenance`) or the
caller asks to run it without (``--no-normalize``). The statistics of a model are found
(:func:`stats_candidates`, first that exists)

* beside it, as ``synergy-gym train`` saves them: ``best_vecnormalize.pkl`` for ``best*.zip``,
  ``rl_model_vecnormalize_<n>_steps.pkl`` for a checkpoint ``rl_model_<n>_steps.zip`` (Stable-Baselines3's
  ``CheckpointCallback`` names them so too), ``vecnormalize.pkl`` for any other zip;
* in RL Baselines3 Zoo's layout: ``<run>/<env>/vecnormalize.pkl`` beside the model ``<run>/<env>.zip``
  (rl_zoo3 saves them in its ``params_path``, ``<log>/<algo>/<env>_<n>/<env>/``);

or given explicitly (``evaluate --vecnormalize FILE``; ``benchmark`` takes them only from those places).
:func:`read_stats` reads them; a file that cannot be read as statistics is one line naming it.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import TYPE_CHECKING

from synergy_gym.agents.checkpoints import checkpoint_stats
from synergy_gym.agents.config import first_line
from synergy_gym.agents.provenance import rl_zoo_folder, trained_on
from synergy_gym.cli.files import require_file
from synergy_gym.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from stable_baselines3.common.vec_env import VecNormalize

STATS_FILE = "vecnormalize.pkl"
BEST_STATS_FILE = "best_vecnormalize.pkl"


def stats_candidates(model_path: Path) -> list[Path]:
    """Where the statistics of ``model_path`` may be, in the order they are looked for (see the module)."""
    model_path = Path(model_path)
    if model_path.name.startswith("best"):
        beside = model_path.parent / BEST_STATS_FILE
    else:
        beside = checkpoint_stats(model_path) or model_path.parent / STATS_FILE
    candidates = [beside]
    zoo = rl_zoo_folder(model_path)
    named = model_path.parent / model_path.stem / STATS_FILE
    for folder_stats in (named, zoo / STATS_FILE if zoo is not None else None):
        if folder_stats is not None and folder_stats not in candidates:
            candidates.append(folder_stats)
    return candidates


def find_stats(model_path: Path) -> Path | None:
    """The statistics of ``model_path`` (the first of :func:`stats_candidates` that is a file); None if none is."""
    return next((p for p in stats_candidates(model_path) if p.is_file()), None)


#: What to do about missing statistics, as ``synergy-gym evaluate`` takes them (the end of :func:`resolve_stats`' error).
EVALUATE_ADVICE = "give --vecnormalize FILE, or --no-normalize to evaluate it on unnormalised observations on purpose"


def resolve_stats(model_path: Path, given: Path | None = None, normalize: bool = True, flag: str = "--model",
                  advice: str = EVALUATE_ADVICE, given_flag: str = "--vecnormalize") -> Path | None:
    """The statistics to evaluate ``model_path`` with: ``given``, else found beside it; None to run it unnormalised.

    None when ``normalize`` is false (``--no-normalize``) or when the model's records say it was trained
    without observation normalisation and none are found; otherwise missing statistics are an error
    naming where they were looked for and ending with ``advice``: what the command's options allow.
    """
    if not normalize:
        return None
    if given is not None:
        return require_file(given, given_flag, ConfigError)
    found = find_stats(model_path)
    if found is not None:
        return found
    record = trained_on(model_path)
    if record is not None and record.normalized is False:
        return None
    looked = ", ".join(str(p) for p in stats_candidates(model_path))
    said = (f" ({record.normalized_by or record.source} says it was trained on normalised observations)"
            if record and record.normalized else "")
    raise ConfigError(f"{flag} {model_path}: its normalisation statistics are missing{said}; looked for {looked}; "
                      f"{advice}")


def normalises_observations(stats: VecNormalize) -> bool:
    """Whether ``stats`` normalise observations: a run that normalises only its rewards saves no ``obs_rms``.

    Read from the object's own attributes: a pickled ``VecNormalize`` has no ``venv``, and its ``__getattr__``
    recursed for a missing attribute. When this is true, :func:`read_stats` made sure ``obs_rms`` is there.
    """
    return bool(vars(stats).get("norm_obs", True))


def read_stats(path: Path) -> VecNormalize:
    """The ``VecNormalize`` statistics pickled in ``path``, ready to normalise (not training); errors name the file."""
    from stable_baselines3.common.vec_env import VecNormalize

    try:
        with open(path, "rb") as fh:
            stats = pickle.load(fh)
    except OSError as exc:
        raise ConfigError(f"normalisation statistics {path} cannot be read: {exc.strerror or first_line(exc)}") from None
    except Exception as exc:  # truncated, corrupt, or pickled from code that is not here
        raise ConfigError(f"normalisation statistics {path} cannot be read ({type(exc).__name__}: {first_line(exc)}); "
                          "is the file damaged or truncated?") from None
    if not isinstance(stats, VecNormalize) or (normalises_observations(stats) and "obs_rms" not in vars(stats)):
        raise ConfigError(f"{path} does not hold VecNormalize statistics")
    stats.training = False
    return stats
