"""Allocation levels: the few (CPUs, GB per GPU) points worth offering a job, for a scheduling agent.

``kind="default"`` gives five levels per job type (model, GPU count), in this order:

0. the fair share;
1. the job's best-case demand (capped at one server, as the simulator caps it);
2.–4. for p = 0.9, 0.75 and 0.5, the cheapest grid point whose throughput is at
   least ``fair + p · (demand − fair)``, where cost = CPUs / server CPUs + GB /
   server GB (ties: the faster point, then fewer CPUs).

Only grid points that can ever be honoured are candidates – as fast as the fair
share, also when capped at it (what Tune falls back to), and within one server
for the job's GPUs – so no level is slower than the fair share. Levels may
coincide (an insensitive job's cheapest adequate point is often its demand);
the set has a fixed size so that an action space over it does.

``kind="grid"`` gives every grid point (9 CPU × 5 memory levels, row-major).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_gym.cluster import ClusterSpec
from synergy_gym.errors import UnknownNameError
from synergy_gym.profiles import ModelZoo, capped_demand_per_gpu

LEVEL_KINDS: tuple[str, ...] = ("default", "grid")
#: Fractions of the way from fair-share to demand throughput of the default levels 2–4.
DEFAULT_FRACTIONS: tuple[float, ...] = (0.9, 0.75, 0.5)
_EPS = 1e-12


@dataclass(frozen=True)
class Level:
    """One allocation level: per-GPU CPUs and GB, and the normalised throughput there."""

    cpus_per_gpu: float
    mem_gb_per_gpu: float
    tput: float


def honourable_points(
    cluster: ClusterSpec, cpu: np.ndarray, mem: np.ndarray, tput: np.ndarray, capped: np.ndarray, fair_tput: float, gpus: int
) -> np.ndarray:
    """Which (cpu, mem) per-GPU points can ever be honoured for a ``gpus``-GPU job.

    A point must be as fast as the fair share (``tput``), also when capped at
    the fair share (``capped``: what Tune falls back to), and fit one server
    for the job's GPUs.
    """
    per_server = min(gpus, cluster.gpus_per_server)
    fits = (per_server * cpu <= cluster.cpus_per_server + 1e-9) & (per_server * mem <= cluster.mem_gb_per_server + 1e-9)
    return (tput >= fair_tput - _EPS) & (capped >= fair_tput - _EPS) & fits


def allocation_levels(zoo: ModelZoo, cluster: ClusterSpec, model: int, gpus: int, kind: str = "default") -> tuple[Level, ...]:
    """The allocation levels of a ``gpus``-GPU job of ``model`` on ``cluster`` (see the module docstring)."""
    if kind not in LEVEL_KINDS:
        raise UnknownNameError("levels", str(kind), LEVEL_KINDS)
    n_cpu, n_mem = len(zoo.cpu_grid), len(zoo.mem_grid)
    cpu = np.repeat(zoo.cpu_grid, n_mem)
    mem = np.tile(zoo.mem_grid, n_cpu)
    models = np.full(cpu.size, model)
    tput = zoo.throughput_many(models, cpu, mem)
    if kind == "grid":
        return tuple(Level(float(c), float(m), float(t)) for c, m, t in zip(cpu, mem, tput))
    fair_cpu, fair_mem = cluster.fair_cpus_per_gpu, cluster.fair_mem_gb_per_gpu
    fair = Level(fair_cpu, fair_mem, zoo.throughput_of(model, fair_cpu, fair_mem))
    profile = zoo[model]
    d_cpu = float(capped_demand_per_gpu(np.array([profile.demand_cpus_per_gpu]), np.array([gpus]), fair_cpu, cluster.cpus_per_server)[0])
    d_mem = float(capped_demand_per_gpu(np.array([profile.demand_mem_gb_per_gpu]), np.array([gpus]), fair_mem, cluster.mem_gb_per_server)[0])
    demand = Level(d_cpu, d_mem, zoo.throughput_of(model, d_cpu, d_mem))
    capped = zoo.throughput_many(models, np.minimum(cpu, fair_cpu), np.minimum(mem, fair_mem))
    ok = honourable_points(cluster, cpu, mem, tput, capped, fair.tput, gpus)
    cost = cpu / cluster.cpus_per_server + mem / cluster.mem_gb_per_server
    levels = [fair, demand]
    top = max(demand.tput, fair.tput)
    for p in DEFAULT_FRACTIONS:
        need = fair.tput + p * (top - fair.tput)
        idx = np.flatnonzero(ok & (tput >= need - _EPS))
        if idx.size == 0:  # nothing on the grid is that fast within one server: the demand is
            levels.append(demand if demand.tput >= fair.tput else fair)
            continue
        best = min(idx.tolist(), key=lambda k: (cost[k], -tput[k], cpu[k]))
        levels.append(Level(float(cpu[best]), float(mem[best]), float(tput[best])))
    return tuple(levels)
