"""The cells of ``synergy-gym benchmark``: every registered scenario in each mode.

A cell is a registered environment id (:data:`synergy_gym.env.scenarios.SCENARIOS`) in one of the
:data:`MODES`: ``default`` (the scenario as registered: an admitted job keeps its GPUs until it
finishes) or ``preemptive`` (``preemptive=True``: running jobs may be re-planned at events). The
``--env-kwargs`` apply to every cell on top of the mode's (``num_jobs=20`` for a quick check);
``preemptive`` is the mode's to set. ``--env`` and ``--mode`` pick the cells (names separated by
commas, or repeated; ``all``; default every id in every mode), in the order given.

This module is light (no Gymnasium, pandas or PyTorch): the command's parser reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from synergy_gym.cli.args import list_items
from synergy_gym.env.scenarios import SCENARIOS
from synergy_gym.errors import ConfigError

#: The modes and the env kwargs each sets.
MODES: dict[str, dict[str, Any]] = {"default": {}, "preemptive": {"preemptive": True}}
#: The held-out workload seeds of the protocol (``--seeds``' default): 20 seeds from 1,000,000.
DEFAULT_SEEDS = "1000000..1000019"
#: Env kwargs only the preemptive mode takes: ``--env-kwargs`` gives them to the preemptive cells alone.
PREEMPTIVE_ONLY = ("redecide", "max_running")


@dataclass(frozen=True)
class Cell:
    """One environment id in one mode, with the env kwargs it runs with (the mode's and ``--env-kwargs``)."""

    env_id: str
    mode: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``Synergy-small-scarce-v0 default``."""
        return f"{self.env_id} {self.mode}"

    @property
    def short(self) -> str:
        """``small-scarce default`` (``v0 default`` for ``Synergy-v0``): for narrow columns."""
        return f"{self.env_id.removeprefix('Synergy-').removesuffix('-v0')} {self.mode}"


def parse_names(values: Sequence[str] | None, valid: Sequence[str], flag: str, what: str) -> tuple[str, ...]:
    """``--env`` / ``--mode``: names separated by commas (repeatable), ``all``, or None for all; de-duplicated in order.

    An unknown name is a one-line error naming the valid ones.
    """
    if values is None:
        return tuple(valid)
    names: list[str] = []
    for value in values:
        for name in list_items(value, flag):
            if name.lower() == "all":
                names += list(valid)
                continue
            if name not in valid:
                raise ConfigError(f"{flag} {name!r}: unknown {what}; valid: {', '.join(valid)}, all")
            names.append(name)
    return tuple(dict.fromkeys(names))


def check_env_kwargs(env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``--env-kwargs`` may not set what a mode sets (``preemptive``): choose modes with ``--mode`` instead."""
    for mode_kwargs in MODES.values():
        for key in mode_kwargs:
            if key in env_kwargs:
                raise ConfigError(f"--env-kwargs {key}={env_kwargs[key]!r}: the mode sets {key}; choose modes with "
                                  f"--mode ({', '.join(MODES)})")
    return env_kwargs


def benchmark_cells(envs: Sequence[str] | None, modes: Sequence[str] | None,
                    env_kwargs: dict[str, Any] | None = None) -> list[Cell]:
    """The cells of ``--env`` × ``--mode`` (each id in every mode chosen), with ``env_kwargs`` on top of the mode's.

    The kwargs of :data:`PREEMPTIVE_ONLY` go to the preemptive cells alone (refused when no mode chosen has preemption).
    """
    ids = parse_names(envs, tuple(SCENARIOS), "--env", "environment")
    chosen = parse_names(modes, tuple(MODES), "--mode", "mode")
    extra = check_env_kwargs(dict(env_kwargs or {}))
    only = {key: extra.pop(key) for key in PREEMPTIVE_ONLY if key in extra}
    if only and not any(MODES[mode].get("preemptive") for mode in chosen):
        given = " ".join(f"{key}={value!r}" for key, value in only.items())
        raise ConfigError(f"--env-kwargs {given}: only the preemptive mode takes it, and --mode chose "
                          f"{', '.join(chosen)}; give --mode preemptive (or all)")
    return [Cell(env_id, mode, {**MODES[mode], **extra, **(only if MODES[mode].get("preemptive") else {})})
            for env_id in ids for mode in chosen]
