"""What a simulation reports: per-job times, per-round utilisation, a summary.

JCT statistics are over the measured window (the jobs whose ``measured`` flag
is set), computed by :func:`summarise_jcts` (which the Gymnasium environment's
episode summary uses too); ``makespan_h`` is the time from the first arrival to the last
completion of the run. Utilisation is the share of the cluster's GPUs, CPUs and
memory allocated, averaged over the run's simulated time (from its first round
to its end, the stretches in which the cluster stood idle counting as 0);
throughput is the sum over running jobs of GPUs × normalised throughput (the GPU
count when every job runs at a fair share worth 1.0), averaged alike. Without
the round log (``SimulationConfig(record_rounds=False)``) these averages are NaN.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from synergy_gym.errors import ConfigError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.validation import check_positive

if TYPE_CHECKING:
    import pandas as pd  # imported where a result is built (not with the package)


@dataclass
class RoundLog:
    """Cluster usage per planned stretch of identical rounds (appended in the loop)."""

    start_s: list[float] = field(default_factory=list)
    duration_s: list[float] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    mem_gb: list[float] = field(default_factory=list)
    throughput: list[float] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)

    def add(
        self, start_s: float, duration_s: float, gpus: int, cpus: float, mem_gb: float,
        throughput: float, running: int, queued: int,
    ) -> None:
        self.start_s.append(start_s)
        self.duration_s.append(duration_s)
        self.gpus.append(gpus)
        self.cpus.append(cpus)
        self.mem_gb.append(mem_gb)
        self.throughput.append(throughput)
        self.running.append(running)
        self.queued.append(queued)


@dataclass(frozen=True)
class RunSummary:
    """One run's headline numbers (JCTs in hours over the measured window).

    ``mean_gpu_util``, ``mean_cpu_util``, ``mean_mem_util`` (0–1) and ``mean_throughput`` are averages
    over the run's simulated time, from its first round to its end, idle stretches counting as 0
    (NaN without the round log: ``SimulationConfig(record_rounds=False)``).
    """

    policy: str
    mean_jct_h: float
    median_jct_h: float
    p99_jct_h: float
    makespan_h: float
    jobs_measured: int
    jobs_finished: int
    mean_gpu_util: float
    mean_cpu_util: float
    mean_mem_util: float
    mean_throughput: float
    simulated_h: float
    rounds_planned: int
    wall_s: float
    sensitivity: str = "true"
    #: Mean GPU-minutes spent profiling each job (0 with the true sensitivity).
    profiling_gpu_min_per_job: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class JctStats:
    """Mean, median and 99th percentile of a set of job completion times, in hours (NaN when empty)."""

    mean_h: float
    median_h: float
    p99_h: float
    #: How many jobs the statistics are over.
    count: int


def summarise_jcts(
    arrival_s: np.ndarray, finish_s: np.ndarray, selected: np.ndarray, now: float | None = None
) -> JctStats:
    """JCT statistics over the ``selected`` jobs (a boolean mask over ``arrival_s`` and ``finish_s``).

    A selected job not finished (``finish_s`` NaN) is left out, or, when ``now``
    is given, counts with its time in the system so far (``now - arrival_s``):
    a lower bound on its JCT. The 99th percentile is numpy's default (linear)
    ``np.percentile(x, 99)``.
    """
    finished = ~np.isnan(finish_s)
    if now is None:
        jct_s = finish_s - arrival_s
        mask = selected & finished
    else:
        jct_s = np.where(finished, finish_s, now) - arrival_s
        mask = selected
    jct_h = jct_s[mask] / 3600.0
    if jct_h.size == 0:
        return JctStats(mean_h=float("nan"), median_h=float("nan"), p99_h=float("nan"), count=0)
    return JctStats(
        mean_h=float(np.mean(jct_h)),
        median_h=float(np.median(jct_h)),
        p99_h=float(np.percentile(jct_h, 99)),
        count=int(jct_h.size),
    )


_ROUND_METRICS = ("gpu_util", "cpu_util", "mem_util", "throughput", "running", "queued")


#: A table as its columns, in order: name → one value per row.
Columns = dict[str, np.ndarray]

#: The most rows :meth:`SimulationResult.per_round` makes: 10^7 rows of its seven columns are
#: about 1 GB with pandas' working copies (a run of a year in 5-second rounds is 6.3 million).
MAX_PER_ROUND_ROWS = 10_000_000


@dataclass(frozen=True)
class SimulationResult:
    """A run's summary, its jobs and its rounds (as pandas DataFrames, made when first asked for).

    The tables are kept as columns of numpy arrays (:attr:`job_columns`, :attr:`round_columns`)
    so that a run whose caller reads only the summary, or writes the columns itself, does not import pandas.
    """

    summary: RunSummary
    #: One entry per job: job_id, model, gpus, arrival_s, start_s, finish_s, jct_s, measured.
    job_columns: Columns
    #: One entry per stretch of identical rounds: start_s, duration_s, rounds and the
    #: utilisation (0–1) of GPUs, CPUs and memory, throughput, running and queued jobs.
    round_columns: Columns
    #: Round length of the run, in seconds.
    round_s: float = 300.0

    @cached_property
    def jobs(self) -> pd.DataFrame:
        """One row per job: :attr:`job_columns` as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.job_columns)

    @cached_property
    def rounds(self) -> pd.DataFrame:
        """One row per stretch of identical rounds: :attr:`round_columns` as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.round_columns)

    def per_round(self, round_s: float | None = None) -> pd.DataFrame:
        """Utilisation, throughput and job counts averaged over each round of the run.

        One row per round from the first planned round to the end of the run;
        rounds in which the cluster stood idle show zeros. ``round_s`` (the run's
        own by default) must be a positive number of seconds that gives at most
        :data:`MAX_PER_ROUND_ROWS` rows; anything else is a one-line :class:`ConfigError`.
        """
        import pandas as pd

        r = check_positive("per_round() round_s", self.round_s if round_s is None else round_s, unit="seconds")
        seg = self.rounds
        if seg.empty:
            return pd.DataFrame(columns=["round_start_s", *_ROUND_METRICS])
        start = seg["start_s"].to_numpy()
        end = start + seg["duration_s"].to_numpy()
        rows = (end[-1] - start[0]) / r
        if not rows <= MAX_PER_ROUND_ROWS:
            raise ConfigError(
                f"per_round() round_s={r:g} would make {rows:,.0f} rows over the run's {end[-1] - start[0]:,.0f} s; "
                f"the most is {MAX_PER_ROUND_ROWS:,} (about 1 GB of table): choose a longer round_s"
            )
        first, last = np.floor(start[0] / r) * r, np.ceil(end[-1] / r - 1e-9) * r
        bounds = np.arange(first, last + r / 2, r)
        out = {"round_start_s": bounds[:-1]}
        seg_idx = np.searchsorted(start, bounds, side="right") - 1  # last segment starting at or before
        inside = np.clip(bounds - start[np.maximum(seg_idx, 0)], 0.0, (end - start)[np.maximum(seg_idx, 0)])
        for col in _ROUND_METRICS:
            value = seg[col].to_numpy(dtype=float)
            # Integral of the metric from the first round to each round boundary.
            area = np.concatenate([[0.0], np.cumsum(value * (end - start))])
            at = np.where(seg_idx >= 0, area[np.maximum(seg_idx, 0)] + value[np.maximum(seg_idx, 0)] * inside, 0.0)
            out[col] = np.diff(at) / r
        return pd.DataFrame(out)

    def measured_jct_h(self) -> np.ndarray:
        """The JCTs of the measured jobs, in hours (unfinished ones NaN), in job order."""
        jobs = self.job_columns
        return jobs["jct_s"][jobs["measured"]] / 3600.0


def build_result(
    jobs: JobTable,
    log: RoundLog,
    cluster: ClusterSpec,
    *,
    policy: str,
    round_s: float,
    sensitivity: str,
    end_s: float,
    rounds_planned: int,
    wall_s: float,
    start_s: float | None = None,
    recorded: bool = True,
) -> SimulationResult:
    """A run's result from its job table and round log; the run ended at ``end_s`` (simulated seconds).

    The summary's utilisation and throughput are time averages from ``start_s`` (the first round's
    start; by default the log's first entry) to ``end_s``, idle time counting as 0; NaN when the run
    had no time or, ``recorded=False``, its rounds were not logged.
    """
    n = jobs.n
    jct = jobs.finish_s[:n] - jobs.arrival_s[:n]
    job_columns = _copies(
        {
            "job_id": jobs.job_id,
            "model": np.asarray(jobs.zoo.names, dtype=object)[jobs.model],
            "gpus": jobs.gpus,
            "arrival_s": jobs.arrival_s,
            "start_s": jobs.start_s,
            "finish_s": jobs.finish_s,
            "jct_s": jct,
            "measured": jobs.measured,
        }
    )
    c = cluster
    duration = np.asarray(log.duration_s, dtype=float)
    round_columns = _copies(
        {
            "start_s": np.asarray(log.start_s, dtype=float),
            "duration_s": duration,
            "rounds": duration / round_s,
            "gpu_util": np.asarray(log.gpus, dtype=float) / c.total_gpus,
            "cpu_util": np.asarray(log.cpus, dtype=float) / c.total_cpus,
            "mem_util": np.asarray(log.mem_gb, dtype=float) / c.total_mem_gb,
            "throughput": np.asarray(log.throughput, dtype=float),
            "running": np.asarray(log.running, dtype=np.int64),
            "queued": np.asarray(log.queued, dtype=np.int64),
        }
    )
    finished = ~np.isnan(jobs.finish_s)
    jct_stats = summarise_jcts(jobs.arrival_s, jobs.finish_s, jobs.measured)

    begin = start_s if start_s is not None else (float(log.start_s[0]) if log.start_s else end_s)
    span = end_s - begin

    def weighted(col: str) -> float:
        return float(np.dot(round_columns[col], duration) / span) if recorded and span > 0 else float("nan")

    first_arrival = float(jobs.arrival_s[0])
    last_finish = float(np.nanmax(jobs.finish_s)) if finished.any() else first_arrival
    summary = RunSummary(
        policy=policy,
        mean_jct_h=jct_stats.mean_h,
        median_jct_h=jct_stats.median_h,
        p99_jct_h=jct_stats.p99_h,
        makespan_h=(last_finish - first_arrival) / 3600.0,
        jobs_measured=jct_stats.count,
        jobs_finished=int(finished.sum()),
        mean_gpu_util=weighted("gpu_util"),
        mean_cpu_util=weighted("cpu_util"),
        mean_mem_util=weighted("mem_util"),
        mean_throughput=weighted("throughput"),
        simulated_h=end_s / 3600.0,
        rounds_planned=rounds_planned,
        wall_s=wall_s,
        sensitivity=sensitivity,
        profiling_gpu_min_per_job=float(jobs.profiling_cost_gpu_min.mean()) if jobs.n else 0.0,
    )
    return SimulationResult(summary=summary, job_columns=job_columns, round_columns=round_columns, round_s=round_s)


def _copies(columns: Columns) -> Columns:
    """``columns`` with every array copied (the result keeps none of the job table's buffers), as a DataFrame would."""
    return {name: np.array(values, copy=True) for name, values in columns.items()}
