"""Alibaba PAI GPU traces (cluster-trace-gpu-v2020).

Reads ``pai_job_table`` (``job_name, inst_id, user, status, start_time,
end_time``) and ``pai_task_table`` (``job_name, task_name, inst_num, status,
start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type``) – with a
header row, or without one in the released files' column order. Times are in
seconds; ``plan_cpu`` is in percent of a core (600 = 6 cores), ``plan_mem`` in
GB and ``plan_gpu`` in percent of a GPU (50 = half a GPU).

Per job: submit time = the job's ``start_time`` (the trace's submission
time); duration = ``end_time`` − the earliest ``start_time`` of its tasks (its
launch; the time before it is the job's wait in the queue, not its run);
requested GPUs = Σ over its tasks of ``inst_num · plan_gpu / 100``, rounded up
to whole GPUs (any fraction of a GPU becomes one); requested CPUs and memory =
Σ ``inst_num · plan_cpu / 100`` and ``inst_num · plan_mem``, divided by the
GPUs – the job's requested share per GPU. An empty ``plan_cpu``, ``plan_mem``
or ``plan_gpu`` is no request (a CPU task has no ``plan_gpu``). Jobs without
GPU tasks (CPU-only jobs), without tasks, whose ``job_name`` is in the job
table more than once (its tasks cannot be told apart), with a ``task_name`` in the
task table more than once (the task would count twice), none of whose tasks has
a ``start_time``, or with a missing field, a duration ≤ 0, a bad time (a
task's included), or a task whose ``inst_num`` is missing or not a number, or
whose ``plan_cpu``, ``plan_mem`` or ``plan_gpu`` is text that is not a number,
or with a negative ``inst_num``, ``plan_cpu``, ``plan_mem`` or ``plan_gpu`` are
skipped and counted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from synergy_gym.errors import WorkloadError
from synergy_gym.traces.csv_table import parse_csv, read_file, refuse_a_longer_first_row
from synergy_gym.traces.trace_jobs import TraceJobs, path_argument

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = (
    "job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu", "gpu_type",
)


def _read(path: Path, columns: tuple[str, ...], what: str, kind: str = "trace file") -> pd.DataFrame:
    """The table at ``path``, with a header row or – if its first row is not one – headerless in ``columns`` order."""
    data = read_file(path, kind)
    first = parse_csv(path, data, header=None, nrows=1, dtype=str, keep_default_na=False)
    cells = [str(c) for c in first.iloc[0]] if len(first) else []
    if columns[0] in cells:
        frame = parse_csv(path, data, dtype={"job_name": str})  # job names join as text, even "1"
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise WorkloadError(f"{path}: not {what}: missing column(s) {', '.join(missing)}")
        refuse_a_longer_first_row(path, data)
        return frame
    times = [cells[columns.index(c)] for c in ("start_time", "end_time")] if len(cells) == len(columns) else []
    if len(cells) != len(columns) or not all(_number_or_empty(t) for t in times):
        shown = ", ".join(cells[:6]) + (", …" if len(cells) > 6 else "")
        raise WorkloadError(
            f"{path}: not {what}: no header naming {', '.join(columns)}, and its first row ({shown}) "
            f"is not a headerless row of those {len(columns)} columns"
        )
    return parse_csv(path, data, header=None, names=list(columns), dtype={"job_name": str})


def _number_or_empty(cell: str) -> bool:
    try:
        float(cell or 0)
    except ValueError:
        return False
    return True


def read_alibaba(job_table: str | Path, task_table: str | Path | None = None) -> TraceJobs:
    """``task_table`` defaults to ``pai_task_table.csv`` beside the job table."""
    job_table = path_argument("read_alibaba(): job_table", job_table)
    if not job_table.name:  # '.', '/': no file name to find the task table beside
        raise WorkloadError(f"read_alibaba(): job_table {str(job_table)!r} names a folder, not the job table's file")
    if task_table is None:  # pai_task_table.csv, compressed like the job table
        name = job_table.name
        task_table = job_table.with_name(
            "pai_task_table" + name[len("pai_job_table"):] if name.startswith("pai_job_table") else "pai_task_table.csv"
        )
    task_table = path_argument("read_alibaba(): task_table", task_table)
    jobs = _read(job_table, JOB_COLUMNS, "an Alibaba PAI job table")
    if not jobs.shape[0]:
        raise WorkloadError(f"{job_table}: no jobs (the file has only its header row)")
    if not task_table.exists():
        raise WorkloadError(f"{job_table}: its Alibaba PAI task table {str(task_table)!r} does not exist")
    tasks = _read(task_table, TASK_COLUMNS, "an Alibaba PAI task table", "Alibaba PAI task table")
    requests = ["inst_num", "plan_cpu", "plan_mem", "plan_gpu"]
    written = tasks[requests].notna() & (tasks[requests].astype(str).apply(lambda c: c.str.strip()) != "")
    for col in requests:
        tasks[col] = pd.to_numeric(tasks[col], errors="coerce")
    # an empty plan_cpu, plan_mem or plan_gpu is no request (a CPU task has no plan_gpu); text is malformed
    no_inst_num = tasks["inst_num"].isna()
    not_a_number = (written & tasks[requests].isna()).any(axis=1)
    negative = (tasks[requests] < 0).any(axis=1)
    tasks["gpus"] = tasks["inst_num"] * tasks["plan_gpu"] / 100.0
    tasks["cpus"] = tasks["inst_num"] * tasks["plan_cpu"] / 100.0
    tasks["mem"] = tasks["inst_num"] * tasks["plan_mem"]
    tasks["launch"] = pd.to_numeric(tasks["start_time"], errors="coerce")
    start_text = tasks["start_time"].notna() & (tasks["start_time"].astype(str).str.strip() != "")
    bad_launch = start_text & tasks["launch"].isna()  # a task start_time that is text, not a number
    repeated_task = tasks.duplicated(["job_name", "task_name"], keep=False)  # summed twice, the job's GPUs doubled
    grouped = tasks.groupby("job_name")
    per_job = grouped[["gpus", "cpus", "mem"]].sum(min_count=1).join(grouped["launch"].min())
    frame = jobs.join(per_job, on="job_name")
    start = pd.to_numeric(frame["start_time"], errors="coerce").to_numpy(dtype=float)
    end = pd.to_numeric(frame["end_time"], errors="coerce").to_numpy(dtype=float)
    launch = np.maximum(start, frame["launch"].to_numpy(dtype=float))  # NaN where a time is missing
    gpus = frame["gpus"].to_numpy(dtype=float)
    duration = end - launch
    has_tasks = frame["job_name"].isin(per_job.index).to_numpy()
    def any_task(bad: pd.Series) -> np.ndarray:
        return frame["job_name"].isin(tasks.loc[bad, "job_name"]).to_numpy()

    skipped: dict[str, int] = {}
    ok = np.ones(len(frame), dtype=bool)
    for reason, bad in (
        ("no task", ~has_tasks),
        ("job_name repeated", frame["job_name"].duplicated(keep=False).to_numpy()),
        ("task_name repeated within the job", any_task(repeated_task)),
        ("bad or missing time", ~(np.isfinite(start) & np.isfinite(launch) & np.isfinite(end)) | any_task(bad_launch)),
        ("duration ≤ 0", np.isfinite(duration) & (duration <= 0)),
        ("missing or non-numeric inst_num", any_task(no_inst_num)),
        ("non-numeric plan_cpu, plan_mem or plan_gpu", any_task(not_a_number)),
        ("negative inst_num, plan_cpu, plan_mem or plan_gpu", any_task(negative)),
        ("no GPU (CPU-only job)", ~(gpus > 0)),
    ):
        skipped[reason] = int(np.count_nonzero(bad & ok))
        ok &= ~bad
    whole_gpus = np.maximum(1.0, np.ceil(gpus[ok] - 1e-9))  # any fraction of a GPU is one
    cpu = frame["cpus"].to_numpy(dtype=float)[ok] / whole_gpus
    mem = frame["mem"].to_numpy(dtype=float)[ok] / whole_gpus
    cpu[~(cpu > 0)] = np.nan  # no request: the model's demand applies
    mem[~(mem > 0)] = np.nan
    return TraceJobs.build(str(job_table), start[ok], duration[ok], whole_gpus, cpu, mem, skipped=skipped)
