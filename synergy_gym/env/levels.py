"""Allocation levels: the few (CPUs, GB per GPU) points worth offering a job, for a scheduling agent.

``kind="default"`` gives five levels per job type (model, GPU count), in this order:

0. the fair share;
1. the job's best-case demand (capped at one server, as the simulator caps it; a
   request slower than its fallback – below the fair share, as a trace's can be – is
   the fallback, the fair share, which is what Tune gives such a job);
2.–4. for p = 0.9, 0.75 and 0.5, the cheapest grid point whose throughput is at
   least ``fair + p · (demand − fair)``, where cost = CPUs / server CPUs + GB /
   server GB (ties: the faster point, then fewer CPUs).

Only grid points that can ever be honoured are candidates – as fast as the fair
share, also when capped at it (what Tune falls back to), and within one server
for the job's GPUs – so no level is slower than the fair share. Levels may
coincide (an insensitive job's cheapest adequate point is often its demand);
the set has a fixed size so that an action space over it does.

``kind="grid"`` gives every grid point (9 CPU × 5 memory levels, row-major);
a grid level is valid for a job only where it can ever be honoured.

:class:`LevelTable` gives every job of an episode its levels at once (the
environment's action space is slots × levels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.profiles import ModelZoo, capped_demand_per_gpu
from synergy_gym.sim.validation import check_positive, is_integer, shown

LEVEL_KINDS: tuple[str, ...] = ("default", "grid")
FAIR_LEVEL = 0  #: index of the fair-share level (``kind="default"``)
DEMAND_LEVEL = 1  #: index of the demand level (``kind="default"``)
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
    """The allocation levels of a ``gpus``-GPU job of ``model`` on ``cluster`` (see the module docstring).

    ``model`` is an index into ``zoo`` (0 to ``len(zoo) - 1``) and ``gpus`` a positive integer;
    anything else is a one-line :class:`ConfigError`.
    """
    check_kind(kind)
    if not isinstance(zoo, ModelZoo):
        raise ConfigError(f"allocation_levels(): zoo must be a ModelZoo (e.g. ModelZoo.default()), got {shown(zoo)}")
    if not isinstance(cluster, ClusterSpec):
        raise ConfigError(f"allocation_levels(): cluster must be a ClusterSpec (e.g. cluster_preset('default')), "
                          f"got {shown(cluster)}")
    if not (is_integer(model) and 0 <= model < len(zoo)):
        raise ConfigError(f"allocation_levels(): model must be a model index 0..{len(zoo) - 1} of the zoo, "
                          f"got {shown(model)}")
    model = int(model)
    gpus = check_positive("allocation_levels(): gpus", gpus, integer=True)
    grid = GridPoints(zoo)
    fair_cpu, fair_mem = cluster.fair_cpus_per_gpu, cluster.fair_mem_gb_per_gpu
    tput, capped = grid_throughputs(zoo, cluster, grid, model)
    profile = zoo[model]
    n_gpus = np.array([gpus])
    d_cpu = capped_demand_per_gpu(np.array([profile.demand_cpus_per_gpu]), n_gpus, fair_cpu, cluster.cpus_per_server)
    d_mem = capped_demand_per_gpu(np.array([profile.demand_mem_gb_per_gpu]), n_gpus, fair_mem, cluster.mem_gb_per_server)
    demand_cpu, demand_mem = float(d_cpu[0]), float(d_mem[0])
    demand = Level(demand_cpu, demand_mem, zoo.throughput_of(model, demand_cpu, demand_mem))
    fair = Level(fair_cpu, fair_mem, zoo.throughput_of(model, fair_cpu, fair_mem))
    levels, _ = levels_from_grid(grid, cluster, tput, capped, fair, demand, gpus, kind)
    return levels


@dataclass(frozen=True)
class GridPoints:
    """The zoo's (CPUs, GB per GPU) grid, row-major (CPU level, memory level)."""

    cpu: np.ndarray
    mem: np.ndarray

    def __init__(self, zoo: ModelZoo) -> None:
        n_cpu, n_mem = len(zoo.cpu_grid), len(zoo.mem_grid)
        object.__setattr__(self, "cpu", np.repeat(np.asarray(zoo.cpu_grid, dtype=float), n_mem))
        object.__setattr__(self, "mem", np.tile(np.asarray(zoo.mem_grid, dtype=float), n_cpu))


def check_kind(kind: str) -> None:
    if kind not in LEVEL_KINDS:
        raise UnknownNameError("levels", kind, LEVEL_KINDS)


def level_count(zoo: ModelZoo, kind: str) -> int:
    """How many levels a job has: 2 + ``len(DEFAULT_FRACTIONS)``, or every grid point."""
    check_kind(kind)
    return 2 + len(DEFAULT_FRACTIONS) if kind == "default" else len(zoo.cpu_grid) * len(zoo.mem_grid)


def levels_from_grid(
    grid: GridPoints,
    cluster: ClusterSpec,
    tput: np.ndarray,
    capped: np.ndarray,
    fair: Level,
    demand: Level,
    gpus: int,
    kind: str,
) -> tuple[tuple[Level, ...], np.ndarray]:
    """Levels and their validity from a job's throughput over the grid (``tput``) and capped at the fair share.

    Works for a model's measured matrix and for a job's profiled estimate alike.
    Default levels are always valid; a grid level is valid when it can ever be
    honoured (:func:`honourable_points`).
    """
    ok = honourable_points(cluster, grid.cpu, grid.mem, tput, capped, fair.tput, gpus)
    if kind == "grid":
        return tuple(Level(float(c), float(m), float(t)) for c, m, t in zip(grid.cpu, grid.mem, tput)), ok
    cost = grid.cpu / cluster.cpus_per_server + grid.mem / cluster.mem_gb_per_server
    levels = [fair, demand]
    top = max(demand.tput, fair.tput)
    for p in DEFAULT_FRACTIONS:
        need = fair.tput + p * (top - fair.tput)
        idx = np.flatnonzero(ok & (tput >= need - _EPS))
        if idx.size == 0:  # nothing on the grid is that fast within one server: the demand is
            levels.append(demand if demand.tput >= fair.tput else fair)
            continue
        best = min(idx.tolist(), key=lambda k: (cost[k], -tput[k], grid.cpu[k]))
        levels.append(Level(float(grid.cpu[best]), float(grid.mem[best]), float(tput[best])))
    return tuple(levels), np.ones(len(levels), dtype=bool)


def grid_throughputs(zoo: ModelZoo, cluster: ClusterSpec, grid: GridPoints, model: int) -> tuple[np.ndarray, np.ndarray]:
    """``model``'s measured throughput at each grid point, and there capped at the cluster's fair share."""
    models = np.full(grid.cpu.size, model)
    fair_cpu, fair_mem = cluster.fair_cpus_per_gpu, cluster.fair_mem_gb_per_gpu
    return (zoo.throughput_many(models, grid.cpu, grid.mem),
            zoo.throughput_many(models, np.minimum(grid.cpu, fair_cpu), np.minimum(grid.mem, fair_mem)))


def no_grid_level(job: str, gpus: int, cluster: ClusterSpec) -> ConfigError:
    """The one-line error for a ``gpus``-GPU ``job`` no grid point of which could ever be honoured."""
    per_server = min(gpus, cluster.gpus_per_server)
    return ConfigError(
        f"env kwarg levels='grid': {job} has no grid level it could ever be admitted at: no grid point at least as "
        f"fast as its fair share fits one server ({cluster.cpus_per_server:g} CPUs, {cluster.mem_gb_per_server:g} GB) "
        f"for its {per_server} GPUs there; use levels='default', whose fair level always fits"
    )


def check_grid_levels(zoo: ModelZoo, cluster: ClusterSpec, shapes: list[tuple[int, int, str]]) -> None:
    """Refuse, before any episode, a job of ``shapes`` (``(model, GPUs, what it is)``) with no grid level it could
    ever be given (:func:`honourable_points` of the measured matrix; :meth:`LevelTable.build` checks each episode too)."""
    grid = GridPoints(zoo)
    for model, gpus in dict.fromkeys((m, g) for m, g, _ in shapes):
        tput, capped = grid_throughputs(zoo, cluster, grid, model)
        fair = zoo.throughput_of(model, cluster.fair_cpus_per_gpu, cluster.fair_mem_gb_per_gpu)
        if not honourable_points(cluster, grid.cpu, grid.mem, tput, capped, fair, gpus).any():
            what = next(text for m, g, text in shapes if (m, g) == (model, gpus))
            raise no_grid_level(what, gpus, cluster)


class LevelTable:
    """Every job's levels for one episode, as arrays ``(jobs, levels)``, cached per (model, GPUs).

    Built from what the scheduler believes about each job (the measured matrix,
    or its profiled estimate); the demand level is the job's own demand target
    (``jobs.target_cpu`` / ``target_mem`` when the table is built), so that
    choosing it asks for exactly what Synergy-Tune asks for – or, for a target
    Tune never tries, its fallback (:func:`granted_demand`).
    """

    def __init__(self, zoo: ModelZoo, cluster: ClusterSpec, kind: str = "default") -> None:
        check_kind(kind)
        self.zoo, self.cluster, self.kind = zoo, cluster, kind
        self.n_levels = level_count(zoo, kind)
        self.grid = GridPoints(zoo)
        self._cache: dict[tuple[int, int, float, float], tuple[np.ndarray, ...]] = {}

    def build(self, jobs: JobTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(cpu, mem, tput, valid)``, each of shape ``(jobs.n, n_levels)``, for the jobs' current targets as demand."""
        n, L = jobs.n, self.n_levels
        if jobs.belief is not None:  # profiled: every job's levels come from its own estimate
            cpu, mem, tput = np.empty((n, L)), np.empty((n, L)), np.empty((n, L))
            valid = np.empty((n, L), dtype=bool)
            for j in range(n):
                cpu[j], mem[j], tput[j], valid[j] = self._levels(jobs, j, granted_demand(jobs, j))
            return cpu, mem, tput, valid
        # Jobs of one (model, GPUs, demand) have the same levels: a row per distinct one, then gathered.
        keys = list(zip(jobs.model.tolist(), jobs.gpus_l, jobs.target_cpu_l, jobs.target_mem_l))
        first: dict[tuple[int, int, float, float], int] = {}  # each distinct key's first job
        for j, key in enumerate(keys):
            first.setdefault(key, j)
        rows = []
        for key, j in first.items():
            cached = self._cache.get(key)
            if cached is None:
                cached = self._cache[key] = self._levels(jobs, j, granted_demand(jobs, j))
            rows.append(cached)
        row_of = {key: r for r, key in enumerate(first)}
        at = np.fromiter((row_of[key] for key in keys), dtype=np.int64, count=n)
        cpu, mem, tput, valid = (np.stack([row[c] for row in rows])[at] for c in range(4))
        return cpu, mem, tput, valid.astype(bool, copy=False)

    def _levels(self, jobs: JobTable, j: int, demand: Level) -> tuple[np.ndarray, ...]:
        grid = self.grid
        idx = np.full(grid.cpu.size, j)
        tput = jobs.est_throughput_many(idx, grid.cpu, grid.mem)
        capped = jobs.est_throughput_many(idx, np.minimum(grid.cpu, jobs.fair_cpu), np.minimum(grid.mem, jobs.fair_mem))
        fair = Level(jobs.fair_cpu, jobs.fair_mem, jobs.tput_fair_l[j])
        levels, valid = levels_from_grid(grid, self.cluster, tput, capped, fair, demand, jobs.gpus_l[j], self.kind)
        if not valid.any():  # (only on the grid: a default table's fair level is always valid)
            raise no_grid_level(
                f"job {int(jobs.job_id[j])} ({self.zoo[int(jobs.model[j])].name}, {jobs.gpus_l[j]} GPUs)",
                jobs.gpus_l[j], self.cluster)
        return (
            np.array([lv.cpus_per_gpu for lv in levels]),
            np.array([lv.mem_gb_per_gpu for lv in levels]),
            np.array([lv.tput for lv in levels]),
            valid,
        )


def granted_demand(jobs: JobTable, j: int) -> Level:
    """Job ``j``'s demand level: its target, or – for a target slower than its fallback (a request below the fair
    share that the job's profile punishes, as trace requests can be) – the fallback, which is what Tune grants it
    then (it never tries such a target), so that the level shows what admitting at it gives."""
    if jobs.tput_target_l[j] < jobs.tput_fallback_l[j]:
        return Level(jobs.fallback_cpu_l[j], jobs.fallback_mem_l[j], jobs.tput_fallback_l[j])
    return Level(jobs.target_cpu_l[j], jobs.target_mem_l[j], jobs.tput_target_l[j])
