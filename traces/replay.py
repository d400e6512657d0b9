"""Read and write workloads as CSV, in the format of the Synergy reference workloads.

Columns (one row per job)::

    job_id, model, task, gpus, arrival_s, iter_time_s, total_iters,
    fair_duration_s, cpu_demand, mem_demand_gb, speedup_at_demand,
    in_measured_window

Required on reading: ``job_id, model, gpus, arrival_s, total_iters`` and
``in_measured_window``. ``iter_time_s`` defaults to the model's iteration time;
``cpu_demand`` and ``mem_demand_gb`` (the job's totals over its GPUs) default to
the model's demand. ``task``, ``fair_duration_s`` and ``speedup_at_demand`` are
written for reference and checked on reading only for being well-formed.
Replay runs exactly the jobs in the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from synergy_gym.cli.files import atomic_write_text
from synergy_gym.errors import WorkloadError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.workload import RunUntil, Workload
from synergy_gym.traces.csv_table import read_job_table

REQUIRED = ("job_id", "model", "gpus", "arrival_s", "total_iters", "in_measured_window")
COLUMNS = (
    "job_id", "model", "task", "gpus", "arrival_s", "iter_time_s", "total_iters",
    "fair_duration_s", "cpu_demand", "mem_demand_gb", "speedup_at_demand", "in_measured_window",
)
NUMERIC = (
    "job_id", "gpus", "arrival_s", "total_iters", "in_measured_window", "iter_time_s", "fair_duration_s",
    "cpu_demand", "mem_demand_gb",
)


def read_workload_csv(
    path: str | Path, zoo: ModelZoo | None = None, run_until: RunUntil = "window"
) -> Workload:
    """Load a workload CSV; errors name the file, the row's job and the column."""
    zoo = zoo or ModelZoo.default()
    path = Path(path)
    frame = read_job_table(path, REQUIRED, "workload file")
    for col in NUMERIC:
        if col in frame.columns and not pd.api.types.is_numeric_dtype(frame[col]):
            bad = pd.to_numeric(frame[col], errors="coerce").isna() & frame[col].notna()
            i = int(np.flatnonzero(bad.to_numpy())[0]) if bad.any() else 0
            raise WorkloadError(f"{path}: row {i + 2}: column {col} is not a number: {frame[col].iloc[i]!r}")
    raw = None
    for col in NUMERIC:
        if col in frame.columns and frame[col].isna().any():
            if raw is None:  # the text as written: an empty cell and a "nan" both read as NaN
                raw = pd.read_csv(path, dtype=str, keep_default_na=False)
            cells = raw[col].astype(str).str.strip().to_numpy()
            written = np.flatnonzero(frame[col].isna().to_numpy() & (cells != ""))
            if written.size:
                i = int(written[0])
                job = frame["job_id"].iloc[i]
                which = f"row {i + 2} (job {job:.15g})" if col != "job_id" and pd.notna(job) else f"row {i + 2}"
                raise WorkloadError(f"{path}: {which}: column {col} is not a number: {cells[i]!r}")
            if col in REQUIRED:
                i = int(np.flatnonzero(frame[col].isna().to_numpy())[0])
                raise WorkloadError(f"{path}: row {i + 2}: column {col} is empty")
    if "fair_duration_s" in frame.columns:
        fair_duration = frame["fair_duration_s"].to_numpy(dtype=float)
        not_positive = ~(fair_duration > 0)
        if not_positive.any():
            i = int(np.flatnonzero(not_positive)[0])
            raise WorkloadError(
                f"{path}: job {frame['job_id'].iloc[i]}: fair_duration_s={float(fair_duration[i])!r} must be > 0"
            )
    names = frame["model"].astype(str).to_numpy()
    known = {name: i for i, name in enumerate(zoo.names)}
    unknown = [n for n in names if n not in known]
    if unknown:
        i = int(np.flatnonzero(names == unknown[0])[0])
        raise WorkloadError(
            f"{path}: job {frame['job_id'].iloc[i]}: unknown model {unknown[0]!r}; valid: {', '.join(zoo.names)}"
        )
    gpus = frame["gpus"].to_numpy(dtype=float)

    def per_gpu(col: str) -> np.ndarray | None:
        if col not in frame.columns:
            return None
        # gpus < 1 is rejected by Workload.build, by job; no division by zero before that.
        return np.divide(frame[col].to_numpy(dtype=float), gpus, out=np.full(len(gpus), np.nan), where=gpus > 0)

    return Workload.build(
        zoo,
        job_id=frame["job_id"].to_numpy(),
        model=np.array([known[n] for n in names]),
        gpus=gpus,
        arrival_s=frame["arrival_s"].to_numpy(dtype=float),
        total_iters=frame["total_iters"].to_numpy(dtype=float),
        iter_time_s=frame["iter_time_s"].to_numpy(dtype=float) if "iter_time_s" in frame.columns else None,
        cpu_demand_per_gpu=per_gpu("cpu_demand"),
        mem_demand_per_gpu=per_gpu("mem_demand_gb"),
        measured=frame["in_measured_window"].to_numpy() != 0,
        run_until=run_until,
        source=str(path),
    )


def workload_frame(workload: Workload, cluster: ClusterSpec) -> pd.DataFrame:
    """The workload as a table in the replay format (demands resolved for ``cluster``)."""
    zoo = workload.zoo
    cpu, mem = workload.demand_per_gpu(cluster)
    speedup = zoo.throughput_many(workload.model, cpu, mem)
    return pd.DataFrame(
        {
            "job_id": workload.job_id,
            "model": workload.model_names,
            "task": np.asarray([m.task for m in zoo.models], dtype=object)[workload.model],
            "gpus": workload.gpus,
            "arrival_s": workload.arrival_s,
            "iter_time_s": workload.iter_time_s,
            "total_iters": workload.total_iters,
            "fair_duration_s": np.round(workload.fair_duration_s, 6),
            "cpu_demand": cpu * workload.gpus,
            "mem_demand_gb": mem * workload.gpus,
            "speedup_at_demand": speedup,
            "in_measured_window": workload.measured.astype(int),
        },
        columns=list(COLUMNS),
    )


def write_workload_csv(workload: Workload, path: str | Path, cluster: ClusterSpec | None = None) -> Path:
    """Write ``workload`` atomically in the replay format; returns the path."""
    frame = workload_frame(workload, cluster or ClusterSpec())
    return atomic_write_text(Path(path), frame.to_csv(index=False))


def replay_workload(path: str | Path) -> Workload:
    """A replay file's jobs, run until all have finished (the environment's ``workload=PATH`` reader)."""
    return read_workload_csv(path, run_until="all")
