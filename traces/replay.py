"""Read and write workloads as CSV, in the format of the Synergy reference workloads.

Columns (one row per job)::

    job_id, model, task, gpus, arrival_s, iter_time_s, total_iters,
    fair_duration_s, cpu_demand, mem_demand_gb, speedup_at_demand,
    in_measured_window

Required on reading: ``job_id, model, gpus, arrival_s, total_iters`` and
``in_measured_window``. ``iter_time_s`` defaults to the model's iteration time;
``cpu_demand`` and ``mem_demand_gb`` (the job's totals over its GPUs) default to
the model's demand – when their column is left out: a column that is there
must have every cell filled. ``task``, ``fair_duration_s`` and
``speedup_at_demand`` are written for reference and checked on reading (the
model's task; iter_time_s × total_iters; a positive number). A column of
another name is refused, naming it. Every value follows one rule
(:mod:`synergy_gym.traces.workload_columns`). The file may be compressed
(``.gz``, ``.bz2``, ``.xz``, ``.zip``); errors are one line that names the
file and, where known, the row (its line in the file), the job and the column.
Replay runs exactly the jobs in the file.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from synergy_gym.cli.csv_text import csv_text
from synergy_gym.cli.files import atomic_write_text
from synergy_gym.errors import ConfigError, PathError, WorkloadError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.workload import RunUntil, Workload
from synergy_gym.traces.csv_table import parse_csv, read_file, refuse_a_longer_first_row
from synergy_gym.traces.formats import trace_format_of
from synergy_gym.traces.plain_csv import plain_columns
from synergy_gym.traces.trace_jobs import path_argument
from synergy_gym.traces.workload_columns import Rows, check_columns, number_text

if TYPE_CHECKING:
    import pandas as pd

REQUIRED = ("job_id", "model", "gpus", "arrival_s", "total_iters", "in_measured_window")
COLUMNS = (
    "job_id", "model", "task", "gpus", "arrival_s", "iter_time_s", "total_iters",
    "fair_duration_s", "cpu_demand", "mem_demand_gb", "speedup_at_demand", "in_measured_window",
)
NUMERIC = (
    "job_id", "gpus", "arrival_s", "total_iters", "iter_time_s", "fair_duration_s",
    "cpu_demand", "mem_demand_gb", "speedup_at_demand",
)
TEXT = ("model", "task", "in_measured_window")
_INTEGER = re.compile(r"[+-]?[0-9]+")
#: A number written with an exponent (``1e400``): pandas 2 leaves one beyond a float's range as text.
_EXPONENT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+")


def read_workload_csv(
    path: str | Path, zoo: ModelZoo | None = None, run_until: RunUntil = "window"
) -> Workload:
    """Load a workload CSV; errors name the file, the row, the row's job and the column.

    ``path`` is text, bytes or a path; ``zoo`` a :class:`ModelZoo` (None: the default); anything else is refused
    in one line.
    """
    path = path_argument("read_workload_csv(): path", path)
    if zoo is None:
        zoo = ModelZoo.default()
    elif not isinstance(zoo, ModelZoo):
        raise WorkloadError(f"read_workload_csv(): zoo must be a ModelZoo (e.g. ModelZoo.default()), "
                            f"got {type(zoo).__name__}")
    data = read_file(path, "workload file")
    lines = Layout(path, data)
    header = lines.header()
    columns = plain_columns(data.decode("utf-8"), header, TEXT)
    if columns is None:  # quoted, blank or missing cells, numbers in other notations: pandas reads it
        columns = _pandas_columns(path, data, lines, header)
    model, measured = check_columns(Rows(path, columns, lines), zoo)
    gpus = columns["gpus"].astype(float)

    def per_gpu(col: str) -> np.ndarray | None:
        return columns[col].astype(float) / gpus if col in columns else None

    return Workload.build(
        zoo,
        job_id=columns["job_id"],
        model=model,
        gpus=gpus,
        arrival_s=columns["arrival_s"].astype(float),
        total_iters=columns["total_iters"].astype(float),
        iter_time_s=columns["iter_time_s"].astype(float) if "iter_time_s" in columns else None,
        cpu_demand_per_gpu=per_gpu("cpu_demand"),
        mem_demand_per_gpu=per_gpu("mem_demand_gb"),
        measured=measured,
        run_until=run_until,
        source=str(path),
    )


def _pandas_columns(path: Path, data: bytes, lines: Layout, header: list[str]) -> dict[str, np.ndarray]:
    """The columns of the file as pandas reads them, every cell filled; else the one-line error of the first bad cell."""
    import pandas as pd

    try:
        frame = parse_csv(path, data, dtype={c: str for c in TEXT if c in header})
    except WorkloadError:
        lines.check()  # a row with too many cells, named by its line
        raise
    if frame.empty:
        raise WorkloadError(f"{path}: no jobs (the file has only its header row)")
    if frame.isna().any().any():
        lines.check()  # a row with too few (or too many) cells, named by its line
    refuse_a_longer_first_row(path, data)  # pandas read its first cells as the index
    for col in NUMERIC:
        if col in frame.columns and not pd.api.types.is_numeric_dtype(frame[col]):
            frame[col] = _exact_numbers(path, lines, col, frame[col].to_numpy())
    if frame.isna().any().any():  # the text as written: an empty cell and a "nan" both read as NaN
        raw = parse_csv(path, data, dtype=str, keep_default_na=False)
        for col in header:
            cells = raw[col].astype(str).str.strip().to_numpy()
            empty = np.flatnonzero(cells == "")
            written = np.flatnonzero(frame[col].isna().to_numpy() & (cells != ""))
            if col in TEXT:
                frame[col] = raw[col]
            elif written.size and (not empty.size or written[0] < empty[0]):
                i = int(written[0])
                job = frame["job_id"].iloc[i]
                which = f"row {lines[i]} (job {number_text(job)})" if col != "job_id" and pd.notna(job) else f"row {lines[i]}"
                raise WorkloadError(f"{path}: {which}: column {col} is not a number: {cells[i]!r}")
            if empty.size:
                raise WorkloadError(f"{path}: row {lines[int(empty[0])]}: column {col} is empty")
    return {str(col): frame[col].to_numpy() for col in frame.columns}


def _exact_numbers(path: Path, lines: Layout, col: str, cells: np.ndarray) -> np.ndarray:
    """A column pandas left as text or Python integers (one beyond 64 bits): each cell as a number, an integer exact.

    NaN stays NaN (an empty cell, named later); the first cell that is not a number is refused.
    """
    import pandas as pd

    out = np.empty(cells.size, dtype=object)
    for i, cell in enumerate(cells.tolist()):
        if isinstance(cell, str):
            text = cell.strip()
            if _INTEGER.fullmatch(text):
                cell = int(text)
            elif _EXPONENT.fullmatch(text):
                cell = float(text)  # out of range: ±inf or 0.0, checked as the value it is
            else:
                try:
                    cell = float(pd.to_numeric(text))
                except (ValueError, TypeError):
                    raise WorkloadError(f"{path}: row {lines[i]}: column {col} is not a number: {cells[i]!r}") from None
        out[i] = cell
    return out


class Layout:
    """The header of a workload file and the line of each of its rows (row N is line N; blank lines are skipped).

    Reading every row with the csv module takes a while, so it is done only
    when a row must be named or the table looks malformed (:meth:`check`).
    """

    def __init__(self, path: Path, data: bytes) -> None:
        self.path, self.data = path, data
        self._lines: list[int] | None = None

    def _records(self) -> Iterator[tuple[int, list[str]]]:
        reader = csv.reader(io.TextIOWrapper(io.BytesIO(self.data), encoding="utf-8", newline=""))
        try:
            for record in reader:
                if record and (len(record) > 1 or record[0].strip()):
                    yield reader.line_num, record
        except csv.Error as exc:
            raise WorkloadError(f"{self.path}: row {reader.line_num}: not a readable CSV: {exc}") from None

    def header(self) -> list[str]:
        """The header row, checked: named, unique, known and complete columns."""
        for line, header in self._records():
            _check_header(self.path, header, line)
            return header
        raise WorkloadError(
            f"{self.path}: not a readable CSV: the file is empty (expected a header row: {', '.join(COLUMNS)})"
        )

    def check(self) -> None:
        """Refuse a row whose number of cells is not the header's."""
        records = self._records()
        _, header = next(records)
        lines = []
        for line, record in records:
            if len(record) != len(header):
                raise WorkloadError(
                    f"{self.path}: row {line} has {len(record)} cells, but the header names {len(header)} columns"
                )
            lines.append(line)
        self._lines = lines

    def __getitem__(self, i: int) -> int:
        if self._lines is None:
            self.check()
        assert self._lines is not None
        return self._lines[i] if i < len(self._lines) else i + 2


def _check_header(path: Path, header: list[str], line: int) -> None:
    for k, name in enumerate(header):
        if not name.strip():
            raise WorkloadError(f"{path}: row {line}: column {k + 1} of the header has no name")
        if name in header[:k]:
            raise WorkloadError(f"{path}: row {line}: column {name} appears twice in the header")
    missing = [c for c in REQUIRED if c not in header]
    unknown = ", ".join(repr(c) for c in header if c not in COLUMNS)
    if missing:
        also = f"; unknown column(s) {unknown}" if unknown else ""
        fmt = trace_format_of(set(header))
        hint = f"; these are the columns of a {fmt} trace: read it with compare --trace, or the environment's trace=" \
            if fmt else ""
        raise WorkloadError(f"{path}: missing column(s) {', '.join(missing)}{also}{hint}")
    if unknown:
        raise WorkloadError(f"{path}: unknown column(s) {unknown}; valid: {', '.join(COLUMNS)}")


def workload_frame(workload: Workload, cluster: ClusterSpec) -> pd.DataFrame:
    """The workload as a table in the replay format (demands resolved for ``cluster``)."""
    import pandas as pd

    return pd.DataFrame(workload_table(workload, cluster), columns=list(COLUMNS))


def workload_table(workload: Workload, cluster: ClusterSpec) -> dict[str, np.ndarray]:
    """The columns of :func:`workload_frame` (:data:`COLUMNS`, in order), without pandas."""
    zoo = workload.zoo
    cpu, mem = workload.demand_per_gpu(cluster)
    speedup = zoo.throughput_many(workload.model, cpu, mem)
    return {
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
    }


def write_workload_csv(workload: Workload, path: str | Path, cluster: ClusterSpec | None = None) -> Path:
    """Write ``workload`` atomically in the replay format; returns the path.

    ``cluster`` (None: the default :class:`ClusterSpec`) resolves the jobs' demands. Like
    :class:`~synergy_gym.sim.simulator.Simulator` and :func:`~synergy_gym.experiments.harness.run_cases`, this
    Python function takes a :class:`ClusterSpec` and refuses a preset's name, saying to use
    ``cluster_preset(name)`` or ``load_cluster(name)`` (names are read where settings are text: the env kwarg
    ``cluster``, the command line). A workload spec not yet built (``SyntheticWorkload``), a path that is not text
    or a path, or a folder, is refused in one line too.
    """
    if not isinstance(workload, Workload):
        hint = "; call its .build()" if hasattr(workload, "build") else ""
        raise WorkloadError(f"write_workload_csv(): workload must be a Workload, got a {type(workload).__name__}{hint}")
    target = path_argument("write_workload_csv(): path", path, PathError)
    if cluster is not None and not isinstance(cluster, ClusterSpec):
        hint = f"; use cluster_preset({cluster!r}) or load_cluster({cluster!r})" if isinstance(cluster, str) else ""
        shown = repr(cluster) if isinstance(cluster, str) else f"a {type(cluster).__name__}"
        raise ConfigError(f"write_workload_csv(): cluster must be a ClusterSpec, got {shown}{hint}")
    if target.is_dir():
        raise PathError(f"write_workload_csv(): path {str(target)!r} is a folder; name the file to write")
    return atomic_write_text(target, csv_text(workload_table(workload, cluster or ClusterSpec())))


def replay_workload(path: str | Path) -> Workload:
    """A replay file's jobs, run until all have finished (the environment's ``workload=PATH`` reader)."""
    return read_workload_csv(path, run_until="all")
