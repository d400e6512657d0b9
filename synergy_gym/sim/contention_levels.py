"""Each job's allocation levels for the contention bound (:mod:`synergy_gym.sim.contention_bound`).

A *level* is one grid point of the job's sensitivity matrix: the speed it runs at there, in
iterations per second as the simulator credits them, and the least CPUs and GB any policy of the
project can give the job to reach it. Why those are the right numbers:

* **Speed.** The simulator's throughput at an allocation is the matrix value at the largest grid
  point not above it in each dimension (:func:`synergy_gym.sim.profiles.grid_level`). With
  ``timing="round"`` a job placed for a round is credited ``floor(round_s / (iter_time /
  throughput))`` iterations (:func:`synergy_gym.sim.kernels.run_rounds`), so its level's rate is
  that over ``round_s``; with ``"exact"`` it is ``throughput / iter_time``.
* **Cost.** An allocation reaches grid level ``k ≥ 1`` only with at least ``grid[k] − 1e-6`` (the
  profiles' rounding tolerance). Below the lowest level any amount gives level 0, so level 0 costs
  the least any policy grants: Synergy-Tune, Greedy, OPT and the environment grant the job's
  target (its demand, a grid point, the fair share or an environment level, which is one of those),
  its fallback ``min(target, fair)``, the fair share, or a cut to ``min(fallback, target)``; the
  least of these is ``min(grid[0], fair, demand)`` (a profiled demand is a grid point).
* **Fit.** Every policy gives a ``g``-GPU job at most what one server holds for
  ``min(g, GPUs per server)`` of its GPUs (demands are capped so, and Synergy-OPT and the
  environment's levels take only such points), so points beyond that are left out.
* **Dominated levels.** A level that a mix of the others (and idling) matches in speed with no
  more CPUs and memory is dropped (:func:`hull_levels`): the time a schedule spends there maps to
  the mix, scaled to the same speed, at no more GPUs, CPUs or memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.job_table import JobTable

#: An allocation this far below a grid point gets that point (``_GRID_EPS`` of :mod:`synergy_gym.sim.profiles`).
GRID_TOL = 1e-6


@dataclass(frozen=True)
class JobLevels:
    """Per job (the job table's order): its undominated levels' rates (iterations/s), total CPUs and total GB."""

    rate: list[np.ndarray]
    cpu: list[np.ndarray]
    mem: list[np.ndarray]

    def fastest(self) -> np.ndarray:
        """Every job's fastest rate (iterations/s)."""
        return np.array([r.max() for r in self.rate])


def level_rates(tput: np.ndarray, iter_time_s: float, round_s: float, timing: str) -> np.ndarray:
    """Iterations per second at normalised throughputs ``tput`` as the simulator credits them (module docstring)."""
    tput = np.asarray(tput, dtype=float)
    if timing == "round":
        with np.errstate(divide="ignore"):
            per_round = np.floor(round_s / (iter_time_s / tput))  # the simulator's expression, operation for operation
        return np.where(tput > 0, per_round, 0.0) / round_s
    return tput / iter_time_s


def job_levels(jobs: JobTable, cluster: ClusterSpec, round_s: float, timing: str) -> JobLevels:
    """Every job's undominated levels (module docstring), computed once per kind of job."""
    zoo = jobs.zoo
    cpu_grid = np.asarray(zoo.cpu_grid, dtype=float)
    mem_grid = np.asarray(zoo.mem_grid, dtype=float)
    tensor = zoo.tput_tensor()
    per_server = np.minimum(jobs.gpus, cluster.gpus_per_server)
    floor_cpu = np.minimum(np.minimum(jobs.fair_cpu, cpu_grid[0]), np.minimum(jobs.target_cpu, jobs.fallback_cpu))
    floor_mem = np.minimum(np.minimum(jobs.fair_mem, mem_grid[0]), np.minimum(jobs.target_mem, jobs.fallback_mem))
    rates: list[np.ndarray] = []
    cpus: list[np.ndarray] = []
    mems: list[np.ndarray] = []
    cache: dict[tuple[int, int, float, float, float], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for j in range(jobs.n):
        key = (int(jobs.model[j]), int(per_server[j]), float(floor_cpu[j]), float(floor_mem[j]),
               float(jobs.iter_time_s[j]))
        if key not in cache:
            model, n_server, f_cpu, f_mem, iter_time = key
            c = cpu_grid - GRID_TOL
            m = mem_grid - GRID_TOL
            c[0] = min(c[0], f_cpu)
            m[0] = min(m[0], f_mem)
            cc, mm = np.meshgrid(c, m, indexing="ij")
            rate = level_rates(tensor[model], iter_time, round_s, timing)
            fits = (cc * n_server <= cluster.cpus_per_server + 1e-9) & (mm * n_server <= cluster.mem_gb_per_server + 1e-9)
            fits &= rate > 0
            cache[key] = hull_levels(rate[fits], cc[fits], mm[fits])
        rate, c, m = cache[key]
        g = float(jobs.gpus[j])
        rates.append(rate)
        cpus.append(g * c)
        mems.append(g * m)
    return JobLevels(rates, cpus, mems)


def hull_levels(rate: np.ndarray, cpu: np.ndarray, mem: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The points (rate, CPUs, GB) that no mix of the others matches: ``Σ λ_k ≤ 1`` (idle the rest),
    ``Σ λ_k rate_k ≥ rate``, ``Σ λ_k cpu_k ≤ cpu``, ``Σ λ_k mem_k ≤ mem``.

    Running at a dropped point for some time is then replaced by the mix scaled to the same rate for
    the same time, using no more GPUs, CPUs or memory. A point another one dominates outright goes
    first; each mix HiGHS finds is checked exactly, and a point whose mix fails the check is kept
    (keeping a point is always valid).
    """
    rate, cpu, mem = (np.asarray(a, dtype=float) for a in (rate, cpu, mem))
    n = rate.size
    beaten = np.zeros(n, dtype=bool)
    for i in range(n):  # outright: as fast, no more of anything, and strictly better somewhere (or an earlier twin)
        better = (rate >= rate[i]) & (cpu <= cpu[i]) & (mem <= mem[i])
        strictly = (rate > rate[i]) | (cpu < cpu[i]) | (mem < mem[i]) | (np.arange(n) < i)
        better[i] = False
        beaten[i] = bool(np.any(better & strictly & ~beaten))
    keep = [int(k) for k in np.flatnonzero(~beaten)[np.lexsort((mem[~beaten], cpu[~beaten], -rate[~beaten]))]]
    for i in reversed(list(keep)):  # slowest (and costliest among equals) first
        others = [k for k in keep if k != i]
        if not others:
            break
        a_ub = np.array([np.ones(len(others)), -rate[others], cpu[others], mem[others]])
        b_ub = np.array([1.0, -rate[i], cpu[i], mem[i]])
        res = linprog(np.zeros(len(others)), A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
        if res.status != 0 or res.x is None:
            continue
        lam = np.maximum(res.x, 0.0)
        lam = lam / max(1.0, float(lam.sum()))
        speed = float(lam @ rate[others])
        if speed >= rate[i] > 0:
            lam = lam * (rate[i] / speed)  # the same speed exactly: never more of anything than the mix found
            if lam.sum() <= 1.0 and lam @ cpu[others] <= cpu[i] and lam @ mem[others] <= mem[i]:
                keep.remove(i)
    idx = np.array(sorted(keep), dtype=np.int64)
    return rate[idx], cpu[idx], mem[idx]
