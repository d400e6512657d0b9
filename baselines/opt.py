"""Synergy-OPT: the round's ideal CPU and memory allocation, by integer (or linear) programming.

Each round the jobs are admitted by GPU count in policy order, as under Tune.
Then, as in the paper:

**First stage – how much of each resource each job gets.** Jobs of the same
model, GPU count and demand are interchangeable, so the program is written
over job *types* ``k`` (``n_k`` admitted jobs each with ``g_k`` GPUs) and their
candidate allocations ``p`` – the sensitivity matrix's grid points that fit one
server for ``g_k`` GPUs and are at least as fast as the fair share (also when
capped at the fair share), plus the type's demand, its demand capped at the
fair share and the fair share itself, less those another candidate dominates
(as fast with no more CPUs and memory). With ``x[k,p]`` = number of type-``k``
jobs given ``p`` (CPUs ``c_p``, GB ``m_p`` per GPU, normalised throughput
``t[k,p]``)::

    maximise    Σ_k Σ_p  t[k,p] · x[k,p]  −  ε · Σ_k Σ_p g_k (c_p / C + m_p / M) · x[k,p]
    subject to  Σ_p x[k,p] = n_k                       for every type k
                Σ_k Σ_p g_k · c_p · x[k,p] ≤ C          (cluster CPUs)
                Σ_k Σ_p g_k · m_p · x[k,p] ≤ M          (cluster memory)
                x[k,p] ≥ 0, integer (``opt``) or real (``opt_lp``, the LP relaxation)

The GPU constraint holds by admission, and the fair-share floor by the choice
of candidates. ``ε = 1e-6`` only breaks ties between equally fast allocations
toward the smaller one (the reported objective is the throughput term). The
solver is HiGHS (``scipy.optimize.milp``). The relaxation's objective bounds
the integer program's from above; its fractional job counts are rounded to
whole jobs by largest remainder (which may overshoot the cluster totals a
little – the placement below repairs that). Giving every job of a type the
convex combination ``Σ_p x[k,p] c_p / n_k`` instead wastes resources: between
grid points a job runs at the lower point's throughput.

**Second stage – placement.** Within a type, the fastest allocations go to the
jobs earliest in policy order. The jobs are then placed on servers with
Synergy-Tune's mechanics (multi-GPU jobs first, first-fit by default), the
chosen allocation as each job's target: where it does not fit on any server
the job falls back to it capped at the fair share and over-provisioned jobs
are cut back, so no server is over capacity and no job runs below its fair
share. Progress uses the throughput at the allocation actually placed.

When there is nothing to solve, no candidate for some job, or the solver fails,
the round falls back to plain Tune with a logged warning.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_matrix

from synergy_gym.sim.allocation import JobOrder, Tune, admit_by_gpus
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.ledger import ClusterLedger
from synergy_gym.sim.validation import check_flag, check_positive

LOG = logging.getLogger(__name__)
_TIE_BREAK = 1e-6


@dataclass(frozen=True)
class OptSolution:
    """The first stage's result for one round."""

    #: Per admitted job (in the order given): target (CPUs, GB per GPU, throughput).
    targets: list[tuple[float, float, float]]
    #: Σ normalised throughput of the admitted jobs before placement.
    objective: float
    solve_s: float


class OptFailure(RuntimeError):
    """The round's program has no candidate or the solver did not find a solution."""


class SynergyOpt:
    """``opt`` (integer program) or ``opt_lp`` (its LP relaxation) as an allocation mechanism.

    ``relax`` (a bool) picks the LP relaxation; ``time_limit_s`` is HiGHS's time limit per round, a
    positive number of seconds or None for none. Anything else is a one-line :class:`ConfigError`.
    """

    uses_targets = True
    floors_targets = True  # every job at least at its fair-share throughput

    def __init__(self, relax: bool = False, time_limit_s: float | None = 10.0) -> None:
        self.relax = check_flag("SynergyOpt relax", relax)
        self.time_limit_s = check_positive("SynergyOpt time_limit_s", time_limit_s, allow_none=True, unit="seconds")
        self.name = "opt_lp" if self.relax else "opt"
        self._tune = Tune()
        # Candidates depend only on a job type (or a profiled job) and its target: cached per job table.
        self._candidates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def round_placer(self) -> None:
        """None: the solver chooses every admitted job's target at once, so each round is planned whole."""
        return None

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: JobOrder) -> None:
        admitted = admit_by_gpus(order, jobs.gpus_l, ledger.free_gpus_total)
        if not admitted:
            LOG.warning("%s: no runnable job fits this round; falling back to tune", self.name)
            self._tune.allocate(ledger, jobs, order)
            return
        try:
            solution = self.solve(jobs, admitted)
        except OptFailure as exc:
            LOG.warning("%s: %s; falling back to tune for this round", self.name, exc)
            self._tune.allocate(ledger, jobs, order)
            return
        self._tune.place_all(ledger, jobs, admitted, dict(zip(admitted, solution.targets)))

    def solve(self, jobs: JobTable, admitted: Sequence[int]) -> OptSolution:
        """The first stage for ``admitted`` jobs (policy order)."""
        started = time.perf_counter()
        cluster = jobs.cluster
        types: dict[tuple, list[int]] = {}
        profiled = jobs.belief is not None  # then each job has its own estimate: a type of its own
        for j in admitted:
            key = (j,) if profiled else (int(jobs.model[j]), jobs.gpus_l[j], jobs.target_cpu_l[j], jobs.target_mem_l[j])
            types.setdefault(key, []).append(j)
        columns: list[tuple[int, float, float, float]] = []  # (type index, cpu, mem, tput)
        counts, type_gpus = [], []
        cache = self._candidates.setdefault(jobs, {})
        for k, (key, members) in enumerate(types.items()):
            j0 = members[0]
            cache_key = key + (jobs.target_cpu_l[j0], jobs.target_mem_l[j0])
            cands = cache.get(cache_key)
            if cands is None:
                cands = cache[cache_key] = candidates(jobs, j0)
            if not cands:
                raise OptFailure(f"job {jobs.job_id[members[0]]} has no allocation at its fair share that fits a server")
            columns.extend((k, c, m, t) for c, m, t in cands)
            counts.append(len(members))
            type_gpus.append(jobs.gpus_l[members[0]])
        n_types, n_vars = len(types), len(columns)
        col_type = np.array([c[0] for c in columns])
        cpu = np.array([c[1] for c in columns])
        mem = np.array([c[2] for c in columns])
        tput = np.array([c[3] for c in columns])
        g = np.asarray(type_gpus, dtype=float)[col_type]
        cost = -(tput - _TIE_BREAK * g * (cpu / cluster.total_cpus + mem / cluster.total_mem_gb))
        rows = np.concatenate([col_type, np.full(n_vars, n_types), np.full(n_vars, n_types + 1)])
        cols = np.concatenate([np.arange(n_vars)] * 3)
        vals = np.concatenate([np.ones(n_vars), g * cpu, g * mem])
        a = csr_matrix((vals, (rows, cols)), shape=(n_types + 2, n_vars))
        counts_arr = np.asarray(counts, dtype=float)
        lb = np.concatenate([counts_arr, [-np.inf, -np.inf]])
        ub = np.concatenate([counts_arr, [cluster.total_cpus + 1e-6, cluster.total_mem_gb + 1e-6]])
        result = milp(
            cost,
            constraints=LinearConstraint(a, lb, ub),
            integrality=np.zeros(n_vars) if self.relax else np.ones(n_vars),
            bounds=Bounds(0, counts_arr[col_type]),
            options={"presolve": True, **({} if self.time_limit_s is None else {"time_limit": self.time_limit_s})},
        )
        if result.x is None or result.status not in (0, 1):  # 1: time limit, with a feasible solution
            raise OptFailure(f"the solver found no solution ({result.message})")
        x = np.maximum(result.x, 0.0)
        targets_by_job: dict[int, tuple[float, float, float]] = {}
        for k, members in enumerate(types.values()):
            idx = np.flatnonzero(col_type == k)
            whole = _whole_jobs(x[idx], counts[k]) if self.relax else np.rint(x[idx]).astype(int)
            ranked = sorted(zip(idx.tolist(), whole.tolist()), key=lambda r: (-tput[r[0]], cpu[r[0]], mem[r[0]]))
            queue = iter(members)
            for col, n in ranked:
                for _ in range(n):
                    targets_by_job[next(queue)] = (float(cpu[col]), float(mem[col]), float(tput[col]))
            for j in queue:  # rounding left a job without a point: its fallback is always a candidate
                targets_by_job[j] = (jobs.fallback_cpu_l[j], jobs.fallback_mem_l[j], jobs.tput_fallback_l[j])
        objective = float(tput @ x)
        return OptSolution(
            targets=[targets_by_job[j] for j in admitted], objective=objective, solve_s=time.perf_counter() - started
        )


def _whole_jobs(x: np.ndarray, n: int) -> np.ndarray:
    """Round a type's fractional job counts to whole jobs summing to ``n`` (largest remainder)."""
    base = np.floor(x + 1e-9).astype(int)
    extra = n - int(base.sum())
    if extra > 0:
        base[np.argsort(-(x - base), kind="stable")[:extra]] += 1
    return base


def candidates(jobs: JobTable, j: int) -> list[tuple[float, float, float]]:
    """Allocations (CPUs, GB per GPU, throughput) that OPT may give job ``j``."""
    cluster = jobs.cluster
    zoo = jobs.zoo
    g = jobs.gpus_l[j]
    fair_tput = jobs.tput_fair_l[j]
    per_server = min(g, cluster.gpus_per_server)
    out: dict[tuple[float, float], float] = {}
    points = [(float(c), float(m)) for c in zoo.cpu_grid for m in zoo.mem_grid]
    points += [
        (jobs.target_cpu_l[j], jobs.target_mem_l[j]),
        (jobs.fallback_cpu_l[j], jobs.fallback_mem_l[j]),
        (jobs.fair_cpu, jobs.fair_mem),
    ]
    for c, m in points:
        if per_server * c > cluster.cpus_per_server + 1e-9 or per_server * m > cluster.mem_gb_per_server + 1e-9:
            continue
        t = jobs.est_throughput(j, c, m)  # what the scheduler believes (profiled or true)
        capped = jobs.est_throughput(j, min(c, jobs.fair_cpu), min(m, jobs.fair_mem))
        if t >= fair_tput - 1e-12 and capped >= fair_tput - 1e-12:
            out[(c, m)] = t
    found = [(c, m, t) for (c, m), t in out.items()]
    # Drop allocations another one beats: as fast or faster with no more CPUs and memory.
    return [
        p for p in found
        if not any(q != p and q[2] >= p[2] and q[0] <= p[0] and q[1] <= p[1] for q in found)
    ]
