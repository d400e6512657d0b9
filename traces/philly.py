"""Microsoft Philly traces: the job log JSON and the Philly-derived job CSV.

``read_philly_json`` reads ``cluster_job_log`` of msr-fiddle/philly-traces: a
JSON list of jobs, each with ``jobid``, ``submitted_time``
(``YYYY-MM-DD HH:MM:SS``) and ``attempts``; an attempt has ``start_time``,
``end_time`` and ``detail`` – one entry per machine with its ``gpus`` list. As
the paper's simulator filters it:

* a job whose ``jobid`` an earlier job has is dropped (a copy), and so are
  jobs without attempts (or whose ``attempts`` is not a list),
  and so are attempts whose start or end time is missing (``None``) or whose
  duration or GPU count is not positive;
* a job's duration is the sum of its attempts' durations and its GPU count
  the last attempt's (the GPUs listed across its machines);
* only jobs lasting between 60·10^1.5 s and 60·10^4 s are kept
  (``duration_range``; ``None`` keeps all).

``read_philly_csv`` reads the Philly-derived CSV of the Sia artifact
(``timestamp, duration, num_gpus, …``; timestamps as ``YYYY-MM-DD HH:MM:SS``
or seconds), with the same duration filter. Malformed rows are skipped and
counted (see :mod:`synergy_gym.traces.trace_jobs`).
"""

from __future__ import annotations

import calendar
import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from synergy_gym.errors import WorkloadError
from synergy_gym.traces.csv_table import read_file, read_job_table
from synergy_gym.traces.trace_jobs import REFERENCE_DURATION_RANGE_S, TraceJobs, path_argument

REQUIRED = ("timestamp", "duration", "num_gpus")
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def read_philly_csv(
    path: str | Path, duration_range: tuple[float, float] | None = REFERENCE_DURATION_RANGE_S
) -> TraceJobs:
    path = path_argument("read_philly_csv(): path", path)
    frame = read_job_table(path, REQUIRED, "trace file", "a Philly CSV trace")
    skipped: dict[str, int] = {}
    numeric = pd.to_numeric(frame["timestamp"], errors="coerce")
    if numeric.notna().sum() * 2 > len(frame):  # mostly seconds: the rest are malformed
        submit = numeric.to_numpy(dtype=float)
    else:
        parsed = pd.to_datetime(frame["timestamp"], errors="coerce", format=_TIME_FORMAT)
        submit = (parsed - parsed.min()).dt.total_seconds().to_numpy()
    duration = pd.to_numeric(frame["duration"], errors="coerce").to_numpy(dtype=float)
    gpus = pd.to_numeric(frame["num_gpus"], errors="coerce").to_numpy(dtype=float)
    ok = np.ones(len(frame), dtype=bool)
    for reason, bad in (
        ("bad or missing timestamp (YYYY-MM-DD HH:MM:SS or seconds)", ~np.isfinite(submit)),
        ("missing or non-numeric duration", ~np.isfinite(duration)),
        ("duration ≤ 0", np.isfinite(duration) & (duration <= 0)),
        ("missing or non-numeric num_gpus", ~np.isfinite(gpus)),
        ("num_gpus not a positive integer", np.isfinite(gpus) & ((gpus < 1) | (gpus != np.floor(gpus)))),
    ):
        skipped[reason] = int(np.count_nonzero(bad & ok))
        ok &= ~bad
    return TraceJobs.build(str(path), submit[ok], duration[ok], gpus[ok], skipped=skipped, duration_range=duration_range)


def read_philly_json(
    path: str | Path, duration_range: tuple[float, float] | None = REFERENCE_DURATION_RANGE_S
) -> TraceJobs:
    path = path_argument("read_philly_json(): path", path)
    text = read_file(path, "trace file").decode("utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadError(
            f"{path}: line {exc.lineno}, column {exc.colno}: not a Philly JSON trace: not valid JSON ({exc.msg})"
        ) from None
    except RecursionError:
        raise WorkloadError(f"{path}: not a Philly JSON trace: nested too deeply to read") from None
    if not isinstance(data, list):
        raise WorkloadError(
            f"{path}: not a Philly JSON trace: expected a JSON list of jobs (Philly cluster_job_log), "
            f"got a {type(data).__name__}"
        )
    skipped = {"job not an object": 0, "jobid repeated (a later copy)": 0, "bad or missing submitted_time": 0,
               "no usable attempt": 0}
    submit, duration, gpus = [], [], []
    seen: set[str] = set()
    for job in data:
        if not isinstance(job, dict):
            skipped["job not an object"] += 1
            continue
        if "jobid" in job:  # a job listed twice would run twice
            if str(job["jobid"]) in seen:
                skipped["jobid repeated (a later copy)"] += 1
                continue
            seen.add(str(job["jobid"]))
        try:
            submitted = datetime.strptime(str(job["submitted_time"]), _TIME_FORMAT)
        except (KeyError, ValueError):
            skipped["bad or missing submitted_time"] += 1
            continue
        total, last_gpus = 0.0, 0
        attempts = job.get("attempts")
        for attempt in attempts if isinstance(attempts, list) else []:  # a number, text or object: no attempt
            try:
                start = datetime.strptime(str(attempt["start_time"]), _TIME_FORMAT)
                end = datetime.strptime(str(attempt["end_time"]), _TIME_FORMAT)
                n_gpus = _gpus(attempt["detail"])
            except (KeyError, TypeError, ValueError):
                continue  # "None" times, as the paper's simulator skips them
            seconds = (end - start).total_seconds()
            if seconds <= 0 or n_gpus <= 0:
                continue
            total += seconds
            last_gpus = n_gpus
        if total <= 0:
            skipped["no usable attempt"] += 1
            continue
        submit.append(calendar.timegm(submitted.timetuple()))  # the trace's wall clock, no time zone
        duration.append(total)
        gpus.append(last_gpus)
    if not submit:
        reasons = ", ".join(f"{v} {k}" for k, v in sorted(skipped.items()) if v) or "an empty list"
        raise WorkloadError(f"{path}: no job with a usable attempt ({reasons})")
    return TraceJobs.build(str(path), submit, duration, gpus, skipped=skipped, duration_range=duration_range)


def _gpus(detail: object) -> int:
    """The GPUs listed across an attempt's machines; a TypeError unless ``detail`` is a list of lists of GPUs."""
    if not isinstance(detail, list) or not all(isinstance(m, dict) and isinstance(m.get("gpus"), list) for m in detail):
        raise TypeError("not a list of machines, each with a list of GPUs")
    return sum(len(machine["gpus"]) for machine in detail)
