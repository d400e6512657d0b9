"""Workloads: the jobs a simulation runs, as columns of numpy arrays.

A :class:`Workload` is immutable (its columns are read-only arrays), validated and
sorted by arrival time (ties by job id). The paper's generator is :mod:`synergy_gym.sim.generator`; loaders of
traces and replay files live in the ``traces`` package; this module only
defines what a workload is.

Jobs carry a *measured window* (``measured``): the jobs whose completion times
the summary statistics are computed over. ``run_until`` says when a run ends:

* ``"window"`` – when every measured job has finished (later jobs only add
  load, as in the paper's simulator, which measures jobs 4000–4999);
* ``"all"`` – when every job of the workload has finished.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from synergy_gym.errors import SynergyGymError, WorkloadError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.profiles import ModelZoo, capped_demand_per_gpu
from synergy_gym.sim.validation import check_positive, is_number, whole_number

RunUntil = Literal["window", "all"]

#: The most jobs one generated workload may have (``--jobs`` of ``compare`` and
#: ``sweep``, the env kwarg ``num_jobs``); larger counts are refused before
#: anything runs, instead of failing later on an impossible allocation.
MAX_JOBS = 1_000_000
#: The lowest arrival rate a generated workload may have, in jobs an hour (one job per 114 years on average):
#: even ``MAX_JOBS`` jobs then arrive within float64's exact seconds, and the rounds between two arrivals fit in
#: int64. Lower rates are refused (:func:`check_jobs_per_hour`).
MIN_JOBS_PER_HOUR = 1e-6
#: The largest whole number a workload may hold, and so the most iterations a job may run (2^53: every
#: integer up to it is exact as a float, as the job table keeps progress).
MAX_INTEGER = 2**53
#: The latest arrival and the longest run time (iter_time_s × total_iters) a workload may hold, in seconds
#: (2^52 s, about 143 million years): their sum stays within float64's exact seconds (2^53), where a later time
#: would lose whole seconds. (Workload files and traces have a stricter limit, 10^12 s.)
MAX_TIME_S = float(2**52)

#: More jobs for a run that needs them: each item extends the workload.
JobStream = Iterator["Workload"]


def middle_half_window(num_jobs: int) -> tuple[int, int]:
    """The default measured window of ``num_jobs`` jobs: the middle half by arrival, never empty.

    Jobs ``num_jobs // 4`` up to (not including) ``3 * num_jobs // 4``, and at
    least the one job ``num_jobs // 4``.
    """
    start = num_jobs // 4
    return start, max(start + 1, (3 * num_jobs) // 4)


def check_jobs_per_hour(value: Any, name: str = "jobs_per_hour", error: type[SynergyGymError] = WorkloadError) -> float:
    """``value`` as a float if it is a finite arrival rate of at least :data:`MIN_JOBS_PER_HOUR`, else an ``error``
    naming ``name`` and the value."""
    rate = check_positive(name, value, error=error)
    if rate < MIN_JOBS_PER_HOUR:
        raise error(f"{name} {value!r} is below the minimum of {MIN_JOBS_PER_HOUR:g} jobs an hour")
    return rate

@dataclass(frozen=True, eq=False)
class Workload:
    """Jobs as parallel arrays (use :meth:`build` to construct one)."""

    zoo: ModelZoo
    job_id: np.ndarray  # int64, unique
    model: np.ndarray  # int64 index into ``zoo``
    gpus: np.ndarray  # int64 ≥ 1
    arrival_s: np.ndarray  # float64 ≥ 0, non-decreasing
    iter_time_s: np.ndarray  # float64 > 0, at the fair share
    total_iters: np.ndarray  # int64 ≥ 1
    cpu_demand_per_gpu: np.ndarray  # float64; NaN = the model's demand
    mem_demand_per_gpu: np.ndarray  # float64; NaN = the model's demand
    measured: np.ndarray  # bool
    run_until: RunUntil = "window"

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled or deep-copied (a vector env's worker, a sweep's cell): the columns read-only again."""
        for name, value in state.items():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(self, name, value)

    @classmethod
    def build(
        cls,
        zoo: ModelZoo,
        *,
        job_id,
        model,
        gpus,
        arrival_s,
        total_iters,
        iter_time_s=None,
        cpu_demand_per_gpu=None,
        mem_demand_per_gpu=None,
        measured=None,
        run_until: RunUntil = "window",
        source: str = "workload",
    ) -> Workload:
        """Validate, fill defaults (model iteration time and demand) and sort by arrival.

        Every column is a 1-D sequence with one value per job: numbers (``measured``: bools, or 0 and 1).
        """
        if not isinstance(zoo, ModelZoo):
            raise WorkloadError(f"{source}: zoo must be a ModelZoo (e.g. ModelZoo.default()), got {type(zoo).__name__}")
        model = _as_given(model)
        if model.ndim != 1:
            raise WorkloadError(f"{source}: column model must be 1-D (one model index per job), got {_shape(model)}")
        n = len(model)
        if n == 0:
            raise WorkloadError(f"{source}: no jobs")

        def col(name, value, dtype, default):
            arr = np.full(n, default, dtype=dtype) if value is None else _as_given(value)
            if arr.ndim != 1:
                raise WorkloadError(f"{source}: column {name} must be 1-D (one value per job), got {_shape(arr)}")
            if arr.shape != (n,):
                raise WorkloadError(f"{source}: column {name} has {arr.shape[0]} values for {n} jobs")
            return arr

        job_id = _whole(source, "job_id", col("job_id", job_id, np.int64, 0))
        if np.any(job_id < 0):  # as the CSV reader refuses them (a job's profiling noise is seeded with its id)
            raise WorkloadError(f"{source}: job_id={int(job_id[np.flatnonzero(job_id < 0)[0]])} must be a non-negative "
                                "integer")
        model = _whole(source, "model index", model, job_id)

        def numbers(name, value, dtype, default):
            return _numbers(source, name, col(name, value, dtype, default), job_id)

        gpus = numbers("gpus", gpus, np.int64, 1)
        arrival_s = numbers("arrival_s", arrival_s, np.float64, 0.0).astype(np.float64)
        total_iters = numbers("total_iters", total_iters, np.float64, 1)
        model_iter = np.array([m.iter_time_s for m in zoo.models])
        if np.any((model < 0) | (model >= len(zoo))):
            bad = int(np.flatnonzero((model < 0) | (model >= len(zoo)))[0])
            raise WorkloadError(f"{source}: job {job_id[bad]}: model index {model[bad]} is not in the zoo")
        iter_time_s = numbers("iter_time_s", iter_time_s, np.float64, np.nan).astype(np.float64)
        iter_time_s = np.where(np.isnan(iter_time_s), model_iter[model], iter_time_s)
        cpu = numbers("cpu_demand_per_gpu", cpu_demand_per_gpu, np.float64, np.nan).astype(np.float64)
        mem = numbers("mem_demand_per_gpu", mem_demand_per_gpu, np.float64, np.nan).astype(np.float64)
        measured = _flags(source, "measured", col("measured", measured, bool, True), job_id)

        _check(source, job_id, "gpus", gpus, (gpus >= 1) & (gpus == np.floor(gpus)), "must be a positive integer")
        _check(source, job_id, "gpus", gpus, gpus <= MAX_INTEGER, "must be at most 2**53")  # (int64 holds it exactly)
        _check(source, job_id, "arrival_s", arrival_s, np.isfinite(arrival_s) & (arrival_s >= 0), "must be ≥ 0")
        _check(source, job_id, "arrival_s", arrival_s, arrival_s <= MAX_TIME_S, "must be at most 2**52 s")
        _check(
            source, job_id, "total_iters", total_iters,
            np.isfinite(total_iters) & (total_iters >= 1) & (total_iters == np.floor(total_iters))
            & (total_iters <= MAX_INTEGER),
            "must be a positive integer up to 2**53 (is the duration negative, zero or too long?)",
        )
        _check(source, job_id, "iter_time_s", iter_time_s, np.isfinite(iter_time_s) & (iter_time_s > 0), "must be > 0")
        _check(source, job_id, "run time iter_time_s × total_iters", iter_time_s * total_iters,
               iter_time_s * total_iters <= MAX_TIME_S, "must be at most 2**52 s")
        _check(source, job_id, "cpu_demand", cpu, np.isnan(cpu) | (np.isfinite(cpu) & (cpu > 0)), "must be finite and > 0")
        _check(source, job_id, "mem_demand_gb", mem, np.isnan(mem) | (np.isfinite(mem) & (mem > 0)), "must be finite and > 0")
        if len(np.unique(job_id)) != n:
            dup = job_id[np.flatnonzero(np.diff(np.sort(job_id)) == 0)[0]]
            raise WorkloadError(f"{source}: job_id {dup} appears more than once")
        if run_until not in ("window", "all"):
            raise WorkloadError(f"{source}: run_until must be 'window' or 'all', got {run_until!r}")

        order = np.lexsort((job_id, arrival_s))
        return cls(
            zoo=zoo,
            run_until=run_until,
            **_read_only(
                job_id=job_id[order].astype(np.int64),
                model=model[order],
                gpus=gpus[order].astype(np.int64),
                arrival_s=arrival_s[order],
                iter_time_s=iter_time_s[order],
                total_iters=total_iters[order].astype(np.int64),
                cpu_demand_per_gpu=cpu[order],
                mem_demand_per_gpu=mem[order],
                measured=measured[order],
            ),
        )

    def __len__(self) -> int:
        return len(self.job_id)

    @property
    def model_names(self) -> np.ndarray:
        return np.asarray(self.zoo.names, dtype=object)[self.model]

    @property
    def fair_duration_s(self) -> np.ndarray:
        """Run time of each job at its fair share, in seconds."""
        return self.total_iters * self.iter_time_s

    def demand_per_gpu(self, cluster: ClusterSpec) -> tuple[np.ndarray, np.ndarray]:
        """Best-case (CPUs, GB) per GPU of each job on ``cluster``, capped at one server."""
        cpu_model = np.array([m.demand_cpus_per_gpu for m in self.zoo.models])[self.model]
        mem_model = np.array([m.demand_mem_gb_per_gpu for m in self.zoo.models])[self.model]
        cpu = np.where(np.isnan(self.cpu_demand_per_gpu), cpu_model, self.cpu_demand_per_gpu)
        mem = np.where(np.isnan(self.mem_demand_per_gpu), mem_model, self.mem_demand_per_gpu)
        return (
            capped_demand_per_gpu(cpu, self.gpus, cluster.fair_cpus_per_gpu, cluster.cpus_per_server),
            capped_demand_per_gpu(mem, self.gpus, cluster.fair_mem_gb_per_gpu, cluster.mem_gb_per_server),
        )

    def check_window(self, source: str = "workload") -> None:
        """Reject a workload that runs until its window is done but has no measured job."""
        if self.run_until == "window" and not self.measured.any():
            raise WorkloadError(f"{source}: the measured window is empty (no job has in_measured_window=1)")

    def check_fits(self, cluster: ClusterSpec, source: str | None = None) -> None:
        """Reject jobs that ask for more GPUs than the cluster has; ``source`` (the file) starts the message."""
        too_big = self.gpus > cluster.total_gpus
        if too_big.any():
            i = int(np.flatnonzero(too_big)[0])
            where = f"{source}: " if source else ""
            count = int(np.count_nonzero(too_big))
            more = f"; {count:,} of the {len(self):,} jobs ask for more than {cluster.total_gpus}" if count > 1 else ""
            raise WorkloadError(
                f"{where}job {self.job_id[i]} asks for {self.gpus[i]} GPUs but the cluster has {cluster.total_gpus} "
                f"(it arrives at {self.arrival_s[i]:,.0f} s){more}"
            )

    def concat(self, more: Workload) -> Workload:
        """This workload followed by ``more`` (whose jobs must arrive no earlier; a job arriving with this one's last
        must have a larger job id, as :class:`Workload`'s order is by arrival, ties by job id)."""
        if not isinstance(more, Workload):
            raise WorkloadError(f"a workload extension must be a Workload, got {type(more).__name__}")
        if more.zoo is not self.zoo and more.zoo.names != self.zoo.names:
            raise WorkloadError("cannot join workloads over different model zoos")
        if len(more) and len(self) and more.arrival_s[0] < self.arrival_s[-1]:
            raise WorkloadError("a workload extension must arrive after the jobs it extends")
        if len(more) and len(self) and more.arrival_s[0] == self.arrival_s[-1] and more.job_id[0] < self.job_id[-1]:
            raise WorkloadError(  # the joined jobs would not be in Workload's order (arrival, ties by job id)
                f"a workload extension's first job (job_id {more.job_id[0]}) arrives with the last job it extends "
                f"(job_id {self.job_id[-1]}, at {self.arrival_s[-1]:g} s) and must have a larger job_id")
        if len(more) and len(self) and more.job_id.min() <= self.job_id.max():  # (ids that grow need no search)
            shared = np.intersect1d(self.job_id, more.job_id)
            if shared.size:
                raise WorkloadError(f"a workload extension repeats job_id {shared[0]} of the jobs it extends")
        parts = {
            name: np.concatenate([getattr(self, name), getattr(more, name)])
            for name in (
                "job_id", "model", "gpus", "arrival_s", "iter_time_s", "total_iters",
                "cpu_demand_per_gpu", "mem_demand_per_gpu", "measured",
            )
        }
        return Workload(zoo=self.zoo, run_until=self.run_until, **_read_only(**parts))


def _whole(source: str, field: str, values: np.ndarray, job_id: np.ndarray | None = None) -> np.ndarray:
    """``values`` as int64 if every one is a whole number within int64's range (job ids, model indices)."""
    if values.dtype.kind == "i":
        return values.astype(np.int64)
    i = 0  # (not numbers at all: the first is named)
    if values.dtype.kind == "u":  # unsigned: only values below 2**63 fit int64 (2**64 - 1 would become -1)
        ok = values <= np.iinfo(np.int64).max
        if np.all(ok):
            return values.astype(np.int64)
        i = int(np.flatnonzero(~ok)[0])
    elif values.dtype.kind == "f":
        ok = np.isfinite(values) & (values == np.floor(values)) & (np.abs(values) < 2.0**63)
        if np.all(ok):
            return values.astype(np.int64)
        i = int(np.flatnonzero(~ok)[0])
    elif values.dtype.kind == "O":  # a list mixing text and numbers: the first value that is not a whole number
        whole = [whole_number(v) is not None and abs(v) < 2.0**63 for v in values.tolist()]
        if all(whole):
            return np.array([int(v) for v in values.tolist()], dtype=np.int64)
        i = whole.index(False)
    job = f"job {job_id[i]}: " if job_id is not None else ""
    raise WorkloadError(f"{source}: {job}{field} must be a whole number below 2**63, got {_plain(values[i])!r}")


def _numbers(source: str, name: str, values: np.ndarray, job_id: np.ndarray) -> np.ndarray:
    """``values`` if it holds numbers (``None`` in a list counts as NaN); else a one-line error naming the job."""
    if values.dtype.kind in "iuf":
        return values
    if values.dtype.kind == "O":
        number = [v is None or is_number(v) for v in values.tolist()]
        if all(number):
            return np.array([np.nan if v is None else v for v in values.tolist()], dtype=np.float64)
        i = number.index(False)
    else:  # strings, bools, dates: not numbers
        i = 0
    raise WorkloadError(f"{source}: job {job_id[i]}: {name}={_plain(values[i])!r} must be a number")


def _flags(source: str, name: str, values: np.ndarray, job_id: np.ndarray) -> np.ndarray:
    """``values`` as bools if each is a bool or the number 0 or 1; else a one-line error naming the job."""
    if values.dtype.kind == "b":
        return values
    if values.dtype.kind in "iuf":
        ok = (values == 0) | (values == 1)
    else:
        flags = [isinstance(v, (bool, np.bool_)) or (is_number(v) and v in (0, 1)) for v in values.tolist()]
        ok = np.array(flags, dtype=bool)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise WorkloadError(f"{source}: job {job_id[i]}: {name}={_plain(values[i])!r} must be True/False (or 1/0)")
    return np.array([bool(v) for v in values.tolist()], dtype=bool) if values.dtype.kind == "O" else values == 1


def _as_given(value: Any) -> np.ndarray:
    """A column as an array; a list mixing text, or bools, with numbers keeps each value as given (an object array:
    NumPy would read ``[True, 1]`` as ``[1, 1]``), so that the error names the job whose value is no number."""
    arr = np.asarray(value)
    if not isinstance(value, np.ndarray) and (arr.dtype.kind in "US" or (
            arr.dtype.kind in "iuf" and isinstance(value, (list, tuple)) and any(isinstance(v, (bool, np.bool_))
                                                                                for v in value))):
        return np.asarray(value, dtype=object)
    return arr


def _shape(values: np.ndarray) -> str:
    return f"the single value {_plain(values[()])!r}" if values.ndim == 0 else f"shape {values.shape}"


def _plain(value):
    """A cell as the Python value it came from (``'1'``, not ``np.str_('1')``), for messages."""
    return value.item() if isinstance(value, np.generic) else value


def _read_only(**columns: np.ndarray) -> dict[str, np.ndarray]:
    """The columns of a new workload, made read-only: a workload is immutable, and its checks stay true."""
    for values in columns.values():
        values.setflags(write=False)
    return columns


def _check(source: str, job_id: np.ndarray, field: str, values: np.ndarray, ok: np.ndarray, what: str) -> None:
    if not np.all(ok):
        i = int(np.flatnonzero(~ok)[0])
        raise WorkloadError(f"{source}: job {job_id[i]}: {field}={values[i]:g} {what}")
