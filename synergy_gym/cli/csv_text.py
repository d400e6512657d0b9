"""A table written as CSV text, as pandas' ``DataFrame(columns).to_csv(index=False)`` writes it, without pandas.

The commands write their tables (``results.csv``, ``jobs.csv``, workloads) with this, so that
writing them does not import pandas. Each column becomes text the way pandas does it: a float
column through numpy (``1091.0``, ``1e-05``; NaN as an empty cell), integers and booleans as
Python writes them, None as an empty cell; a list of values is typed as pandas would type it
(integers or floats with None become floats, None becoming NaN). The rows go through Python's
``csv`` writer with pandas' settings (minimal quoting, ``os.linesep`` at each line's end).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: A table as its columns, in order: name → one value per row.
ColumnTable = Mapping[str, "np.ndarray | Sequence[Any]"]


def csv_text(columns: ColumnTable) -> str:
    """The columns (all of one length) as CSV text with a header row."""
    cells = [_cells(values) for values in columns.values()]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=os.linesep, quoting=csv.QUOTE_MINIMAL)
    writer.writerow(list(columns))
    writer.writerows(zip(*cells))
    return out.getvalue()


def _cells(values: np.ndarray | Sequence[Any]) -> list[str]:
    array = values if isinstance(values, np.ndarray) else _typed(list(values))
    if array.dtype.kind == "f":
        text = array.astype(str)
        text[np.isnan(array)] = ""
        return text.tolist()
    if array.dtype.kind in "iub":
        return [str(v) for v in array.tolist()]
    return ["" if _missing(v) else str(v) for v in array.tolist()]


def _typed(values: list[Any]) -> np.ndarray:
    """The values as the array pandas would make of them: numbers with None become floats, the rest objects."""
    present = [v for v in values if not _missing(v)]
    numbers = bool(present) and all(isinstance(v, (int, float, np.integer, np.floating)) for v in present)
    if numbers and not any(isinstance(v, (bool, np.bool_)) for v in present):
        if len(present) == len(values) and all(isinstance(v, (int, np.integer)) for v in values):
            return np.asarray(values, dtype=np.int64)
        if len(present) == len(values) and all(isinstance(v, np.float32) for v in values):
            return np.asarray(values, dtype=np.float32)  # pandas keeps them float32 (and writes 0.1, not 0.100000001)
        return np.asarray([math.nan if _missing(v) else v for v in values], dtype=float)
    if present and len(present) == len(values) and all(isinstance(v, (bool, np.bool_)) for v in values):
        return np.asarray(values, dtype=bool)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
