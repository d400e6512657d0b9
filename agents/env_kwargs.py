"""``--env-kwargs key=value …``: the command line's environment kwargs, parsed and checked before anything runs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from synergy_gym.errors import ConfigError

#: The workload generator's env kwargs that fixed jobs leave unused: ``workload=`` keeps all of its
#: jobs, ``trace=`` the trace's first ``num_jobs`` with their models drawn by ``class_split``.
UNUSED_WITH_FIXED_JOBS: dict[str, tuple[str, ...]] = {
    "workload": ("jobs_per_hour", "num_jobs", "multigpu", "class_split"),
    "trace": ("jobs_per_hour", "multigpu"),
}


def parse_env_kwargs(items: Sequence[str]) -> dict[str, Any]:
    """``--env-kwargs key=value …``: values are parsed as JSON where possible (numbers, true/false), else strings.

    A key given twice (``num_jobs=20 num_jobs=30``, or in two ``--env-kwargs`` groups) is refused, naming both,
    and so is a generator setting that ``workload=`` or ``trace=`` would leave unused
    (:data:`UNUSED_WITH_FIXED_JOBS`).
    """
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--env-kwargs {item!r}: expected key=value")
        if key in given:
            raise ConfigError(f"--env-kwargs {key} given twice ({given[key]!r}, {item!r}); give each key once")
        given[key] = item
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    for source, key in unused_with_fixed_jobs(out):
        raise ConfigError(f"--env-kwargs {given[key]} does not apply with {given[source]} "
                          f"({key} shapes generated workloads only)")
    return out


def unused_with_fixed_jobs(env_kwargs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``(source, key)`` pairs of ``env_kwargs`` where fixed jobs (``source``: ``workload`` or ``trace``) leave the
    generator setting ``key`` unused (:data:`UNUSED_WITH_FIXED_JOBS`)."""
    return [(source, key) for source, unused in UNUSED_WITH_FIXED_JOBS.items() if env_kwargs.get(source) is not None
            for key in unused if key in env_kwargs]
