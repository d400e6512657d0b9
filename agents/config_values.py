"""The values of a :class:`~synergy_gym.agents.config.TrainConfig` as Python's own, and as ``config.json`` holds them.

NumPy's numbers and bools are accepted wherever Python's are (as
:class:`~synergy_gym.sim.config.SimulationConfig` accepts them) and stored as Python's
(:func:`plain`), so that a config built from NumPy values trains, saves and resumes
exactly like one built from the same Python values. :func:`config_json` is the text of
``config.json``, or a one-line :class:`~synergy_gym.errors.ConfigError` naming the first
setting it cannot hold – raised before the run folder is made.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import numpy as np

from synergy_gym.errors import ConfigError
from synergy_gym.sim.validation import is_integer


class Settings(Protocol):
    """What :func:`config_json` reads of a :class:`~synergy_gym.agents.config.TrainConfig` (not imported: it imports
    this module)."""

    env_kwargs: dict

    def to_dict(self) -> dict[str, Any]: ...


def plain(value: Any, arrays: bool = True) -> Any:
    """``value`` with NumPy's scalars as Python's (``.item()``) and – with ``arrays`` – its arrays as lists, also
    inside lists, tuples and dicts (a dict's keys too); anything else as it is."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist() if arrays else value
    if isinstance(value, dict):
        return {plain(k, arrays): plain(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, arrays) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v, arrays) for v in value)
    return value


def layer_sizes(value: Any) -> list[int] | None:
    """``net_arch`` as a list of ``int`` if it is a list or tuple of positive integers (NumPy's included); else None.

    A float (``64.0``) and a bool are no layer size, as in a config file.
    """
    if isinstance(value, (list, tuple)) and all(is_integer(x) and x > 0 for x in value):
        return [int(x) for x in value]
    return None


def config_json(cfg: Settings) -> str:
    """``cfg`` as the text of ``config.json``; a setting JSON cannot hold is a one-line :class:`ConfigError`.

    A NumPy number set after construction is written as Python's; an object (a :class:`Workload` in
    ``env_kwargs``, say) is refused, naming the setting: its arrays are not turned into lists that no reader of
    ``config.json`` would take back.
    """
    settings = plain(cfg.to_dict(), arrays=False)
    try:
        return json.dumps(settings, indent=2) + "\n"
    except (TypeError, ValueError):  # an object JSON has no form for, or one that holds itself
        pass
    for name, value in settings.items():
        nested = name == "env_kwargs" and isinstance(value, dict)
        for key, item in value.items() if nested else [(None, value)]:
            try:
                json.dumps(item)
            except (TypeError, ValueError):
                given = getattr(cfg, name) if key is None else cfg.env_kwargs[key]
                where = name if key is None else f"env_kwargs {key!r}"
                hint = " (a Workload: save it with write_workload_csv and give the file's path)" \
                    if key == "workload" else ""
                raise ConfigError(
                    f"TrainConfig {where} is a {type(given).__name__}, which the run's config.json cannot hold (it "
                    f"takes numbers, text, true/false, null, lists and tables); give it as one of those{hint}"
                ) from None
    raise ConfigError("TrainConfig cannot be saved as the run's config.json")  # pragma: no cover (found above)
