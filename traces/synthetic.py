"""Synthetic Philly-derived workloads, as in the Synergy paper.

* Fair-share duration: with probability 0.8, ``60·10^U(1.5, 3)`` s (32 min to
  17 h), otherwise ``60·10^U(3, 4)`` s (17 h to 7 days);
  ``total_iters = int(duration / iter_time)``.
* Poisson arrivals at ``jobs_per_hour``: inter-arrival ``ceil(3600·Exp(1)/λ)`` s.
* Task by the class split (default vision/language/speech = 20/70/10), models
  taking turns within a task (:mod:`traces.model_mix`).
* One GPU per job, or with ``multigpu`` a GPU count drawn from the Philly
  trace's mix (:mod:`traces.philly_gpu_mix`) up to ``max_gpus``.

Two shapes of run:

* open-ended (``num_jobs=None``, the paper's setting): jobs keep arriving
  until every job of the measured window – by default jobs 4000–4999 by arrival
  – has finished (:meth:`SyntheticWorkload.stream`);
* ``num_jobs=N``: exactly N jobs, the window defaults to the middle half by
  arrival (jobs ``N//4`` to ``3N//4 - 1``) and the run ends when all N finish.

``window=(a, b)`` overrides the window (jobs a..b-1). Random numbers come from
``numpy.random.Generator`` streams seeded by ``seed`` – one stream per
quantity, so the first N jobs are the same however the workload is cut into
chunks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from synergy_gym.errors import WorkloadError
from synergy_gym.profiles import ModelZoo
from synergy_gym.workload import Workload
from traces.model_mix import DEFAULT_SPLIT, ModelAssigner, check_split
from traces.philly_gpu_mix import gpu_mix

#: The paper's measured window: jobs 4000–4999.
DEFAULT_WINDOW: tuple[int, int] = (4000, 5000)
_CHUNK = 2048


def middle_half(num_jobs: int) -> tuple[int, int]:
    """Window of the middle half of ``num_jobs`` jobs (never empty)."""
    start = num_jobs // 4
    return start, max(start + 1, (3 * num_jobs) // 4)


@dataclass(frozen=True)
class SyntheticWorkload:
    """Parameters of a synthetic workload; :meth:`build` or :meth:`stream` makes it."""

    jobs_per_hour: float = 9.0
    seed: int = 42
    class_split: tuple[float, float, float] = DEFAULT_SPLIT
    multigpu: bool = False
    max_gpus: int = 128
    num_jobs: int | None = None
    window: tuple[int, int] | None = None
    short_job_fraction: float = 0.8

    def __post_init__(self) -> None:
        if not (isinstance(self.jobs_per_hour, (int, float)) and math.isfinite(self.jobs_per_hour) and self.jobs_per_hour > 0):
            raise WorkloadError(f"jobs_per_hour must be a positive number, got {self.jobs_per_hour!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise WorkloadError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.num_jobs is not None and (isinstance(self.num_jobs, bool) or not isinstance(self.num_jobs, (int, np.integer)) or self.num_jobs < 1):
            raise WorkloadError(f"num_jobs must be a positive integer, got {self.num_jobs!r}")
        if not 0 <= self.short_job_fraction <= 1:
            raise WorkloadError(f"short_job_fraction must be in [0, 1], got {self.short_job_fraction!r}")
        if isinstance(self.max_gpus, bool) or not isinstance(self.max_gpus, (int, np.integer)) or self.max_gpus < 1:
            raise WorkloadError(f"max_gpus must be a positive integer, got {self.max_gpus!r}")
        a, b = self.resolved_window
        limit = self.num_jobs
        if not (0 <= a < b) or (limit is not None and b > limit):
            bound = f"0 ≤ A < B ≤ {limit}" if limit is not None else "0 ≤ A < B"
            raise WorkloadError(f"window {a}:{b} must satisfy {bound}")
        check_split(self.class_split)

    @property
    def resolved_window(self) -> tuple[int, int]:
        if self.window is not None:
            return (int(self.window[0]), int(self.window[1]))
        if self.num_jobs is not None:
            return middle_half(self.num_jobs)
        return DEFAULT_WINDOW

    def build(self, zoo: ModelZoo | None = None) -> Workload:
        """The whole workload: ``num_jobs`` jobs, or just up to the window's end if open-ended."""
        gen = _Generator(self, zoo or ModelZoo.default())
        count = self.num_jobs if self.num_jobs is not None else self.resolved_window[1]
        return gen.chunk(count, run_until="all" if self.num_jobs is not None else "window")

    def stream(self, zoo: ModelZoo | None = None) -> tuple[Workload, Iterator[Workload] | None]:
        """The first jobs (through the window) and an endless, picklable iterator of further jobs.

        With ``num_jobs`` set there are no further jobs (None).
        """
        gen = _Generator(self, zoo or ModelZoo.default())
        if self.num_jobs is not None:
            return gen.chunk(self.num_jobs, run_until="all"), None
        first = gen.chunk(self.resolved_window[1], run_until="window")
        return first, gen


class _Generator:
    """Draws jobs chunk by chunk; as an iterator it yields further chunks forever."""

    def __init__(self, spec: SyntheticWorkload, zoo: ModelZoo) -> None:
        self.spec = spec
        self.zoo = zoo
        seeds = np.random.SeedSequence(spec.seed).spawn(4)
        self.rng_arrival, self.rng_kind, self.rng_duration, self.rng_gpus = (np.random.default_rng(s) for s in seeds)
        self.assigner = ModelAssigner(zoo, spec.class_split)
        self.next_id = 0
        self.clock = 0.0
        self.gpu_counts, self.gpu_probs = gpu_mix(spec.max_gpus)
        self.iter_time = np.array([m.iter_time_s for m in zoo.models])

    def chunk(self, n: int, run_until: str = "window") -> Workload:
        spec = self.spec
        gaps = np.ceil(3600.0 * self.rng_arrival.exponential(1.0, n) / spec.jobs_per_hour)
        arrival = self.clock + np.cumsum(gaps)
        self.clock = float(arrival[-1])
        short = self.rng_kind.random(n) < spec.short_job_fraction
        u = self.rng_duration.random(n)
        exponent = np.where(short, 1.5 + 1.5 * u, 3.0 + u)
        duration = 60.0 * np.power(10.0, exponent)
        if spec.multigpu:
            gpus = self.gpu_counts[np.searchsorted(np.cumsum(self.gpu_probs), self.rng_gpus.random(n), side="right").clip(max=len(self.gpu_counts) - 1)]
        else:
            gpus = np.ones(n, dtype=np.int64)
        model = self.assigner.assign(n)
        iter_time = self.iter_time[model]
        total_iters = np.floor(duration / iter_time)  # ≥ 2,400: the shortest job lasts 1,897 s
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        a, b = spec.resolved_window
        return Workload.build(
            self.zoo,
            job_id=ids,
            model=model,
            gpus=gpus,
            arrival_s=arrival,
            total_iters=total_iters,
            iter_time_s=iter_time,
            measured=(ids >= a) & (ids < b),
            run_until=run_until,  # type: ignore[arg-type]
            source="synthetic workload",
        )

    def __iter__(self) -> "_Generator":
        return self

    def __next__(self) -> Workload:
        return self.chunk(_CHUNK)
