"""Optimistic profiling: estimating a job's sensitivity matrix, as Synergy does.

The paper does not read a job's sensitivity from a table; it measures it.
Optimistic profiling runs the job briefly at a few CPU counts with the whole
dataset cached in memory – so memory never limits – and derives the memory
dimension analytically from the cache hit rate:

* CPU-bound throughput ``Ĉ(c)``: measured at the CPU points of
  :attr:`ProfilerConfig.cpu_points` (each ``repeats`` times with multiplicative,
  mean-preserving log-normal noise of relative size ``noise``) and linearly
  interpolated between them (held constant beyond);
* storage-bound throughput ``S(m)``: with ``m`` GB per GPU the cache hit rate is
  ``h = min(1, m / dataset_gb_per_gpu)``, and the rest of every epoch is read
  from storage, whose bandwidth (``storage_mb_s_per_server`` of the cluster,
  500 MB/s by default) is split across the server's GPUs, so
  ``S(m) = bandwidth per GPU / ((1 − h) · read_mb_s_at_fair)``;
* the estimated matrix is ``min(Ĉ(c), S(m))`` at every grid point.

The job's estimated best-case demand is the smallest CPU level within
``saturation`` (5%) of the best CPU-bound throughput, with the smallest memory
level at which storage no longer limits it (again within 5%). Profiling costs
``len(cpu_points) · repeats · seconds_per_point`` seconds on the job's GPUs,
reported in GPU-minutes.

The simulator's ground truth stays the measured matrix of the model zoo: with
``sensitivity="profiled"`` policies and agents see the estimate while jobs
progress at their true throughput.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from synergy_gym.errors import ConfigError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.profiles import ModelProfile, ModelZoo
from synergy_gym.sim.validation import check_positive, is_number

SENSITIVITIES: tuple[str, ...] = ("true", "profiled")


@dataclass(frozen=True)
class ProfilerConfig:
    """How jobs are profiled (defaults: every CPU level, 5 repeats, no noise)."""

    #: CPUs per GPU to measure; None = every CPU level of the zoo's grid.
    cpu_points: tuple[float, ...] | None = None
    repeats: int = 5
    #: Relative standard deviation of one measurement (0.05 = 5%).
    noise: float = 0.0
    seconds_per_point: float = 10.0
    saturation: float = 0.05
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "repeats", check_positive("profile repeats", self.repeats, integer=True))
        if not (is_number(self.noise) and math.isfinite(self.noise) and 0 <= self.noise < 1):
            raise ConfigError(f"profile noise must be in [0, 1), got {self.noise!r}")
        check_positive("seconds_per_point", self.seconds_per_point, allow_zero=True)
        if not (is_number(self.saturation) and 0 <= self.saturation < 1):
            raise ConfigError(f"saturation must be in [0, 1), got {self.saturation!r}")
        points = self.cpu_points
        if points is not None and (not isinstance(points, (tuple, list, np.ndarray)) or len(points) == 0 or not all(
                is_number(c) and math.isfinite(c) and c > 0 for c in points)):
            raise ConfigError(f"cpu_points must be positive CPU counts, got {points!r}")
        object.__setattr__(self, "seed", check_positive("profile seed", self.seed, integer=True, allow_zero=True))


@dataclass(frozen=True)
class Profiles:
    """Profiling results for a batch of jobs."""

    matrices: np.ndarray  # [job, cpu level, mem level] estimated normalised throughput
    demand_cpu: np.ndarray  # estimated best-case CPUs per GPU
    demand_mem: np.ndarray  # estimated best-case GB per GPU
    cost_gpu_min: np.ndarray  # profiling cost per job


def storage_bound(model: ModelProfile, mem_gb_per_gpu: np.ndarray, cluster: ClusterSpec) -> np.ndarray:
    """Throughput that storage allows with ``mem_gb_per_gpu`` of cache per GPU (inf when all cached)."""
    hit = np.minimum(1.0, np.asarray(mem_gb_per_gpu, dtype=float) / model.dataset_gb_per_gpu)
    bandwidth = cluster.storage_mb_s_per_server / cluster.gpus_per_server
    with np.errstate(divide="ignore"):
        return np.where(hit >= 1.0, np.inf, bandwidth / ((1.0 - hit) * model.read_mb_s_at_fair))


def model_estimate(model: ModelProfile, cpu_bound: np.ndarray, cluster: ClusterSpec) -> np.ndarray:
    """The estimated matrix ``min(Ĉ(c), S(m))`` from a CPU-bound curve over the CPU levels."""
    return np.minimum(cpu_bound[:, None], storage_bound(model, model.mem_grid, cluster)[None, :])


def profile_jobs(
    zoo: ModelZoo,
    model: np.ndarray,
    gpus: np.ndarray,
    job_id: np.ndarray,
    cluster: ClusterSpec,
    config: ProfilerConfig,
) -> Profiles:
    """Profile every job; the noise of job ``k`` comes from seed ``(config.seed, k)`` alone."""
    cpu_grid = zoo.cpu_grid
    points = np.asarray(config.cpu_points if config.cpu_points is not None else cpu_grid, dtype=float)
    order = np.argsort(points)
    points = points[order]
    n = len(model)
    matrices = np.empty((n, len(cpu_grid), len(zoo.mem_grid)))
    demand_cpu = np.empty(n)
    demand_mem = np.empty(n)
    storage = {m: storage_bound(zoo[m], zoo.mem_grid, cluster) for m in set(np.asarray(model).tolist())}
    for i, (m, k) in enumerate(zip(np.asarray(model).tolist(), np.asarray(job_id).tolist())):
        profile = zoo[m]
        truth = np.array([profile.throughput(c, profile.mem_grid[-1]) for c in points])
        if config.noise > 0:
            rng = np.random.default_rng([config.seed, int(k)])
            sigma = math.sqrt(math.log1p(config.noise**2))  # log-normal with mean 1 and this relative std
            factors = np.exp(rng.normal(-sigma**2 / 2, sigma, (config.repeats, len(points)))).mean(axis=0)
            measured = truth * factors
        else:
            measured = truth
        cpu_bound = np.interp(cpu_grid, points, measured)
        est = np.minimum(cpu_bound[:, None], storage[m][None, :])
        matrices[i] = est
        c_star = int(np.argmax(cpu_bound >= (1 - config.saturation) * cpu_bound.max()))
        row = est[c_star]
        near = row >= (1 - config.saturation) * cpu_bound[c_star]
        m_star = int(np.argmax(near)) if near.any() else int(np.argmax(row))  # (storage-bound everywhere: the fastest)
        demand_cpu[i] = cpu_grid[c_star]
        demand_mem[i] = profile.mem_grid[m_star]
    cost = len(points) * config.repeats * config.seconds_per_point * np.asarray(gpus, dtype=float) / 60.0
    return Profiles(matrices=matrices, demand_cpu=demand_cpu, demand_mem=demand_mem, cost_gpu_min=cost)
