"""The rule for every column of a workload (replay) file, checked row by row.

One rule for numbers: every cell of every column the file has must be filled
(leave a column out to get its default); numbers must be finite. Then, by
column:

================== ==========================================================
job_id             an integer ≥ 0, each once
model              a model of the zoo
task               the model's task (vision, language or speech)
gpus, total_iters  an integer ≥ 1
arrival_s          seconds ≥ 0
iter_time_s        seconds > 0
fair_duration_s    seconds > 0, equal to iter_time_s × total_iters (within
                   0.01 s or 0.01 %): the job runs that long, so a value
                   that disagrees is refused rather than ignored
cpu_demand,        > 0 and at most 10^6 (the job's totals over its GPUs;
mem_demand_gb      capped at one server when the job runs)
speedup_at_demand  > 0 and at most 10^6 (written for reference)
in_measured_window 0, 1, true or false
================== ==========================================================

Integers are at most 2^53 (exact as floating point) and times – arrival,
iteration time and a job's run time iter_time_s × total_iters – at most
:data:`MAX_SECONDS` (10^12 s, about 31,700 years), so that no later sum
overflows. Errors name the file, the row (row N is line N of the file; the
header is row 1), the job and the column.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Protocol

import numpy as np

from synergy_gym.errors import WorkloadError
from synergy_gym.sim.profiles import TASKS, ModelZoo
from synergy_gym.sim.workload import MAX_INTEGER  # the largest integer a workload file may hold: 2^53

#: The largest demand (CPUs, GB) or speed-up a workload file may give.
MAX_AMOUNT = 1e6
#: The longest time (arrival, iteration time, a job's run time) a workload file may give, in seconds.
MAX_SECONDS = 1e12
#: fair_duration_s may differ from iter_time_s × total_iters by this much (seconds, relative).
FAIR_DURATION_TOLERANCE = (0.01, 1e-4)

INTEGERS = {"job_id": 0, "gpus": 1, "total_iters": 1}
SECONDS = {"arrival_s": 0, "iter_time_s": 1, "fair_duration_s": 1}  # 0: ≥ 0 allowed; 1: > 0
AMOUNTS = ("cpu_demand", "mem_demand_gb", "speedup_at_demand")
BOOLEANS = {"0": False, "1": True, "false": False, "true": True}


class Lines(Protocol):
    """The line of the file each row of the table is on."""

    def __getitem__(self, i: int) -> int: ...


class Rows:
    """Raises the one-line error for a row of the file at ``path``, whose ``columns`` are the file's (name → values)."""

    def __init__(self, path: Path, columns: Mapping[str, np.ndarray], lines: Lines) -> None:
        self.path, self.columns, self.lines = path, columns, lines

    def first(self, bad: np.ndarray, what: Callable[[int], str], job: bool = True) -> None:
        """Fail on the first row where ``bad`` holds; ``what(i)`` says why (after the row's job, with ``job``)."""
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            of_job = f"job {number_text(self.columns['job_id'][i])}: " if job else ""
            raise WorkloadError(f"{self.path}: row {self.lines[i]}: {of_job}{what(i)}")

    def values(self, col: str, bad: np.ndarray, values: np.ndarray, rule: str, integer: bool = False) -> None:
        """Fail on the first row where ``bad`` holds: ``col=<value> <rule>``."""
        def what(i: int) -> str:
            return f"{col}={number_text(values[i])} {rule}" if integer else f"{col}={float(values[i])!r} {rule}"

        self.first(bad, what, job=col != "job_id")


def check_columns(rows: Rows, zoo: ModelZoo) -> tuple[np.ndarray, np.ndarray]:
    """Check every present column (no cell is empty or NaN any more); returns (model index, measured)."""
    columns = rows.columns
    for col, low in INTEGERS.items():
        if col in columns:  # checked as read (an integer beyond 2^53 is not rounded to one within it first)
            v = columns[col]
            whole = np.array([_whole(x, low) for x in v.tolist()], dtype=bool) if v.dtype == object else \
                v >= low if v.dtype.kind in "iu" else np.isfinite(v) & (v == np.floor(v)) & (v >= low)
            rows.values(col, ~whole, v, f"must be a {'positive' if low else 'non-negative'} integer", integer=True)
            too_big = np.array([x > MAX_INTEGER for x in v.tolist()], dtype=bool) if v.dtype == object else v > MAX_INTEGER
            rows.values(col, too_big, v, f"must be at most 2^53 = {MAX_INTEGER}", integer=True)
    ids = columns["job_id"].astype(np.int64)  # whole numbers within 2^53: exact
    rows.first(_repeated(ids), lambda i: f"job_id={ids[i]} appears more than once "
               f"(also row {rows.lines[int(np.flatnonzero(ids == ids[i])[0])]})", job=False)
    names = columns["model"]
    known = {name: i for i, name in enumerate(zoo.names)}
    rows.first(np.array([n not in known for n in names]),
               lambda i: f"unknown model {names[i]!r}; valid: {', '.join(zoo.names)}")
    model = np.array([known[n] for n in names], dtype=np.int64)
    if "task" in columns:
        tasks = columns["task"]
        rows.first(np.array([t not in TASKS for t in tasks]),
                   lambda i: f"unknown task {tasks[i]!r}; valid: {', '.join(TASKS)}")
        model_task = np.array([m.task for m in zoo.models], dtype=object)[model]
        rows.first(tasks != model_task,
                   lambda i: f"task={tasks[i]!r}, but model {names[i]} is a {model_task[i]} model")
    for col in (*SECONDS, *AMOUNTS):
        if col in columns:
            v = _floats(columns[col])
            positive = SECONDS.get(col, 1)
            rows.values(col, ~np.isfinite(v), v, "must be finite")
            rows.values(col, v <= 0 if positive else v < 0, v, "must be > 0" if positive else "must be ≥ 0")
            if col in SECONDS:
                rows.values(col, v > MAX_SECONDS, v, f"must be at most {MAX_SECONDS:g} s (about 31,700 years)")
            else:  # a demand is capped at one server later; a figure no machine has is a mistake, not a demand
                rows.values(col, v > MAX_AMOUNT, v, f"must be at most {MAX_AMOUNT:g}")
    _check_run_time(rows, zoo, model)
    given = columns["in_measured_window"]
    flag = {f: BOOLEANS.get(str(f).strip().lower()) for f in set(given)}
    measured = np.array([flag[f] for f in given], dtype=object)
    rows.first(np.array([m is None for m in measured]),
               lambda i: f"in_measured_window={given[i]!r} must be 0, 1, true or false")
    return model, measured.astype(bool)


def _check_run_time(rows: Rows, zoo: ModelZoo, model: np.ndarray) -> None:
    """A job's run time iter_time_s × total_iters is at most MAX_SECONDS and matches fair_duration_s."""
    columns = rows.columns
    given = "iter_time_s" in columns
    iter_time = columns["iter_time_s"].astype(float) if given else np.array([m.iter_time_s for m in zoo.models])[model]
    factor = "iter_time_s" if given else "the model's iter_time_s"
    run_time = iter_time * columns["total_iters"].astype(float)
    rows.first(run_time > MAX_SECONDS, lambda i: f"{factor} × total_iters = {run_time[i]:.6g} s "
               f"must be at most {MAX_SECONDS:g} s (about 31,700 years)")
    if "fair_duration_s" in columns:
        fair = columns["fair_duration_s"].astype(float)
        absolute, relative = FAIR_DURATION_TOLERANCE
        rows.first(
            np.abs(fair - run_time) > np.maximum(absolute, relative * run_time),
            lambda i: f"fair_duration_s={float(fair[i])!r} is not {factor} × total_iters = {run_time[i]:.10g} s, "
            "the job's run time (correct it or leave the column out)",
        )


def number_text(value: object) -> str:
    """A number as an error names it: an integer (up to 30 digits) in full, any other to 15 digits."""
    if isinstance(value, (int, np.integer)):
        if abs(value) < 10**30:
            return str(int(value))
        mantissa, exponent = f"{Decimal(int(value)):.14e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"
    x = float(value)  # type: ignore[arg-type]
    return str(int(x)) if math.isfinite(x) and x == math.floor(x) and abs(x) < 2.0**63 else f"{x:.15g}"


def _whole(x: float, low: int) -> bool:
    """Whether ``x`` (a Python int or float, as read) is an integer ≥ ``low``."""
    if isinstance(x, int):
        return x >= low
    return math.isfinite(x) and x == math.floor(x) and x >= low


def _floats(values: np.ndarray) -> np.ndarray:
    """``values`` as floats; an integer beyond any float (read exactly) becomes ±inf."""
    if values.dtype != object:
        return values.astype(float)
    return np.array([_float(x) for x in values.tolist()], dtype=float)


def _float(x: float) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _repeated(values: np.ndarray) -> np.ndarray:
    """True where a value appeared in an earlier row (as pandas' ``duplicated``)."""
    repeated = np.ones(values.size, dtype=bool)
    repeated[np.unique(values, return_index=True)[1]] = False
    return repeated
