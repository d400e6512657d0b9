"""Workloads from a Philly-style job trace CSV.

The trace has one row per job with at least ``timestamp`` (submit time, as
``YYYY-MM-DD HH:MM:SS`` or seconds), ``duration`` (seconds) and ``num_gpus``,
as in the Philly-derived trace of the Sia artifact (Microsoft Philly,
Aug–Dec 2017, CC BY 4.0). Other columns (``gpu_time``, ``cluster``) are ignored.

The loader keeps the trace's real submit times, durations and GPU counts:

* jobs are sorted by submit time (ties keep file order); ``arrival_s`` is the
  time since the first submit; ``max_jobs`` keeps the first N;
* models are assigned in submit order by the class split
  (:mod:`traces.model_mix`); the job's measured duration is its run time at the
  fair share, so ``total_iters = ceil(duration / iter_time)``;
* the measured window is the middle half of the kept jobs unless ``window`` is
  given, and a run ends when all of them have finished.

A row with a missing field, a bad timestamp, a duration ≤ 0 or fewer than one
GPU is rejected with an error naming its line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from synergy_gym.errors import WorkloadError
from traces.csv_table import read_job_table
from synergy_gym.profiles import ModelZoo
from synergy_gym.workload import Workload
from traces.model_mix import DEFAULT_SPLIT, ModelAssigner
from traces.synthetic import middle_half

REQUIRED = ("timestamp", "duration", "num_gpus")


def read_philly_csv(
    path: str | Path,
    zoo: ModelZoo | None = None,
    class_split: tuple[float, float, float] = DEFAULT_SPLIT,
    max_jobs: int | None = None,
    window: tuple[int, int] | None = None,
) -> Workload:
    zoo = zoo or ModelZoo.default()
    path = Path(path)
    frame = read_job_table(path, REQUIRED, "trace file")

    def reject(mask: np.ndarray, what: str) -> None:
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            raise WorkloadError(f"{path}: line {i + 2}: {what} (row: {frame.iloc[i].to_dict()})")

    if pd.api.types.is_numeric_dtype(frame["timestamp"]):
        submit = frame["timestamp"].to_numpy(dtype=float)
    else:
        parsed = pd.to_datetime(frame["timestamp"], errors="coerce", format="mixed")
        reject(parsed.isna().to_numpy(), "bad or missing timestamp")
        submit = (parsed - parsed.min()).dt.total_seconds().to_numpy()
    reject(~np.isfinite(submit), "bad or missing timestamp")
    duration = pd.to_numeric(frame["duration"], errors="coerce").to_numpy(dtype=float)
    reject(~np.isfinite(duration), "missing or non-numeric duration")
    reject(duration <= 0, "duration must be > 0")
    gpus = pd.to_numeric(frame["num_gpus"], errors="coerce").to_numpy(dtype=float)
    reject(~np.isfinite(gpus), "missing or non-numeric num_gpus")
    reject((gpus < 1) | (gpus != np.floor(gpus)), "num_gpus must be a positive integer")

    order = np.argsort(submit, kind="stable")
    if max_jobs is not None:
        if max_jobs < 1:
            raise WorkloadError(f"max_jobs must be a positive integer, got {max_jobs!r}")
        order = order[:max_jobs]
    n = len(order)
    arrival = submit[order] - submit[order[0]]
    model = ModelAssigner(zoo, class_split).assign(n)
    iter_time = np.array([m.iter_time_s for m in zoo.models])[model]
    a, b = window if window is not None else middle_half(n)
    if not 0 <= a < b <= n:
        raise WorkloadError(f"window {a}:{b} must satisfy 0 ≤ A < B ≤ {n}")
    ids = np.arange(n, dtype=np.int64)
    return Workload.build(
        zoo,
        job_id=ids,
        model=model,
        gpus=gpus[order],
        arrival_s=arrival,
        total_iters=np.ceil(duration[order] / iter_time),
        iter_time_s=iter_time,
        measured=(ids >= a) & (ids < b),
        run_until="all",
        source=str(path),
    )
