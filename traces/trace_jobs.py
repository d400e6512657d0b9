"""Jobs read from a real cluster trace, and the two ways of turning them into a workload.

Every trace loader returns :class:`TraceJobs`: submit times (from 0, sorted),
durations, GPU counts and – where the trace has them – the CPUs and memory per
GPU the job requested. Rows a loader cannot use (a missing field, a bad
timestamp, a duration ≤ 0, no GPU) are **skipped and counted**: one
:class:`TraceWarning` per file gives the counts by reason; another counts the
jobs a duration filter left out (the paper's, for Philly traces). So are rows beyond
the limits of a workload file (:mod:`synergy_gym.traces.workload_columns`): a
submit time beyond ±:data:`MAX_SECONDS`, a duration over it, a GPU count over
2^53. A file that is not a trace of that format (missing columns, unreadable,
no usable job, kept submit times spanning more than :data:`MAX_SECONDS`) is
**rejected** with a one-line error.

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
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from synergy_gym.errors import WorkloadError
from synergy_gym.sim.model_mix import DEFAULT_SPLIT, ModelAssigner
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.workload import MAX_INTEGER, Workload, middle_half_window
from synergy_gym.traces.workload_columns import MAX_SECONDS

#: The paper's simulator keeps Philly jobs lasting between 60·10^1.5 s (31.6 min) and 60·10^4 s (6.9 days).
REFERENCE_DURATION_RANGE_S: tuple[float, float] = (60 * 10**1.5, 60 * 10**4)


class TraceWarning(UserWarning):
    """Rows of a trace were skipped; the message counts them by reason."""


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
        """Sort by submit time, apply the duration filter, warn about skipped rows."""
        submit = np.asarray(submit_s, dtype=float)
        n = submit.size
        duration = np.asarray(duration_s, dtype=float)
        gpu_count = np.asarray(gpus, dtype=float)
        cpu = np.full(n, np.nan) if cpu_per_gpu is None else np.asarray(cpu_per_gpu, dtype=float)
        mem = np.full(n, np.nan) if mem_per_gpu is None else np.asarray(mem_per_gpu, dtype=float)
        skipped = dict(skipped or {})
        keep = np.ones(n, dtype=bool)
        for reason, bad in (  # the limits of a workload file, so that no later sum or int64 cast overflows
            (f"submit time beyond ±{MAX_SECONDS:g} s", ~(np.abs(submit) <= MAX_SECONDS)),
            (f"duration over {MAX_SECONDS:g} s", ~(duration <= MAX_SECONDS)),
            ("GPU count over 2^53", ~(gpu_count <= MAX_INTEGER)),
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
            shortest, longest = (f"{x / 60:.1f} min" if x < 86400 else f"{x / 86400:.1f} days"
                                 for x in duration_range or (0, 0))
            warnings.warn(
                f"{source}: left out {filtered:,} of {filtered + int(keep.sum()):,} job(s) lasting outside the paper's "
                f"range of {shortest} to {longest} (compare and trace-stats --all-durations, or load_trace(path, "
                "philly_duration_filter=False), keep them)", TraceWarning, stacklevel=3,
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
    """The trace's first ``max_jobs`` jobs at their own submit times (× ``arrival_scale``)."""
    if max_jobs is not None and max_jobs < 1:
        raise WorkloadError(f"max_jobs must be a positive integer, got {max_jobs!r}")
    if not (arrival_scale > 0 and math.isfinite(arrival_scale)):
        raise WorkloadError(f"arrival_scale must be a finite number > 0, got {arrival_scale!r}")
    n = len(trace) if max_jobs is None else min(max_jobs, len(trace))
    idx = np.arange(n)
    submit = trace.submit_s[idx]
    with np.errstate(over="ignore"):  # inf: refused below
        arrival = submit * arrival_scale
    _refuse(trace.source, ~(arrival <= MAX_SECONDS),
            lambda i: f"submit time {submit[i]:g} s × arrival_scale {arrival_scale:g} = {arrival[i]:g} s "
            f"must be at most {MAX_SECONDS:g} s (about 31,700 years)")
    return _to_workload(trace, zoo or ModelZoo.default(), arrival, idx, class_split, window, trace.source)


def sample_workload(
    trace: TraceJobs,
    num_jobs: int,
    jobs_per_hour: float,
    seed: int = 0,
    zoo: ModelZoo | None = None,
    class_split: tuple[float, float, float] = DEFAULT_SPLIT,
    window: tuple[int, int] | None = None,
) -> Workload:
    """``num_jobs`` jobs with (GPUs, duration, requested share) drawn from the trace, Poisson arrivals."""
    if num_jobs < 1:
        raise WorkloadError(f"num_jobs must be a positive integer, got {num_jobs!r}")
    if not jobs_per_hour > 0:
        raise WorkloadError(f"jobs_per_hour must be > 0, got {jobs_per_hour!r}")
    rng_pick, rng_arrival = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    idx = rng_pick.integers(0, len(trace), num_jobs)
    arrival = np.cumsum(np.ceil(3600.0 * rng_arrival.exponential(1.0, num_jobs) / jobs_per_hour))
    return _to_workload(trace, zoo or ModelZoo.default(), arrival, idx, class_split, window,
                        f"{trace.source} (sampled)")
