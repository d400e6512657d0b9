"""Alibaba PAI GPU traces (cluster-trace-gpu-v2020).

Reads ``pai_job_table`` (``job_name, inst_id, user, status, start_time,
end_time``) and ``pai_task_table`` (``job_name, task_name, inst_num, status,
start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type``) – with a
header row, or without one in the released files' column order. Times are in
seconds; ``plan_cpu`` is in percent of a core (600 = 6 cores), ``plan_mem`` in
GB and ``plan_gpu`` in percent of a GPU (50 = half a GPU).

Per job: submit time = the job's ``start_time``; duration = ``end_time −
start_time``; requested GPUs = Σ over its tasks of ``inst_num · plan_gpu / 100``,
rounded up to whole GPUs (fractional GPUs become one); requested CPUs and
memory = Σ ``inst_num · plan_cpu / 100`` and ``inst_num · plan_mem``, divided by
the GPUs – the job's requested share per GPU. Jobs without GPU tasks (CPU-only
jobs), without tasks, or with a missing field, a duration ≤ 0 or a bad time
are skipped and counted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from synergy_gym.cli.files import require_file
from synergy_gym.errors import WorkloadError
from synergy_gym.traces.trace_jobs import TraceJobs

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = (
    "job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu", "gpu_type",
)


def _read(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    require_file(path, "trace file", WorkloadError)
    try:
        head = pd.read_csv(path, nrows=0)
        has_header = columns[0] in head.columns
        frame = pd.read_csv(path) if has_header else pd.read_csv(path, header=None, names=list(columns))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{path}: not a readable CSV: {str(exc).splitlines()[0]}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise WorkloadError(f"{path}: missing column(s) {', '.join(missing)}")
    return frame


def read_alibaba(job_table: str | Path, task_table: str | Path | None = None) -> TraceJobs:
    """``task_table`` defaults to ``pai_task_table.csv`` beside the job table."""
    job_table = Path(job_table)
    task_table = Path(task_table) if task_table is not None else job_table.with_name("pai_task_table.csv")
    jobs = _read(job_table, JOB_COLUMNS)
    tasks = _read(task_table, TASK_COLUMNS)
    for col in ("inst_num", "plan_cpu", "plan_mem", "plan_gpu"):
        tasks[col] = pd.to_numeric(tasks[col], errors="coerce")
    tasks["gpus"] = tasks["inst_num"] * tasks["plan_gpu"] / 100.0
    tasks["cpus"] = tasks["inst_num"] * tasks["plan_cpu"] / 100.0
    tasks["mem"] = tasks["inst_num"] * tasks["plan_mem"]
    per_job = tasks.groupby("job_name")[["gpus", "cpus", "mem"]].sum(min_count=1)
    frame = jobs.join(per_job, on="job_name")
    start = pd.to_numeric(frame["start_time"], errors="coerce").to_numpy(dtype=float)
    end = pd.to_numeric(frame["end_time"], errors="coerce").to_numpy(dtype=float)
    gpus = frame["gpus"].to_numpy(dtype=float)
    duration = end - start
    has_tasks = frame["job_name"].isin(per_job.index).to_numpy()
    skipped: dict[str, int] = {}
    ok = np.ones(len(frame), dtype=bool)
    for reason, bad in (
        ("no task", ~has_tasks),
        ("bad or missing time", ~(np.isfinite(start) & np.isfinite(end))),
        ("duration ≤ 0", np.isfinite(duration) & (duration <= 0)),
        ("no GPU (CPU-only job)", ~(gpus > 0)),
    ):
        skipped[reason] = int(np.count_nonzero(bad & ok))
        ok &= ~bad
    whole_gpus = np.ceil(gpus[ok] - 1e-9)
    cpu = frame["cpus"].to_numpy(dtype=float)[ok] / whole_gpus
    mem = frame["mem"].to_numpy(dtype=float)[ok] / whole_gpus
    cpu[~(cpu > 0)] = np.nan  # no request: the model's demand applies
    mem[~(mem > 0)] = np.nan
    return TraceJobs.build(str(job_table), start[ok], duration[ok], whole_gpus, cpu, mem, skipped=skipped)
