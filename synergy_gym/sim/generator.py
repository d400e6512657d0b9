"""Synthetic Philly-derived workloads, drawn exactly as the Synergy paper's simulator draws them.

* Fair-share duration: with probability 0.8, ``60·10^U(1.5, 3)`` s (32 min to
  17 h), otherwise ``60·10^U(3, 4)`` s (17 h to 7 days);
  ``total_iters = int(duration / iter_time)``.
* Poisson arrivals at ``jobs_per_hour``: inter-arrival ``ceil(3600·Exp(1)/λ)`` s.
* Task by the class split (default vision/language/speech = 20/70/10), models
  taking turns within a task (:mod:`synergy_gym.sim.model_mix`).
* One GPU per job, or with ``multigpu`` a GPU count drawn from the Philly
  trace's mix (:mod:`synergy_gym.sim.philly_gpu_mix`) up to ``max_gpus``.

**The random stream is the paper's.** The authors' simulator (msr-fiddle/synergy,
MIT licence) draws with Python's :mod:`random` (Mersenne Twister) seeded with
``random.seed(seed)``, in two passes over the same seed, which this module
reproduces with two :class:`random.Random` instances:

* the *size* stream: per job ``random()`` (long or short job) then
  ``uniform(lo, hi)`` (the exponent of its duration); with ``multigpu`` a third
  ``random()`` picks the GPU count (this draw is ours: the paper's single-GPU
  workloads make none, so single-GPU workloads stay the paper's exactly);
* the *arrival* stream: per job ``random()`` (the inter-arrival time) then
  ``randint(0, len(zoo) - 1)`` (a model class draw the reference makes and then
  overrides with its split-tracking assignment; it is kept because it advances
  the stream).

So ``SyntheticWorkload(jobs_per_hour=9, seed=42)`` is, job for job (arrival,
duration, model, GPUs), the authors' ``workload_single_gpu_load9.csv``, and the
same holds at 5 and 7 jobs/h (a test checks this when ``../shared`` is present).

Two shapes of run:

* open-ended (``num_jobs=None``, the paper's setting): jobs keep arriving
  until every job of the measured window – by default jobs 4000–4999 by arrival
  – has finished (:meth:`SyntheticWorkload.stream`);
* ``num_jobs=N``: exactly N jobs, the window defaults to the middle half by
  arrival (jobs ``N//4`` to ``3N//4 - 1``) and the run ends when all N finish.

``window=(a, b)`` overrides the window (jobs a..b-1). The first N jobs are the
same however the workload is cut into chunks.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from synergy_gym.errors import WorkloadError
from synergy_gym.sim.model_mix import DEFAULT_SPLIT, ModelAssigner, check_split
from synergy_gym.sim.philly_gpu_mix import gpu_mix
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.validation import check_flag, check_positive, is_number, whole_number
from synergy_gym.sim.workload import MAX_JOBS, Workload, check_jobs_per_hour, middle_half_window

#: The paper's measured window: jobs 4000–4999.
DEFAULT_WINDOW: tuple[int, int] = (4000, 5000)
_CHUNK = 2048


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
        check_jobs_per_hour(self.jobs_per_hour)
        object.__setattr__(self, "seed", check_positive("seed", self.seed, integer=True, allow_zero=True, error=WorkloadError))
        object.__setattr__(
            self, "num_jobs", check_positive("num_jobs", self.num_jobs, integer=True, allow_none=True, error=WorkloadError)
        )
        if self.num_jobs is not None and self.num_jobs > MAX_JOBS:  # as the env kwarg and the command line's --jobs
            raise WorkloadError(f"num_jobs {self.num_jobs} exceeds the maximum of {MAX_JOBS:,}")
        fraction = self.short_job_fraction
        if not (is_number(fraction) and 0 <= fraction <= 1):
            raise WorkloadError(f"short_job_fraction must be in [0, 1], got {fraction!r}")
        object.__setattr__(self, "multigpu", check_flag("multigpu", self.multigpu, WorkloadError))
        object.__setattr__(self, "max_gpus", check_positive("max_gpus", self.max_gpus, integer=True, error=WorkloadError))
        if self.window is not None:
            object.__setattr__(self, "window", _check_window(self.window))
        a, b = self.resolved_window
        limit = self.num_jobs
        if not (0 <= a < b) or (limit is not None and b > limit):
            bound = f"0 ≤ A < B ≤ {limit}" if limit is not None else "0 ≤ A < B"
            raise WorkloadError(f"window {a}:{b} must satisfy {bound}")
        if b > MAX_JOBS:  # an open-ended workload is generated up to the window's end
            raise WorkloadError(f"window {a}:{b} ends past the most jobs a workload may have, {MAX_JOBS:,}")
        object.__setattr__(self, "class_split", check_split(self.class_split))

    @property
    def resolved_window(self) -> tuple[int, int]:
        if self.window is not None:
            return self.window
        if self.num_jobs is not None:
            return middle_half_window(self.num_jobs)
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


def _check_window(window) -> tuple[int, int]:
    """``window`` as two whole job positions ``(A, B)`` (their range is checked by the caller); else a one-line error."""
    pair = isinstance(window, (tuple, list, np.ndarray)) and len(window) == 2
    if not (pair and all(whole_number(w) is not None for w in window)):
        raise WorkloadError(f"window {window!r} must be two whole job positions (A, B): jobs A..B-1 by arrival")
    return int(window[0]), int(window[1])


class _Generator:
    """Draws jobs chunk by chunk; as an iterator it yields further chunks forever (picklable)."""

    def __init__(self, spec: SyntheticWorkload, zoo: ModelZoo) -> None:
        self.spec = spec
        self.zoo = zoo
        seed = int(spec.seed)
        self.size_rng = random.Random(seed)
        self.arrival_rng = random.Random(seed)
        self.assigner = ModelAssigner(zoo, spec.class_split)
        self.next_id = 0
        self.clock = 0
        counts, probs = gpu_mix(spec.max_gpus)
        self.gpu_counts = [int(g) for g in counts]
        self.gpu_cdf = np.cumsum(probs).tolist()
        self.iter_time = [m.iter_time_s for m in zoo.models]

    def chunk(self, n: int, run_until: str = "window") -> Workload:
        spec = self.spec
        multigpu = spec.multigpu
        rate = float(spec.jobs_per_hour)
        short = spec.short_job_fraction
        arrival_draw = self.arrival_rng.random
        class_bits = self.arrival_rng.getrandbits
        n_classes = len(self.zoo)
        k = n_classes.bit_length()
        size_draw = self.size_rng.random
        gpu_cdf, gpu_counts = self.gpu_cdf, self.gpu_counts
        last_count = len(gpu_counts) - 1
        arrival: list[int] = []
        duration: list[float] = []
        gpus = np.ones(n, dtype=np.int64)
        clock = self.clock
        # The reference's draws and order of operations (so that ceil() rounds alike), inlined:
        # ``randint(0, n - 1)`` is CPython's rejection loop over ``getrandbits(n.bit_length())``, and
        # ``uniform(a, b)`` is ``a + (b - a) * random()`` (a test checks both against :mod:`random`).
        for i in range(n):
            clock += math.ceil(-math.log(1.0 - arrival_draw()) / rate * 60 * 60)
            while class_bits(k) >= n_classes:  # the model class draw: kept because it advances the stream
                pass
            arrival.append(clock)
            if size_draw() >= short:  # long job: 10^U(3, 4) minutes
                duration.append(60.0 * (10.0 ** (3.0 + (4.0 - 3.0) * size_draw())))
            else:
                duration.append(60.0 * (10.0 ** (1.5 + (3.0 - 1.5) * size_draw())))
            if multigpu:
                gpus[i] = gpu_counts[min(bisect_right(gpu_cdf, size_draw()), last_count)]
        self.clock = clock
        model = self.assigner.assign(n)
        iter_time = np.asarray(self.iter_time)[model]
        total_iters = np.array([int(d / t) for d, t in zip(duration, iter_time.tolist())], dtype=np.int64)
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        a, b = spec.resolved_window
        return Workload.build(
            self.zoo,
            job_id=ids,
            model=model,
            gpus=gpus,
            arrival_s=np.array(arrival, dtype=np.float64),
            total_iters=total_iters,  # ≥ 2,400: the shortest job lasts 1,897 s
            iter_time_s=iter_time,
            measured=(ids >= a) & (ids < b),
            run_until=run_until,  # type: ignore[arg-type]
            source="synthetic workload",
        )

    def __iter__(self) -> _Generator:
        return self

    def __next__(self) -> Workload:
        return self.chunk(_CHUNK)
