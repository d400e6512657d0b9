"""Jobs read from a real cluster trace, and the two ways of turning them into a workload.

Every trace loader returns :class:`TraceJobs`: submit times (from 0, sorted),
durations, GPU counts and – where the trace has them – the CPUs and memory per
GPU the job requested. Rows a loader cannot use (a missing field, a bad
timestamp, a duration ≤ 0, no GPU) are **skipped and counted**: one
:class:`TraceWarning` per file gives the counts by reason; another counts the
jobs a duration filter left out (the paper's, for Philly traces). So are rows beyond
the limits of a workload file (:mod:`synergy_gym.traces.workload_columns`): a
submit time beyond ±:data:`MAX_SECONDS`, a duration over it, a GPU count over
2^53, a CPU or memory request over :data:`MAX_AMOUNT` per GPU (infinite included).
A file that is not a trace of that format (missing columns, unreadable,
no usable job, kept submit times spanning more than :data:`MAX_SECONDS`) is
**rejected** with a one-line error. :meth:`TraceJobs.build`, the Python entry
point the readers call with the rows they kept, **refuses** what no reader
passes it – a GPU count that is not a whole number ≥ 1, a NaN submit time,
columns of different lengths or of something other than numbers – rather than
skip it: its arrays are the caller's own, so the caller fixes them.

A trace becomes a workload in one of two ways:

* :func:`to_workload` keeps the trace's own submit times (optionally scaled by
  ``arrival_scale``: 0.5 doubles the arrival rate) and its GPU counts and
  durations;
* :func:`sample_workload` draws (GPU count, duration) pairs from the trace's
  joint distribution, with Poisson arrivals at ``jobs_per_hour`` like the
  synthetic generator.

Either way models are assigned by the class split in arrival order, a job's
duration is its run time at the fair share (``total_iters = ceil(duration /
iter_time)``), a requested CPU/memory share becomes the job's demand, the
measured window is the middle half of the jobs unless given, and a run ends
when every job has finished. A job whose arrival (after scaling) or run time
is over :data:`MAX_SECONDS` is refused with a one-line error naming the file,
the job and the value.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from synergy_gym.errors import SynergyGymError, WorkloadError
from synergy_gym.sim.generator import _check_window
from synergy_gym.sim.model_mix import DEFAULT_SPLIT, ModelAssigner, check_split
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.validation import check_positive, is_number
from synergy_gym.sim.workload import MAX_INTEGER, MAX_JOBS, Workload, check_jobs_per_hour, middle_half_window
from synergy_gym.traces.workload_columns import MAX_AMOUNT, MAX_SECONDS

#: The paper's simulator keeps Philly jobs lasting between 60·10^1.5 s (31.6 min) and 60·10^4 s (6.9 days).
REFERENCE_DURATION_RANGE_S: tuple[float, float] = (60 * 10**1.5, 60 * 10**4)


class TraceWarning(UserWarning):
    """Rows of a trace were skipped; the message counts them by reason."""


class FilteredJobsWarning(TraceWarning):
    """Jobs of a trace were left out by a duration filter; the message counts them."""


@dataclass(frozen=True)
class TraceJobs:
    """Usable jobs of a trace, sorted by submit time."""

    source: str
    submit_s: np.ndarray  # seconds since the first kept submit
    duration_s: np.ndarray
    gpus: np.ndarray
    cpu_per_gpu: np.ndarray  # requested CPUs per GPU; NaN where the trace has none
    mem_per_gpu: np.ndarray  # requested GB per GPU; NaN where the trace has none
    skipped: dict[str, int] = field(default_factory=dict)  # malformed rows, by reason
    filtered: int = 0  # well-formed jobs dropped by a documented filter (e.g. duration range)

    @classmethod
    def build(
        cls,
        source: str,
        submit_s: ArrayLike,
        duration_s: ArrayLike,
        gpus: ArrayLike,
        cpu_per_gpu: ArrayLike | None = None,
        mem_per_gpu: ArrayLike | None = None,
        skipped: dict[str, int] | None = None,
        duration_range: tuple[float, float] | None = None,
    ) -> TraceJobs:
        """Sort by submit time, apply the duration filter, warn about skipped rows.

        The columns are 1-D sequences of numbers, one per job (``cpu_per_gpu`` and ``mem_per_gpu``: NaN where
        there is no request). The readers skip the rows they cannot use before calling this; here, with arrays
        the caller made, a GPU count that is not a whole number ≥ 1 (or is NaN), a NaN submit time, a duration
        that is not a positive number (NaN included), a column
        of another length or of something other than numbers, and a ``duration_range`` that is not two numbers
        are refused with a one-line :class:`WorkloadError` naming the column (and the job, by its position).
        """
        submit = _column(source, "submit_s", submit_s)
        n = submit.size
        duration = _column(source, "duration_s", duration_s, n)
        gpu_count = _column(source, "gpus", gpus, n)
        cpu = np.full(n, np.nan) if cpu_per_gpu is None else _column(source, "cpu_per_gpu", cpu_per_gpu, n)
        mem = np.full(n, np.nan) if mem_per_gpu is None else _column(source, "mem_per_gpu", mem_per_gpu, n)
        _refuse(source, np.isnan(submit), lambda i: "submit_s=nan must be a number of seconds")
        _refuse(source, ~(duration > 0), lambda i: f"duration_s={duration[i]:g} must be a positive number of seconds")
        # inf is a count over 2^53: skipped below, as the readers' counts beyond the limits are
        _refuse(source, ~(gpu_count >= 1) | (np.isfinite(gpu_count) & (gpu_count != np.floor(gpu_count))),
                lambda i: f"gpus={gpu_count[i]:g} must be a whole number ≥ 1 (the job's GPU count)")
        if duration_range is not None:
            duration_range = _duration_range(source, duration_range)
        skipped = dict(skipped or {})
        keep = np.ones(n, dtype=bool)
        for reason, bad in (  # the limits of a workload file, so that no later sum or int64 cast overflows
            (f"submit time beyond ±{MAX_SECONDS:g} s", ~(np.abs(submit) <= MAX_SECONDS)),
            (f"duration over {MAX_SECONDS:g} s", ~(duration <= MAX_SECONDS)),
            ("GPU count over 2^53", ~(gpu_count <= MAX_INTEGER)),
            (f"CPU request over {MAX_AMOUNT:g} per GPU", cpu > MAX_AMOUNT),  # inf included; NaN is no request
            (f"memory request over {MAX_AMOUNT:g} GB per GPU", mem > MAX_AMOUNT),
        ):
            skipped[reason] = skipped.get(reason, 0) + int(np.count_nonzero(bad & keep))
            keep &= ~bad
        skipped = {k: v for k, v in skipped.items() if v}
        filtered = 0
        if duration_range is not None:
            lo, hi = duration_range
            outside = keep & ~((duration > lo) & (duration < hi))
            filtered = int(np.count_nonzero(outside))
            keep &= ~outside
        reasons = ", ".join(f"{v} {k}" for k, v in sorted(skipped.items()))
        skipped_text = f"skipped {sum(skipped.values())} malformed row(s): {reasons}" if skipped else ""
        if not keep.any():  # one line, no warning before it
            why = "; ".join(t for t in (skipped_text, f"{filtered} outside the duration filter" if filtered else "") if t)
            raise WorkloadError(f"{source}: no usable job ({why or 'no rows'})")
        order = np.argsort(submit[keep], kind="stable")
        submit_kept = submit[keep][order]
        span = submit_kept[-1] - submit_kept[0]
        if span > MAX_SECONDS:  # each time is within ±MAX_SECONDS, but not all are within MAX_SECONDS of the first
            raise WorkloadError(
                f"{source}: the submit times span {span:g} s (from {submit_kept[0]:g} to {submit_kept[-1]:g}), "
                f"more than {MAX_SECONDS:g} s (about 31,700 years): a timestamp is wrong"
            )
        if skipped:
            warnings.warn(f"{source}: {skipped_text}", TraceWarning, stacklevel=3)
        if filtered:
            assert duration_range is not None  # only a duration filter leaves jobs out
            shortest, longest = (f"{x / 60:.1f} min" if x < 86400 else f"{x / 86400:.1f} days" for x in duration_range)
            papers = duration_range == REFERENCE_DURATION_RANGE_S
            which = "the paper's range" if papers else "the range"
            keep_them = (" (compare and trace-stats --all-durations, or load_trace(path, philly_duration_filter=False), "
                         "keep them)") if papers else ""
            warnings.warn(
                f"{source}: left out {filtered:,} of {filtered + int(keep.sum()):,} job(s) lasting outside {which} of "
                f"{shortest} to {longest}{keep_them}", FilteredJobsWarning, stacklevel=3,
            )
        return cls(
            source=source,
            submit_s=submit_kept - submit_kept[0],
            duration_s=duration[keep][order],
            gpus=gpu_count[keep][order].astype(np.int64),
            cpu_per_gpu=cpu[keep][order],
            mem_per_gpu=mem[keep][order],
            skipped=skipped,
            filtered=filtered,
        )

    def __len__(self) -> int:
        return self.submit_s.size


def _to_workload(
    trace: TraceJobs,
    zoo: ModelZoo,
    arrival_s: np.ndarray,
    idx: np.ndarray,
    class_split: tuple[float, float, float],
    window: tuple[int, int] | None,
    source: str,
) -> Workload:
    n = idx.size
    model = ModelAssigner(zoo, class_split).assign(n)
    iter_time = np.array([m.iter_time_s for m in zoo.models])[model]
    a, b = window if window is not None else middle_half_window(n)
    if not 0 <= a < b <= n:
        raise WorkloadError(f"window {a}:{b} must satisfy 0 ≤ A < B ≤ {n}")
    ids = np.arange(n, dtype=np.int64)
    duration = trace.duration_s[idx]
    total_iters = np.ceil(duration / iter_time)
    run_time = total_iters * iter_time
    _refuse(source, ~(arrival_s <= MAX_SECONDS),
            lambda i: f"arrival_s={arrival_s[i]:g} s must be at most {MAX_SECONDS:g} s (about 31,700 years)")
    _refuse(source, total_iters > MAX_INTEGER,
            lambda i: f"total_iters={total_iters[i]:.15g} (duration {duration[i]:g} s / iter_time_s {iter_time[i]:g}) "
            f"must be at most 2^53 = {MAX_INTEGER}")
    _refuse(source, run_time > MAX_SECONDS,
            lambda i: f"run time {run_time[i]:.15g} s (duration {duration[i]:g} s in whole iterations of "
            f"{iter_time[i]:g} s) must be at most {MAX_SECONDS:g} s (about 31,700 years)")
    return Workload.build(
        zoo,
        job_id=ids,
        model=model,
        gpus=trace.gpus[idx],
        arrival_s=arrival_s,
        total_iters=total_iters,
        iter_time_s=iter_time,
        cpu_demand_per_gpu=trace.cpu_per_gpu[idx],
        mem_demand_per_gpu=trace.mem_per_gpu[idx],
        measured=(ids >= a) & (ids < b),
        run_until="all",
        source=source,
    )


def _column(source: str, name: str, values: ArrayLike, n: int | None = None) -> np.ndarray:
    """``values`` as a float array: a 1-D sequence of ``n`` numbers (any length if None); else a one-line error."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        shape = "a single value" if arr.ndim == 0 else f"shape {arr.shape}"
        raise WorkloadError(f"{source}: column {name} must be 1-D (one value per job), got {shape}")
    if n is not None and arr.size != n:
        raise WorkloadError(f"{source}: column {name} has {arr.size} values for {n} jobs (submit_s has {n})")
    if arr.dtype.kind not in "iuf":  # text, bools, dates, objects: each value must be a number (None: NaN)
        cells = arr.tolist()
        bad = [i for i, v in enumerate(cells) if not (v is None or is_number(v))]
        if bad:
            raise WorkloadError(f"{source}: job {bad[0]}: {name}={cells[bad[0]]!r} must be a number")
        return np.array([np.nan if v is None else v for v in cells], dtype=float)
    return arr.astype(float)


def _duration_range(source: str, value: object) -> tuple[float, float]:
    """``value`` as two numbers ``(shortest, longest)``; else a one-line error."""
    items = list(value) if isinstance(value, (tuple, list, np.ndarray)) else []
    if not (len(items) == 2 and all(is_number(x) and not np.isnan(x) for x in items)):
        raise WorkloadError(f"{source}: duration_range must be two numbers of seconds (shortest, longest), got {value!r}")
    if not items[0] < items[1]:  # a reversed range would leave every job out
        raise WorkloadError(f"{source}: duration_range {value!r} must give the shortest duration first, below the longest")
    return float(items[0]), float(items[1])


def path_argument(name: str, value: object, error: type[SynergyGymError] = WorkloadError) -> Path:
    """``value`` as a :class:`~pathlib.Path` if it is text, bytes or a path; else a one-line ``error`` naming ``name``."""
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    if not isinstance(value, (str, os.PathLike)) or (isinstance(value, str) and not value.strip()):
        raise error(f"{name} must be a file's path (text or a pathlib.Path), got {value!r}")
    try:
        return Path(value)
    except TypeError:  # a PathLike whose path is not text
        raise error(f"{name} must be a file's path (text or a pathlib.Path), got {value!r}") from None


def _refuse(source: str, bad: np.ndarray, what: Callable[[int], str]) -> None:
    """Fail on the first job where ``bad`` holds (its id is its position); ``what(i)`` says why."""
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise WorkloadError(f"{source}: job {i}: {what(i)}")


def to_workload(
    trace: TraceJobs,
    zoo: ModelZoo | None = None,
    class_split: tuple[float, float, float] = DEFAULT_SPLIT,
    max_jobs: int | None = None,
    window: tuple[int, int] | None = None,
    arrival_scale: float = 1.0,
) -> Workload:
    """The trace's first ``max_jobs`` jobs at their own submit times (× ``arrival_scale``).

    The arguments are checked as :class:`~synergy_gym.sim.generator.SyntheticWorkload` checks its own (a
    one-line :class:`WorkloadError` naming the argument): ``max_jobs`` a positive whole number, ``window`` two
    whole job positions, ``arrival_scale`` a finite number > 0; NumPy's numbers are taken as Python's.
    """
    max_jobs = check_positive("max_jobs", max_jobs, integer=True, allow_none=True, error=WorkloadError)
    if not (is_number(arrival_scale) and arrival_scale > 0 and math.isfinite(arrival_scale)):
        raise WorkloadError(f"arrival_scale must be a finite number > 0, got {arrival_scale!r}")
    zoo, window = _check_arguments(trace, zoo, class_split, window)
    n = len(trace) if max_jobs is None else min(max_jobs, len(trace))
    idx = np.arange(n)
    submit = trace.submit_s[idx]
    with np.errstate(over="ignore"):  # inf: refused below
        arrival = submit * arrival_scale
    _refuse(trace.source, ~(arrival <= MAX_SECONDS),
            lambda i: f"submit time {submit[i]:g} s × arrival_scale {arrival_scale:g} = {arrival[i]:g} s "
            f"must be at most {MAX_SECONDS:g} s (about 31,700 years)")
    return _to_workload(trace, zoo, arrival, idx, class_split, window, trace.source)


def sample_workload(
    trace: TraceJobs,
    num_jobs: int,
    jobs_per_hour: float,
    seed: int = 0,
    zoo: ModelZoo | None = None,
    class_split: tuple[float, float, float] = DEFAULT_SPLIT,
    window: tuple[int, int] | None = None,
) -> Workload:
    """``num_jobs`` jobs with (GPUs, duration, requested share) drawn from the trace, Poisson arrivals.

    The arguments are checked as :class:`~synergy_gym.sim.generator.SyntheticWorkload` checks its own, with its
    validators: ``num_jobs`` a positive whole number (at most :data:`~synergy_gym.sim.workload.MAX_JOBS`),
    ``jobs_per_hour`` a finite number ≥ :data:`~synergy_gym.sim.workload.MIN_JOBS_PER_HOUR`, ``seed`` a whole
    number ≥ 0, ``window`` two whole job positions; NumPy's numbers give what the same Python numbers give.
    """
    num_jobs = check_positive("num_jobs", num_jobs, integer=True, error=WorkloadError)
    if num_jobs > MAX_JOBS:  # as the env kwarg and the command line's --jobs
        raise WorkloadError(f"num_jobs {num_jobs} exceeds the maximum of {MAX_JOBS:,}")
    jobs_per_hour = check_jobs_per_hour(jobs_per_hour)
    seed = check_positive("seed", seed, integer=True, allow_zero=True, error=WorkloadError)
    zoo, window = _check_arguments(trace, zoo, class_split, window)
    rng_pick, rng_arrival = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    idx = rng_pick.integers(0, len(trace), num_jobs)
    arrival = np.cumsum(np.ceil(3600.0 * rng_arrival.exponential(1.0, num_jobs) / jobs_per_hour))
    return _to_workload(trace, zoo, arrival, idx, class_split, window, f"{trace.source} (sampled)")


def _check_arguments(
    trace: object, zoo: object, class_split: object, window: object
) -> tuple[ModelZoo, tuple[int, int] | None]:
    """The zoo (the default for None) and the window as two ints; a one-line :class:`WorkloadError` for a bad one."""
    if not isinstance(trace, TraceJobs):
        raise WorkloadError(f"trace must be a TraceJobs (load_trace(path) reads one), got {type(trace).__name__}")
    if zoo is None:
        zoo = ModelZoo.default()
    elif not isinstance(zoo, ModelZoo):
        raise WorkloadError(f"zoo must be a ModelZoo (e.g. ModelZoo.default()), got {type(zoo).__name__}")
    check_split(class_split)
    return zoo, None if window is None else _check_window(window)
