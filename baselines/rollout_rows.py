"""The per-seed rows, the summary and the JSON of the rollouts.

Shared by :mod:`~synergy_gym.baselines.rollout_bound` and
:mod:`~synergy_gym.baselines.switching_rollout` (whose rows count events where these count decisions).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from synergy_gym.cli.files import atomic_write_text
from synergy_gym.cli.results_json import json_safe
from synergy_gym.experiments.statistics import ci95_half_width


@dataclass
class SeedRow:
    """One row of the JSON: base and rollout on one workload seed."""

    seed: int
    base_mean_jct_h: float
    rollout_mean_jct_h: float
    diff_pct: float  # (rollout − base) / base · 100
    decisions: int
    deviations: int
    rollouts: int
    mean_candidates: float
    truncated: bool
    wall_s: float
    sampled: int = 0  # decisions the rollout tried to improve
    #: Deviations by "base action's kind -> chosen action's kind" (``None``: not recorded).
    deviation_kinds: dict[str, int] | None = None


def summary(rows: list[SeedRow]) -> dict[str, float]:
    """Means over seeds and the paired difference (mean and 95 % CI half-width, t-distribution; NaN for one seed:
    printed ``-``, ``null`` in the JSON)."""
    base = np.array([r.base_mean_jct_h for r in rows])
    roll = np.array([r.rollout_mean_jct_h for r in rows])
    diff = roll - base
    ci = float(ci95_half_width(diff.std(ddof=1), len(rows))) if len(rows) > 1 else float("nan")
    return {
        "episodes": len(rows), "base_mean_jct_h": float(base.mean()), "rollout_mean_jct_h": float(roll.mean()),
        "paired_diff_h": float(diff.mean()), "paired_diff_ci95_h": ci,
        "paired_diff_pct": float(100.0 * diff.mean() / base.mean()),
        "mean_of_seed_pct": float(np.mean([r.diff_pct for r in rows])),
        "mean_wall_s": float(np.mean([r.wall_s for r in rows])),
    }


def summary_line(rows: list[SeedRow], per: str) -> str:
    """The closing line: means, the paired difference with its CI (``-`` for one seed) and the wall time ``per``."""
    s = summary(rows)
    ci = "-" if math.isnan(s["paired_diff_ci95_h"]) else f"{s['paired_diff_ci95_h']:.3f}"
    return (f"mean: base {s['base_mean_jct_h']:.3f} h, rollout {s['rollout_mean_jct_h']:.3f} h, paired "
            f"{s['paired_diff_h']:+.3f} h ± {ci} ({s['paired_diff_pct']:+.2f} %), {s['mean_wall_s']:.0f} s {per}")


def write_rows(path: Path, meta: dict[str, Any], rows: list[SeedRow], extra: list[dict[str, Any]] | None = None) -> None:
    """Write ``meta``, the summary and the rows (each merged with its ``extra`` entry) to ``path`` atomically."""
    records = [{**asdict(r), **(extra[i] if extra else {})} for i, r in enumerate(rows)]
    record = {**meta, "summary": summary(rows), "rows": records}
    atomic_write_text(path, json.dumps(json_safe(record), indent=1, allow_nan=False) + "\n")
