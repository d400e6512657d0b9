"""The environment's observations: a ``Dict`` of ``Box`` spaces whose shapes do not depend on the cluster size.

Durations enter as ``h / (h + 10)``; counts and sizes are scaled into [0, 1]. See
the *Observation Space* section of :class:`~synergy_gym.env.SynergyEnv`.
"""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from synergy_gym.cluster import ClusterSpec
from synergy_gym.profiles import TASKS, ModelZoo
from synergy_gym.simulator import Simulator
from synergy_gym.workload import Workload

HIST_BINS = 5  # bins of the per-server free-resource histograms
TIME_SCALE_H = 10.0  # durations enter observations as h / (h + 10)
JOB_FEATURES = (
    "log_gpus", "vision", "language", "speech", "demand_cpus", "demand_mem", "speedup",
    "age", "remaining_fraction", "runtime_fair", "runtime_demand", "defers", "has_preference", "fair_tput",
)
QUEUE_FEATURES = (
    "log_gpus", "vision", "language", "speech", "demand_cpus", "demand_mem", "speedup",
    "age", "runtime_fair", "runtime_demand",
)


class ObservationBuilder:
    """Builds observations from the simulator's state; per-episode constants are set by :meth:`new_episode`."""

    def __init__(self, cluster: ClusterSpec, zoo: ModelZoo, max_queue: int, n_actions: int) -> None:
        self.cluster = cluster
        self.zoo = zoo
        self.max_queue = q = int(max_queue)
        self.n_grid = len(zoo.cpu_grid) * len(zoo.mem_grid)
        tensor = zoo.tput_tensor()
        self.tput_scale = float(tensor.max())
        self.sensitivity = (tensor.reshape(len(zoo), -1) / self.tput_scale).astype(np.float32)
        self.space = spaces.Dict(
            {
                "job": spaces.Box(0.0, 1.0, (len(JOB_FEATURES),), np.float32),
                "job_sensitivity": spaces.Box(0.0, 1.0, (self.n_grid,), np.float32),
                "cluster": spaces.Box(0.0, 1.0, (3 + 3 * HIST_BINS + 2,), np.float32),
                "queue": spaces.Box(0.0, 1.0, (q * len(QUEUE_FEATURES),), np.float32),
                "queue_mask": spaces.Box(0.0, 1.0, (q,), np.float32),
                "time": spaces.Box(0.0, 1.0, (1,), np.float32),
                "action_mask": spaces.Box(0.0, 1.0, (n_actions,), np.float32),
            }
        )

    def new_episode(self, sim: Simulator, workload: Workload) -> None:
        """Per-episode constants; call before any preference changes a job's target."""
        jobs = sim.jobs
        self.static = self._static_features(sim, workload)
        self.arrival_h = jobs.arrival_s / 3600.0
        self.fair_h_per_iter = jobs.iter_time_s / jobs.tput_fair / 3600.0
        self.demand_h_per_iter = jobs.iter_time_s / jobs.tput_target / 3600.0  # targets are the demand here

    def _static_features(self, sim: Simulator, w: Workload) -> np.ndarray:
        """Per-job features that do not change during the episode (queue feature layout)."""
        zoo = self.zoo
        demand_cpu, demand_mem = sim.jobs.target_cpu, sim.jobs.target_mem  # the demand, before any preference
        n = len(w)
        f = np.zeros((n, len(QUEUE_FEATURES)), dtype=np.float32)
        f[:, 0] = np.log2(w.gpus) / max(1.0, math.log2(self.cluster.total_gpus))
        task = np.array([TASKS.index(m.task) for m in zoo.models])[w.model]
        f[np.arange(n), 1 + task] = 1.0
        f[:, 4] = demand_cpu / zoo.cpu_grid[-1]
        f[:, 5] = demand_mem / zoo.mem_grid[-1]
        f[:, 6] = sim.jobs.tput_target / self.tput_scale
        return np.clip(f, 0.0, 1.0)

    def build(
        self, sim: Simulator, j: int, defers: float, has_preference: bool, mask: np.ndarray, time_fraction: float
    ) -> dict[str, np.ndarray]:
        """The observation while job ``j`` (−1: none, the episode has ended) awaits a decision.

        ``defers`` is its deferrals / ``max_defer_rounds``; ``mask`` its valid actions (float32).
        """
        jobs = sim.jobs
        now_h = sim.now / 3600.0
        q = self.max_queue
        queue = np.zeros((q, len(QUEUE_FEATURES)), dtype=np.float32)
        queue_mask = np.zeros(q, dtype=np.float32)
        if j < 0:
            job = np.zeros(len(JOB_FEATURES), dtype=np.float32)
            sensitivity = np.zeros(self.n_grid, dtype=np.float32)
        else:
            left = float(jobs.total_iters[j] - jobs.executed[j])
            age = now_h - float(self.arrival_h[j])
            fair = left * float(self.fair_h_per_iter[j])
            demand = left * float(self.demand_h_per_iter[j])
            job = np.concatenate(
                [
                    self.static[j, :7],
                    np.array(
                        [
                            age / (age + TIME_SCALE_H),
                            left / float(jobs.total_iters[j]),
                            fair / (fair + TIME_SCALE_H),
                            demand / (demand + TIME_SCALE_H),
                            min(1.0, defers),
                            1.0 if has_preference else 0.0,
                            min(1.0, float(jobs.tput_fair[j]) / self.tput_scale),
                        ],
                        dtype=np.float32,
                    ),
                ]
            )
            if jobs.belief is None:
                sensitivity = self.sensitivity[jobs.model[j]].copy()
            else:  # the job's estimated matrix
                sensitivity = np.minimum(jobs.belief[j].reshape(-1) / self.tput_scale, 1.0).astype(np.float32)
            waiting = sim.planner.waiting_after(q)
            if waiting:
                idx = np.asarray(waiting, dtype=np.int64)
                k = idx.size
                left_q = jobs.total_iters[idx] - jobs.executed[idx]
                times = np.empty((k, 3))
                times[:, 0] = now_h - self.arrival_h[idx]
                times[:, 1] = left_q * self.fair_h_per_iter[idx]
                times[:, 2] = left_q * self.demand_h_per_iter[idx]
                queue[:k, :7] = self.static[idx, :7]
                queue[:k, 7:] = times / (times + TIME_SCALE_H)
                queue_mask[:k] = 1.0
        return {
            "job": job,
            "job_sensitivity": sensitivity,
            "cluster": self.cluster_features(sim),
            "queue": queue.reshape(-1),
            "queue_mask": queue_mask,
            "time": np.array([min(1.0, time_fraction)], dtype=np.float32),
            "action_mask": mask,
        }

    def cluster_features(self, sim: Simulator) -> np.ndarray:
        c = self.cluster
        ledger = sim.ledger
        bins = HIST_BINS
        out = [0.0] * (3 + 3 * bins + 2)
        out[0] = sim.planner.free_gpus / c.total_gpus
        step = 1.0 / c.num_servers
        top = bins - 1
        # Pure Python: a few dozen servers are faster than numpy's per-call overhead.
        for k, free, scale in (
            (0, ledger.free_gpu, bins / c.gpus_per_server),
            (1, ledger.free_cpu, bins / c.cpus_per_server),
            (2, ledger.free_mem, bins / c.mem_gb_per_server),
        ):
            base = 3 + k * bins
            total = 0.0
            for f in free:
                x = f * scale  # free fraction × bins
                if x < 0.0:
                    x = 0.0
                elif x > bins:
                    x = float(bins)
                total += x
                b = int(x)
                out[base + (b if b < top else top)] += step
            if k:
                out[k] = total * step / bins
        running = len(ledger.jobs)
        queued = sim.runnable.size - running
        if queued < 0:
            queued = 0
        out[3 + 3 * bins] = running / (running + c.total_gpus)
        out[4 + 3 * bins] = queued / (queued + c.total_gpus)
        return np.array(out, dtype=np.float32)
