"""Statistics of experiment results: 95 % confidence intervals of means (Student's t).

Bad input (text, a bool – alone or among numbers –, ``None``, a 2-D table for :func:`mean_ci95`, a negative
standard deviation, a count that is not a whole number ≥ 0) is a one-line :class:`~synergy_gym.errors.ConfigError`.
NaN passes through: a NaN value or standard deviation gives NaN, and so does a count below 2.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from synergy_gym.errors import ConfigError
from synergy_gym.sim.validation import is_number, shown

_BOOLS = (bool, np.bool_)
_NESTED = (list, tuple, np.ndarray)


def _holds_bool(items: list[Any] | tuple[Any, ...], depth: int = 1) -> bool:
    """Whether a list or tuple holds a bool (Python's or NumPy's), in nested lists, tuples and arrays too.

    NumPy reads ``[True, 2.0]`` as the floats ``[1.0, 2.0]``, so the array's dtype cannot tell; the
    elements' types are read at C speed (``map(type, …)``) and only nested sequences are walked (no deeper
    than an array's 64 dimensions: NumPy refuses a deeper list anyway).
    """
    kinds = set(map(type, items))
    if any(issubclass(kind, _BOOLS) for kind in kinds):
        return True
    if depth >= 64 or not any(issubclass(kind, _NESTED) for kind in kinds):
        return False
    return any(v.dtype.kind == "b" if isinstance(v, np.ndarray) else _holds_bool(v, depth + 1)
               for v in items if isinstance(v, _NESTED))


def _reals(where: str, value: Any) -> np.ndarray:
    """``value`` as a float array if it holds only real numbers (bools and text refused); else a one-line error."""
    holds_bool = isinstance(value, (list, tuple)) and _holds_bool(value)  # np.asarray turns [True, 2.0] into floats
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged nested lists
        arr = np.asarray(None)
    if arr.dtype.kind == "O" and all(is_number(v) for v in arr.ravel().tolist()):
        arr = arr.astype(float)  # Python ints past int64, or a mix of NumPy scalars
    if holds_bool or arr.dtype.kind not in "iuf":
        raise ConfigError(f"{where} must be real numbers, got {shown(value)}")
    return arr.astype(float, copy=False)


def ci95_half_width(std: Any, n: Any) -> Any:
    """Half-width of the 95 % confidence interval of a mean (t-distribution); NaN where n < 2.

    ``std`` is the sample standard deviation (ddof=1) of ``n`` values; both may be arrays (of shapes
    that broadcast). ``std`` must be ≥ 0 (or NaN: unknown) and ``n`` a whole number ≥ 0 (a count, as
    pandas' ``count`` gives, 0 for a group of NaNs).
    """
    std = _reals("ci95_half_width() std", std)
    counts = np.asarray(n)
    n = _reals("ci95_half_width() n", n)
    if np.any(std < 0):
        raise ConfigError(f"ci95_half_width() std must be ≥ 0 (a standard deviation), got {shown(std[std < 0][0].item())}")
    whole = np.isfinite(n) & (n >= 0) & (n == np.floor(n))
    if not whole.all():
        bad = np.broadcast_to(counts, whole.shape)[~whole][0]
        bad = bad.item() if isinstance(bad, np.generic) else bad
        raise ConfigError(f"ci95_half_width() n must be a whole number ≥ 0 (a count of values), got {shown(bad)}")
    try:
        shape = np.broadcast_shapes(std.shape, n.shape)
    except ValueError:
        raise ConfigError(f"ci95_half_width(): std of shape {std.shape} and n of shape {n.shape} do not match") from None
    if not (n >= 2).any():  # no interval to compute: scipy (half a second to import) is not needed
        return np.full(shape, np.nan)
    from scipy import stats

    with np.errstate(invalid="ignore", divide="ignore"):
        half = stats.t.ppf(0.975, np.maximum(n - 1, 1)) * std / np.sqrt(n)
    return np.where(n >= 2, half, np.nan)


def mean_ci95(values: Any) -> tuple[float, float]:
    """Mean and half-width of the 95 % t-interval of ``values`` (half-width NaN for one value).

    ``values``: a 1-D sequence (list, tuple, array, Series) of at least one real number.
    """
    arr = _reals("mean_ci95() values", values)
    if arr.ndim != 1:
        what = "a single number" if arr.ndim == 0 else f"an array of shape {arr.shape}"
        raise ConfigError(f"mean_ci95() values must be a 1-D sequence of numbers, got {what}")
    if arr.size == 0:
        raise ConfigError("mean_ci95() values must hold at least one number, got none")
    with np.errstate(invalid="ignore"):  # an infinite value: its mean is ±inf, its interval NaN
        std = arr.std(ddof=1) if arr.size > 1 else float("nan")
    return float(arr.mean()), float(ci95_half_width(std, arr.size))
