"""One entry point for every trace format."""

from __future__ import annotations

import csv
from pathlib import Path

from synergy_gym.errors import UnknownNameError, WorkloadError
from synergy_gym.sim.model_mix import DEFAULT_SPLIT, check_split
from synergy_gym.sim.validation import check_flag, check_positive
from synergy_gym.sim.workload import Workload
from synergy_gym.traces.alibaba import read_alibaba
from synergy_gym.traces.csv_table import COMPRESSIONS, first_line, plain_suffix
from synergy_gym.traces.formats import FORMATS, trace_format_of
from synergy_gym.traces.helios import read_helios
from synergy_gym.traces.philly import read_philly_csv, read_philly_json
from synergy_gym.traces.trace_jobs import REFERENCE_DURATION_RANGE_S, TraceJobs, path_argument, to_workload

#: The job table an Alibaba PAI trace's folder may hold: plain or compressed (its task table compressed alike).
_JOB_TABLES = ("pai_job_table.csv", *(f"pai_job_table.csv{suffix}" for suffix in COMPRESSIONS))


def detect_format(path: Path) -> str:
    """Guess a trace's format from its name and header (a compressed file by what it holds).

    The header's column names are read as the readers read them: CSV-unquoted, matched exactly.
    """
    if path.is_dir() or path.name.startswith("pai_job_table"):
        return "alibaba"
    if plain_suffix(path) == ".json":
        return "philly-json"
    header = next(csv.reader([first_line(path, "trace file")]), [])
    fmt = trace_format_of(set(header))
    if fmt is not None:
        return fmt
    if {"arrival_s", "total_iters"} <= set(header):
        raise WorkloadError(
            f"{path}: a workload file (the replay format: job_id, model, gpus, arrival_s, total_iters, …), not a trace: "
            "replay it with compare --workload, or the environment's workload="
        )
    spaced = [c for c in header if c != c.strip()]
    hint = (f"; names are matched exactly, and {spaced[0]!r} has spaces around it"
            if spaced and trace_format_of({c.strip() for c in header}) else "")
    raise WorkloadError(
        f"{path}: cannot tell the trace format: its header has the columns of no known format (Philly CSV: timestamp, "
        f"duration, num_gpus; Helios: submit_time, gpu_num; Alibaba PAI: job_name){hint}; name the format – one of "
        f"{', '.join(FORMATS[1:])} – with compare --trace-format, trace-stats --format or load_trace(path, fmt=...) "
        "(for the environment: workload=to_workload(load_trace(path, fmt=...)))"
    )


def load_trace(path: str | Path, fmt: str = "auto", philly_duration_filter: bool = True) -> TraceJobs:
    """Read a trace; ``fmt`` is one of :data:`FORMATS` (an Alibaba trace may be its folder).

    Philly traces get the paper's duration filter unless ``philly_duration_filter`` is False (a bool, NumPy's
    included: text such as ``"false"`` is refused, not read as true). A ``path`` that is not text or a path is
    refused in one line.
    """
    if fmt not in FORMATS:
        raise UnknownNameError("trace format", fmt, FORMATS)
    path = path_argument("load_trace(): path", path)
    use_filter = check_flag("philly_duration_filter", philly_duration_filter, WorkloadError)
    if fmt == "auto":
        fmt = detect_format(path)
    durations = REFERENCE_DURATION_RANGE_S if use_filter else None
    if fmt == "philly-csv":
        return read_philly_csv(path, durations)
    if fmt == "philly-json":
        return read_philly_json(path, durations)
    if fmt == "helios":
        return read_helios(path)
    if path.is_dir():
        found = [path / name for name in _JOB_TABLES if (path / name).is_file()]
        if not found:
            raise WorkloadError(
                f"trace {str(path)!r} is a folder without pai_job_table.csv (only an Alibaba PAI trace may be a folder)"
            )
        if len(found) > 1:  # which one is meant?
            raise WorkloadError(f"trace {str(path)!r} holds {' and '.join(p.name for p in found)}: name the file")
        path = found[0]
    return read_alibaba(path)


def trace_workload(
    path: str | Path, class_split: tuple[float, float, float] = DEFAULT_SPLIT, max_jobs: int | None = None
) -> Workload:
    """A trace's first ``max_jobs`` jobs at their submit times (the environment's ``trace=PATH`` reader).

    ``max_jobs`` and ``class_split`` are checked (as :func:`to_workload` checks them) before the trace is read.
    """
    max_jobs = check_positive("max_jobs", max_jobs, integer=True, allow_none=True, error=WorkloadError)
    check_split(class_split)
    return to_workload(load_trace(path), class_split=class_split, max_jobs=max_jobs)
