"""The results JSON of ``compare``, ``sweep`` and ``evaluate``: one shape, built and written here.

RESULTS_SCHEMA – every results file (``--json FILE``; ``evaluate``'s and ``sweep``'s
``results.json`` in their output folder) is one JSON object::

    {
      "results": [ {...}, ... ],      # the command's rows (below)
      "meta": {
        "version":    "0.x.y",        # the synergy-gym package version
        "command":    ["synergy-gym", "compare", "--load", "9"],   # the command line, arguments as given
        "seeds":      [42],           # the workload seeds run (ints; [] when a fixed workload has none)
        "env_id":     null,           # the environment id (evaluate), null for compare and sweep
        "env_kwargs": null,           # its keyword arguments (a dict), null for compare and sweep
        "started":    "2025-01-31T12:00:00Z",   # ISO 8601, UTC
        "finished":   "2025-01-31T12:03:10Z",
        ...                           # command-specific keys (policies, loads, cluster, agents)
      }
    }

NaN and infinities are written as null, so the file is valid JSON everywhere.

The rows: ``compare`` has one row per policy, load (or workload) and seed with
``compare.JSON_FIELDS`` (policy, sensitivity, load, seed, mean/median/p99 JCT and
makespan in hours, speedup_vs_fair, job counts, utilisation, wall_s, …); ``sweep`` has
one row per cell with the columns of its ``results.csv`` (policy, load, seed and the
run's summary); ``evaluate`` has one row per policy and source with
``eval_summary.SUMMARY_FIELDS`` (mean JCT with its 95 % CI, p99, makespan, per_seed, …,
agents also ``paired_vs_best_env``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from synergy_gym.cli.command import package_version
from synergy_gym.cli.files import atomic_write_text

#: The keys every ``meta`` has, in this order (commands may add their own after them).
META_KEYS = ("version", "command", "seeds", "env_id", "env_kwargs", "started", "finished")


def utc_now() -> str:
    """The time now as ISO 8601 in UTC, to the second: ``2025-01-31T12:00:00Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def command_line(args: argparse.Namespace) -> list[str]:
    """The command line that ran, as given (``synergy_gym.cli.main`` records it on ``args``)."""
    given = getattr(args, "command_line", None)
    return list(given) if given else ["synergy-gym", str(getattr(args, "command", ""))]


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON: NumPy and pandas scalars as Python's, NaN/inf/NA as None, keys as strings."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    pd: Any = sys.modules.get("pandas")  # a pandas value (pandas.NA, NaT) exists only once pandas is imported
    return None if pd is not None and pd.api.types.is_scalar(value) and pd.isna(value) else value


def build_meta(args: argparse.Namespace, seeds: Iterable[int], started: str, env_id: str | None = None,
               env_kwargs: Mapping[str, Any] | None = None, finished: str | None = None, **extra: Any) -> dict[str, Any]:
    """The ``meta`` object (:data:`META_KEYS`, then ``extra``); ``finished`` defaults to now."""
    clash = set(extra) & set(META_KEYS)
    if clash:
        raise ValueError(f"meta keys {sorted(clash)} are set by build_meta itself")
    meta: dict[str, Any] = {
        "version": package_version(),
        "command": command_line(args),
        "seeds": [int(s) for s in seeds],
        "env_id": env_id,
        "env_kwargs": None if env_kwargs is None else dict(env_kwargs),
        "started": started,
        "finished": finished or utc_now(),
    }
    meta.update(extra)
    return json_safe(meta)


def results_text(results: Sequence[Mapping[Any, Any]], meta: Mapping[str, Any]) -> str:
    """The file's text: ``{"results": [...], "meta": {...}}``, indented, NaN as null."""
    document = {"results": [json_safe(dict(row)) for row in results], "meta": json_safe(dict(meta))}
    return json.dumps(document, indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def write_results_json(paths: Iterable[Path | None], results: Sequence[Mapping[Any, Any]],
                       meta: Mapping[str, Any]) -> list[Path]:
    """Write the results file (atomically) to each of ``paths`` (None skipped); the paths written."""
    text = results_text(results, meta)
    return [atomic_write_text(Path(p), text) for p in paths if p is not None]
