"""The contention bound's linear program (:mod:`synergy_gym.sim.contention_bound`): built in HiGHS's form and
bounded from below by weak duality.

Variables, in this order: every job's ``x[t, l]`` (its periods from the one holding its release,
its levels), then every job's tail share ``f``, then every job's completion ``C`` in hours.
Inequality rows: the per-period shares of the jobs with more than one level (a job with one level
has its share as the variable's bound), three capacity rows per period (GPUs, CPUs, GB, as shares of
the cluster's totals), a mean-busy-time completion row per job, then a running-time completion row
per job. Equality rows: each job's work is done.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix

from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.contention_levels import JobLevels

_HOURS = 1.0 / 3600.0
#: A placement may overshoot a server by the ledger's tolerance (1e-6) per grant, so at most
#: this much per GPU (one grant holds at least one GPU).
_LEDGER_SLACK = 1e-6


@dataclass(frozen=True)
class PeriodGrid:
    """The LP's time: periods between consecutive ``edges`` (seconds, increasing), then the tail from the last edge."""

    edges: np.ndarray

    @property
    def periods(self) -> int:
        return int(self.edges.size - 1)

    @property
    def horizon_s(self) -> float:
        return float(self.edges[-1])


@dataclass(frozen=True)
class LinearProgram:
    """``min cost·x`` s.t. ``a_ub x ≤ b_ub``, ``a_eq x = b_eq``, ``lo ≤ x ≤ hi``; the last ``2 · n_jobs`` rows of ``a_ub``
    are the completion rows (mean busy time, then running time), the last ``n_jobs`` variables the ``C_j`` (hours), the
    ``n_jobs`` before them the ``f_j``."""

    cost: np.ndarray
    a_ub: csr_matrix
    b_ub: np.ndarray
    a_eq: csr_matrix
    b_eq: np.ndarray
    bounds: np.ndarray  #: (variables, 2): lower and upper bounds
    n_jobs: int


def build_lp(
    levels: JobLevels, cluster: ClusterSpec, gpus: np.ndarray, work: np.ndarray, release: np.ndarray,
    alone: np.ndarray, grid: PeriodGrid,
) -> LinearProgram:
    """The LP of :mod:`synergy_gym.sim.contention_bound` for jobs released at ``release`` (seconds) needing ``work``
    iterations, each finishing no earlier than ``alone`` (seconds)."""
    n = len(work)
    edges, n_periods = grid.edges, grid.periods
    length = np.diff(edges)
    p = work / levels.fastest()
    share_rows, share_cols, share_rhs = [], [], []
    cap_rows, cap_cols, cap_vals = [], [], []
    eq_cols, eq_vals = [], []
    busy_cols, busy_vals = [], []
    run_cols, run_vals = [], []
    x_hi = []
    col = 0
    share_row = 0
    cpu_cap = cluster.total_cpus + _LEDGER_SLACK * cluster.total_gpus
    mem_cap = cluster.total_mem_gb + _LEDGER_SLACK * cluster.total_gpus
    for j in range(n):
        rate, cpu, mem = levels.rate[j], levels.cpu[j], levels.mem[j]
        n_l = rate.size
        first = min(max(int(np.searchsorted(edges, release[j], side="right")) - 1, 0), n_periods - 1)
        ts = np.arange(first, n_periods)
        starts, span = edges[ts], length[ts]
        share = np.clip((starts + span - release[j]) / span, 0.0, 1.0)
        begin = np.maximum(starts, release[j])
        n_t = ts.size
        flat = col + np.arange(n_t * n_l)
        done = span[:, None] * rate[None, :] / work[j]  # share of the job's work per unit of x
        if n_l > 1:  # one level: its bounds say it
            share_rows.append(np.repeat(share_row + np.arange(n_t), n_l))
            share_cols.append(flat)
            share_rhs.append(share)
            share_row += n_t
        for k, amount in enumerate((np.full(n_l, float(gpus[j]) / cluster.total_gpus), cpu / cpu_cap, mem / mem_cap)):
            cap_rows.append(np.repeat(3 * ts + k, n_l))
            cap_cols.append(flat)
            cap_vals.append(np.tile(amount, n_t))
        eq_cols.append(flat)
        eq_vals.append(done.ravel())
        busy_cols.append(flat)
        busy_vals.append((done * begin[:, None] * _HOURS).ravel())
        run_cols.append(flat)
        run_vals.append(np.repeat(span * _HOURS, n_l))
        x_hi.append(np.repeat(share, n_l))
        col += flat.size
    n_x, n_share = col, share_row
    f0, c0 = n_x, n_x + n
    n_vars = n_x + 2 * n
    jj = np.arange(n)
    per_job = [c.size for c in eq_cols]
    job_of_x = np.repeat(jj, per_job)
    cap0 = n_share
    busy0 = cap0 + 3 * n_periods
    run0 = busy0 + n
    # Work: Σ done · x + f = 1.  Mean busy time: Σ done · begin · x + f · H − C ≤ −p / 2 (hours).
    # Running time: Σ length · x + f · p − C ≤ −release (hours).
    rows = np.concatenate(share_rows + [cap0 + np.concatenate(cap_rows), busy0 + job_of_x, busy0 + jj, busy0 + jj,
                                        run0 + job_of_x, run0 + jj, run0 + jj])
    cols = np.concatenate(share_cols + [np.concatenate(cap_cols), np.concatenate(busy_cols), f0 + jj, c0 + jj,
                                        np.concatenate(run_cols), f0 + jj, c0 + jj])
    vals = np.concatenate([np.ones(sum(c.size for c in share_cols)), np.concatenate(cap_vals),
                           np.concatenate(busy_vals), np.full(n, grid.horizon_s * _HOURS), -np.ones(n),
                           np.concatenate(run_vals), p * _HOURS, -np.ones(n)])
    a_ub = coo_matrix((vals, (rows, cols)), shape=(run0 + n, n_vars)).tocsr()
    b_ub = np.concatenate(share_rhs + [np.ones(3 * n_periods), -p * _HOURS / 2, -release * _HOURS])
    a_eq = coo_matrix((np.concatenate(eq_vals + [np.ones(n)]), (np.concatenate([job_of_x, jj]),
                       np.concatenate(eq_cols + [f0 + jj]))), shape=(n, n_vars)).tocsr()
    cost = np.zeros(n_vars)
    cost[c0:] = 1.0
    bounds = np.zeros((n_vars, 2))
    bounds[:n_x, 1] = np.concatenate(x_hi)
    bounds[f0:c0, 1] = 1.0
    bounds[c0:, 0] = alone * _HOURS
    bounds[c0:, 1] = np.inf
    return LinearProgram(cost, a_ub, b_ub, a_eq, np.ones(n), bounds, n)


def dual_bound(lp: LinearProgram, mu: np.ndarray, lam: np.ndarray) -> float:
    """A lower bound on the LP's optimum from multipliers ``mu`` (inequalities) and ``lam`` (equalities).

    Weak duality: for any ``mu ≥ 0`` and any ``lam``, the least value over the variables' bounds of
    the Lagrangian ``c·x + mu·(A_ub x − b_ub) + lam·(A_eq x − b_eq)`` is at most the cost of every
    feasible ``x``. From HiGHS's duals it equals the optimum up to rounding, and it stays a bound
    however loosely HiGHS met its tolerances.
    """
    mu = np.maximum(np.asarray(mu, dtype=float), 0.0)
    n = lp.n_jobs
    # C_j has no upper bound, so its reduced cost 1 − busy_j − run_j (its two rows' multipliers) must stay ≥ 0:
    # cut the run row's multiplier first, then the busy row's, to a sum a hair below 1 (rounding cannot turn it negative).
    busy, run = mu[-2 * n:-n].copy(), mu[-n:].copy()
    over = np.maximum(busy + run - (1.0 - 1e-12), 0.0)
    cut = np.minimum(over, run)
    mu[-n:] = run - cut
    mu[-2 * n:-n] = np.maximum(busy - (over - cut), 0.0)
    reduced = lp.cost + lp.a_ub.T @ mu + lp.a_eq.T @ np.asarray(lam, dtype=float)
    lo, hi = lp.bounds[:, 0], lp.bounds[:, 1]
    if np.any((reduced < 0) & ~np.isfinite(hi)):  # pragma: no cover - excluded by the clip above
        return -math.inf
    at = np.where(reduced >= 0, lo, hi)
    return float(np.dot(reduced, at) - np.dot(mu, lp.b_ub) - np.dot(lam, lp.b_eq))
