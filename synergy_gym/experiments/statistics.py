"""Statistics of experiment results: 95 % confidence intervals of means (Student's t)."""

from __future__ import annotations

from typing import Any

import numpy as np


def ci95_half_width(std: Any, n: Any) -> Any:
    """Half-width of the 95 % confidence interval of a mean (t-distribution); NaN where n < 2.

    ``std`` is the sample standard deviation (ddof=1) of ``n`` values; both may be arrays.
    """
    std = np.asarray(std, dtype=float)
    n = np.asarray(n, dtype=float)
    if not (n >= 2).any():  # no interval to compute: scipy (half a second to import) is not needed
        return np.full(np.broadcast_shapes(std.shape, n.shape), np.nan)
    from scipy import stats

    with np.errstate(invalid="ignore", divide="ignore"):
        half = stats.t.ppf(0.975, np.maximum(n - 1, 1)) * std / np.sqrt(n)
    return np.where(n >= 2, half, np.nan)


def mean_ci95(values: Any) -> tuple[float, float]:
    """Mean and half-width of the 95 % t-interval of ``values`` (half-width NaN for one value)."""
    values = np.asarray(values, dtype=float)
    std = values.std(ddof=1) if values.size > 1 else float("nan")
    return float(values.mean()), float(ci95_half_width(std, values.size))
