"""Helios traces (SenseTime, SC'21): ``cluster_log.csv`` of each cluster.

Columns used: ``submit_time`` (``YYYY-MM-DD HH:MM:SS``), ``duration`` (seconds;
or ``start_time``/``end_time``), ``gpu_num`` and ``cpu_num`` (others, e.g.
``job_id, user, vc, node_num, state``, are ignored). The job's requested CPUs
per GPU are ``cpu_num / gpu_num``; Helios records no memory request, so the
model's applies; an empty ``cpu_num`` (or 0) is no request. CPU-only jobs
(``gpu_num`` 0), rows with a missing field, a bad time, a duration ≤ 0, a ``gpu_num``
that is negative or not whole, or a ``cpu_num`` that is negative, infinite or not a
number are skipped and counted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from synergy_gym.errors import WorkloadError
from synergy_gym.traces.csv_table import read_job_table
from synergy_gym.traces.trace_jobs import TraceJobs, path_argument

REQUIRED = ("submit_time", "gpu_num", "cpu_num")


def read_helios(path: str | Path) -> TraceJobs:
    path = path_argument("read_helios(): path", path)
    frame = read_job_table(path, REQUIRED, "trace file", "a Helios trace")
    submit_t = pd.to_datetime(frame["submit_time"], errors="coerce", format="%Y-%m-%d %H:%M:%S")
    submit = (submit_t - submit_t.min()).dt.total_seconds().to_numpy()
    if "duration" in frame.columns:
        duration = pd.to_numeric(frame["duration"], errors="coerce").to_numpy(dtype=float)
    elif {"start_time", "end_time"} <= set(frame.columns):
        start = pd.to_datetime(frame["start_time"], errors="coerce", format="%Y-%m-%d %H:%M:%S")
        end = pd.to_datetime(frame["end_time"], errors="coerce", format="%Y-%m-%d %H:%M:%S")
        duration = (end - start).dt.total_seconds().to_numpy()
    else:
        raise WorkloadError(f"{path}: not a Helios trace: missing column(s) duration (or start_time and end_time)")
    gpus = pd.to_numeric(frame["gpu_num"], errors="coerce").to_numpy(dtype=float)
    cpus = pd.to_numeric(frame["cpu_num"], errors="coerce").to_numpy(dtype=float)
    cpu_given = frame["cpu_num"].notna().to_numpy() & (frame["cpu_num"].astype(str).str.strip() != "").to_numpy()
    skipped: dict[str, int] = {}
    ok = np.ones(len(frame), dtype=bool)
    for reason, bad in (
        ("bad or missing submit_time (YYYY-MM-DD HH:MM:SS)", ~np.isfinite(submit)),
        ("missing or non-numeric duration", ~np.isfinite(duration)),
        ("duration ≤ 0", np.isfinite(duration) & (duration <= 0)),
        ("missing gpu_num", ~np.isfinite(gpus)),
        ("no GPU (CPU-only job)", gpus == 0),
        ("gpu_num not a positive integer", np.isfinite(gpus) & ((gpus < 0) | (gpus != np.floor(gpus)))),
        ("non-numeric or infinite cpu_num", cpu_given & ~np.isfinite(cpus)),
        ("cpu_num < 0", cpus < 0),
    ):
        skipped[reason] = int(np.count_nonzero(bad & ok))
        ok &= ~bad
    cpu = cpus[ok] / gpus[ok]
    cpu[~(cpu > 0)] = np.nan
    return TraceJobs.build(str(path), submit[ok], duration[ok], gpus[ok], cpu_per_gpu=cpu, skipped=skipped)
