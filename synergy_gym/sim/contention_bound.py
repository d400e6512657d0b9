"""A lower bound on mean JCT that counts contention: a time-indexed LP relaxation solved with HiGHS.

The no-waiting bound (:mod:`synergy_gym.sim.bounds`) gives every job the cluster to itself. This
bound makes the jobs share it: time from the first job's release is cut into periods up to a
horizon ``H`` (:func:`period_grid`), and the linear program
(:mod:`synergy_gym.sim.contention_lp`) chooses, for every job ``j``, period ``t`` and allocation
level ``l`` (:mod:`synergy_gym.sim.contention_levels`), the fraction ``x[j,t,l]`` of the period in
which ``j`` runs at ``l``::

    minimise    Σ_j C_j                                             (mean JCT = that / n − mean arrival)
    subject to  Σ_l x[j,t,l] ≤ share[j,t]                           (a job runs at one level at a time)
                Σ_{j,l} g_j · x[j,t,l] ≤ GPUs,  · c_jl ≤ CPUs,  · m_jl ≤ GB   (the cluster's totals, every period)
                Σ_{t,l} x[j,t,l] · Δ_t · ρ_jl / W_j + f_j = 1       (all the job's work is done)
                C_j ≥ Σ_{t,l} x[j,t,l] · Δ_t · ρ_jl / W_j · s_jt + f_j · H + p_j / 2     (mean busy time)
                C_j ≥ r_j + Σ_{t,l} x[j,t,l] · Δ_t + f_j · p_j                        (running time)
                C_j ≥ a_j                                           (the job alone at its fastest level)
                0 ≤ x[j,t,l] ≤ share[j,t],  0 ≤ f_j ≤ 1

``share[j,t]`` is the part of period ``t`` (length ``Δ_t``) after the job's release ``r_j`` (1 for
later periods, 0 before), ``s_jt = max(start of t, r_j)``, ``W_j`` the job's iterations, ``ρ_jl``
its iterations per second at level ``l``, ``p_j = W_j / max_l ρ_jl`` and ``f_j`` the share of its
work left for the *tail* ``[H, ∞)``, which has no capacity constraint (so the bound holds for any
``H``).

**Why no policy of the project beats it.** Take any run of the simulator or the environment (any
ordering and allocation, preemptive or not, either timing, true or profiled sensitivity) that
finishes every job, and read ``x``, ``f`` and ``C`` off it; every constraint holds and ``Σ_j C_j``
is the run's:

* *Release.* With ``timing="round"`` time moves from round boundary to round boundary, so a job
  starts at the first boundary at or after its arrival (``r_j``) or later, as the simulator finds it
  (:func:`~synergy_gym.sim.bounds.round_release_s`: with a round length that is not a whole number,
  an arrival within 1e-9 rounds of a boundary is released at the earlier of the two). With
  ``"exact"`` it starts at its arrival or later.
* *Levels and rates.* The job's speed and its least CPUs and memory at each grid point are what the
  simulator credits and what any policy grants (:mod:`synergy_gym.sim.contention_levels`): a
  stretch run at an allocation becomes ``x`` at the allocation's grid level (or, for a dominated
  level, at a mix of others as fast and no costlier), and a round whose credit is cut at what the
  job has left becomes a proportionally smaller ``x``, so the work row holds with equality (work
  after ``H`` goes to ``f_j``).
* *Capacity.* At every instant the running jobs hold at most the cluster's GPUs, CPUs and memory
  (placement, gang scheduling and the per-server limits are relaxed to these totals), so the
  period's averages do too; the CPU and GB totals carry the ledger's tolerance of 1e-6 per GPU.
* *Mean busy time.* Spread each round's credited iterations evenly over the round (or take the
  exact progress). The job's work is then done at a rate of at most ``W_j / p_j``, all of it by its
  completion ``C_j``, so the mean time of its work (weighted by work) is at most ``C_j − p_j / 2``;
  work done in period ``t`` is done no earlier than ``s_jt``, and in the tail no earlier than ``H``.
* *Running time.* The job runs only after ``r_j`` and until ``C_j``, one stretch at a time, for at
  least ``Σ x · Δ`` before ``H`` (a cut round counts less than it ran) and, for its tail work, at
  least ``f_j · p_j`` more.
* *Alone.* ``a_j`` is the release plus ``ceil(W_j / credit)`` rounds at the fastest level's credit
  (``"round"``) or ``p_j`` (``"exact"``): the no-waiting bound with the fastest level, which for
  the model zoo's profiles is the demand, so the bound is never below the no-waiting bound there.

The bound is HiGHS's dual solution turned into a Lagrangian lower bound
(:func:`~synergy_gym.sim.contention_lp.dual_bound`), so it is a bound even where HiGHS's
tolerances leave its primal slightly infeasible. What the relaxation loses: free preemption and
resizing at any instant, fractional time sharing within a period, packing on servers, and the
position of work inside a period (counted at its start; shorter periods tighten this and cost more
to solve). The mean is over all the workload's jobs, as the environment and ``synergy-gym
evaluate`` report it; an episode cut off at ``max_rounds`` (its unfinished jobs counted with their
time so far) is not a run that finishes every job and may fall below it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import OptimizeResult, linprog

from synergy_gym.errors import ConfigError, WorkloadError
from synergy_gym.sim.bounds import no_wait_start_s
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import TIMINGS
from synergy_gym.sim.contention_levels import JobLevels, job_levels
from synergy_gym.sim.contention_lp import LinearProgram, PeriodGrid, build_lp, dual_bound
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.validation import check_positive
from synergy_gym.sim.workload import Workload

#: :func:`default_max_periods` gives a 300-job workload this many periods (the registered small scenarios' size).
PERIODS_AT_300_JOBS = 60
#: The fewest and most periods :func:`default_max_periods` gives.
PERIOD_RANGE: tuple[int, int] = (24, 120)
#: After the busy span each period is this much longer than the one before (only long jobs are left then).
GROWTH = 2.0
#: The bound is lowered by this share of the mean completion time (a few microseconds), more than the LP's
#: floating rounding, so that a schedule that reaches it exactly (an idle cluster's) is never below it.
ROUNDING = 1e-11
#: The most periods any setting may ask for (the LP's size grows with jobs × periods).
PERIOD_LIMIT = 10_000
#: The longest ``horizon_s`` and ``period_s`` (seconds; about 3.2 years) any setting may ask for. The LP's coefficients
#: grow with the square of its periods' length over a job's time alone: beyond this, HiGHS rejects the LP of jobs of a
#: few iterations of the model zoo's fastest model (a coefficient of 1e15 or more) or cannot solve it.
TIME_LIMIT_S = 1e8
#: HiGHS's runs, in turn, until one solves the LP: its default, then without presolve, then its interior-point method
#: (a long horizon over jobs of a few iterations can leave the default run without an answer, status 4).
SOLVES: tuple[tuple[str, dict[str, bool]], ...] = (("highs", {}), ("highs", {"presolve": False}), ("highs-ipm", {}))


@dataclass(frozen=True)
class ContentionBound:
    """The LP's result: a lower bound on every policy's mean JCT (over all jobs) on the workload and cluster."""

    mean_jct_s: float  #: the bound on mean JCT over all jobs, in seconds
    per_job_s: np.ndarray  #: per job (the workload's order): the LP's ``C_j`` − arrival; only their mean is a bound
    solve_s: float  #: seconds to build and solve the LP
    periods: int  #: periods of the LP (before the tail)
    period_s: float  #: the length of the periods over the busy span (those after it grow by :data:`GROWTH`)
    horizon_s: float  #: where the tail (no capacity constraint) begins, in the workload's time (seconds)
    tail_share: float  #: share of all work the LP's solution leaves to the tail (0: the horizon did not bind)
    status: str  #: HiGHS's message

    @property
    def mean_jct_h(self) -> float:
        """:attr:`mean_jct_s` in hours."""
        return self.mean_jct_s / 3600.0


def contention_bound(
    workload: Workload,
    cluster: ClusterSpec,
    *,
    round_s: float = 300.0,
    timing: str = "round",
    period_s: float | None = None,
    horizon_s: float | None = None,
    max_periods: int | None = None,
) -> ContentionBound:
    """Solve the contention-aware LP (module docstring) for ``workload`` on ``cluster``.

    ``round_s`` and ``timing`` must be the simulator's (:class:`~synergy_gym.sim.config.SimulationConfig`).
    ``period_s`` (the periods' length over the busy span; default: the fewest whole rounds whose
    grid has at most ``max_periods`` periods, default :func:`default_max_periods`) and ``horizon_s``
    (seconds after the first release, extended to the last release and a round; default: the busy
    span and the longest job alone, :func:`busy_span_s`) trade tightness for solve time; the result
    is a bound for any values up to :data:`TIME_LIMIT_S` (larger ones are a :class:`ConfigError`).
    The mean is over all the workload's jobs, as the environment and ``synergy-gym evaluate`` report
    it (a simulator run's ``mean_jct_h`` is over the measured window).
    Raises :class:`ConfigError` for a bad setting, :class:`WorkloadError` for a job that does not fit
    the cluster or can never progress, and ``RuntimeError`` when HiGHS does not solve the LP (never a
    value that is not a bound).
    """
    started = time.perf_counter()
    round_s = check_positive("round_s", round_s, unit="seconds")
    if timing not in TIMINGS:
        raise ConfigError(f"timing must be one of {', '.join(TIMINGS)}, got {timing!r}")
    if max_periods is not None:
        max_periods = check_positive("max_periods", max_periods, integer=True)
        if max_periods > PERIOD_LIMIT:
            raise ConfigError(f"max_periods must be at most {PERIOD_LIMIT:,}, got {max_periods}")
    if period_s is not None:
        period_s = _check_time("period_s", period_s)
    if horizon_s is not None:
        horizon_s = _check_time("horizon_s", horizon_s)
    if not isinstance(workload, Workload):
        raise WorkloadError(f"workload must be a Workload, got {type(workload).__name__}")
    if not isinstance(cluster, ClusterSpec):
        raise ConfigError(f"cluster must be a ClusterSpec, got {type(cluster).__name__}")
    jobs = JobTable(cluster, workload)  # a job that does not fit the cluster is a WorkloadError here
    levels = job_levels(jobs, cluster, round_s, timing)
    stuck = [j for j in range(jobs.n) if levels.rate[j].size == 0]
    if stuck:
        j = stuck[0]
        raise WorkloadError(f"job {jobs.job_id[j]}: iter_time_s={jobs.iter_time_s[j]:g} is too long to finish an "
                            f"iteration in a {round_s:g} s round at any allocation; use timing='exact' or longer rounds")
    arrival = jobs.arrival_s
    release = release_s(arrival, round_s, timing)
    work = jobs.total_iters
    fastest = levels.fastest()
    if timing == "round":
        alone = release + np.ceil(work / np.round(fastest * round_s)) * round_s
    else:
        alone = release + work / fastest
    t0 = float(release.min())
    busy_s, longest_s = busy_span_s(jobs, cluster, levels, release)
    span = busy_s + longest_s if horizon_s is None else horizon_s
    span = max(span, float(release.max()) - t0 + round_s)  # every job is released before the tail
    most = default_max_periods(jobs.n) if max_periods is None else max_periods
    grid = period_grid(t0, t0 + min(busy_s, span), t0 + span, round_s, period_s, most)
    lp = build_lp(levels, cluster, jobs.gpus, work, release, alone, grid)
    res = _solve(lp)
    n = jobs.n
    total_h = dual_bound(lp, -res.ineqlin.marginals, -res.eqlin.marginals)
    if not np.isfinite(total_h):  # pragma: no cover - the duals' clip always gives a finite bound
        raise RuntimeError("the contention bound's LP gave no finite dual bound")
    tail = np.clip(res.x[-2 * n:-n], 0.0, 1.0)
    mean_completion_s = total_h * 3600.0 / n
    return ContentionBound(
        # Rounded down by ROUNDING of the mean completion: the sums' floating rounding never lifts it above a run.
        mean_jct_s=mean_completion_s * (1.0 - ROUNDING) - float(arrival.mean()),
        per_job_s=res.x[-n:] * 3600.0 - arrival, solve_s=time.perf_counter() - started, periods=grid.periods,
        period_s=float(grid.edges[1] - grid.edges[0]), horizon_s=grid.horizon_s,
        tail_share=float(np.dot(tail, work) / work.sum()), status=str(res.message),
    )


def _check_time(name: str, value: float) -> float:
    value = check_positive(name, value, unit="seconds")
    if value > TIME_LIMIT_S:
        raise ConfigError(f"{name} must be at most {TIME_LIMIT_S:g} seconds (about 3.2 years; HiGHS cannot solve the LP "
                          f"reliably beyond), got {value:g}")
    return value


def _solve(lp: LinearProgram) -> OptimizeResult:
    """HiGHS's solution of ``lp``: the first of :data:`SOLVES` that reaches an optimum (any of them: the bound is
    :func:`~synergy_gym.sim.contention_lp.dual_bound` of its duals)."""
    res = None
    for method, options in SOLVES:
        res = linprog(lp.cost, A_ub=lp.a_ub, b_ub=lp.b_ub, A_eq=lp.a_eq, b_eq=lp.b_eq, bounds=lp.bounds, method=method,
                      options=options)
        if res.status == 0 and res.x is not None:
            return res
    assert res is not None
    raise RuntimeError(f"the contention bound's LP was not solved by HiGHS: {res.message} (status {res.status})")


def default_max_periods(n_jobs: int) -> int:
    """:data:`PERIODS_AT_300_JOBS` scaled by ``sqrt(300 / n_jobs)``, within :data:`PERIOD_RANGE`: an LP's size grows with
    jobs × periods and its solve time faster, so larger workloads get coarser periods (30 for 1,200 jobs)."""
    lo, hi = PERIOD_RANGE
    return int(min(hi, max(lo, round(PERIODS_AT_300_JOBS * math.sqrt(300.0 / max(1, n_jobs))))))


def period_grid(start_s: float, uniform_end_s: float, horizon_s: float, round_s: float, period_s: float | None,
                max_periods: int) -> PeriodGrid:
    """Periods of ``period_s`` from ``start_s`` until ``uniform_end_s``, then each :data:`GROWTH` times longer than
    the last until ``horizon_s`` (or beyond: the last edge is the horizon).

    Without ``period_s``, the periods are the fewest whole rounds that give at most ``max_periods`` periods.
    """
    def edges(period: float) -> np.ndarray:
        uniform = max(1, math.ceil((uniform_end_s - start_s) / period - 1e-9))
        out = [start_s + k * period for k in range(uniform + 1)]
        step = period
        while out[-1] < horizon_s - 1e-9:
            step *= GROWTH
            out.append(out[-1] + step)
        return np.array(out)

    if period_s is not None:
        if (uniform_end_s - start_s) / period_s > PERIOD_LIMIT:
            raise ConfigError(f"period_s={period_s:g} gives more than {PERIOD_LIMIT:,} periods over the "
                              f"{(uniform_end_s - start_s) / 3600:.1f} h busy span; give a longer period_s")
        return PeriodGrid(edges(period_s))
    lo, hi = 1, max(1, math.ceil((horizon_s - start_s) / round_s))  # hi rounds: one period covers everything
    while lo < hi:  # the fewest rounds per period whose grid has at most max_periods periods
        mid = (lo + hi) // 2
        if edges(mid * round_s).size - 1 <= max_periods:
            hi = mid
        else:
            lo = mid + 1
    return PeriodGrid(edges(lo * round_s))


def release_s(arrival_s: np.ndarray, round_s: float, timing: str) -> np.ndarray:
    """When each job can first run: the round boundary at or after its arrival (``"round"``), or its arrival."""
    return no_wait_start_s(arrival_s, round_s, timing)  # the no-waiting bound's start: the same release


def busy_span_s(jobs: JobTable, cluster: ClusterSpec, levels: JobLevels, release: np.ndarray) -> tuple[float, float]:
    """Seconds from the first release over which the cluster is busy, and the longest job alone.

    Busy: the later of the last release and the cluster's busy time, each job at the level that uses
    the smallest share of its bottleneck resource for its work. The default horizon is their sum,
    by which the LP rarely needs the tail; the periods are of one length over the busy span.
    """
    busy = 0.0
    for j in range(jobs.n):
        share = np.maximum(np.maximum(float(jobs.gpus[j]) / cluster.total_gpus, levels.cpu[j] / cluster.total_cpus),
                           levels.mem[j] / cluster.total_mem_gb)
        busy += float(np.min(share / levels.rate[j])) * float(jobs.total_iters[j])
    longest = float(np.max(jobs.total_iters / levels.fastest()))
    return max(float(release.max() - release.min()), busy), longest
