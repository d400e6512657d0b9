"""Reading job tables from CSV with one-line errors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from synergy_gym.cli.files import require_file
from synergy_gym.errors import WorkloadError


def read_job_table(path: str | Path, required: Sequence[str], kind: str) -> pd.DataFrame:
    """The CSV at ``path`` as a DataFrame with at least one row and the ``required`` columns.

    ``kind`` names the file in errors ("workload file", "trace file").
    """
    path = require_file(path, kind, WorkloadError)
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{path}: not a readable CSV: {str(exc).splitlines()[0]}") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise WorkloadError(f"{path}: missing column(s) {', '.join(missing)}")
    if frame.empty:
        raise WorkloadError(f"{path}: no jobs")
    return frame
