"""The environment's observations: a ``Dict`` of ``Box`` spaces whose shapes do not depend on the cluster size.

Durations enter as ``h / (h + 10)`` (:func:`squash_hours`; :func:`hours` inverts
it), counts ``n`` as ``n / (n + cluster GPUs)``; resources per GPU relative to
the fair share (1.0 = the fair share) and speed-ups relative to the fair-share
throughput. See the *Observation Space* section of
:class:`~synergy_gym.env.SynergyEnv`; the feature names below are the column
order, so that policies reading observations (``synergy_gym.baselines.env_heuristics``)
need nothing else.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from synergy_gym.sim import kernels
from synergy_gym.sim.cluster import ClusterSpec

# Bins of the histograms (5); durations enter observations as h / (h + TIME_SCALE_H) (10 h).
from synergy_gym.sim.kernels import HIST_BINS, TIME_SCALE_H
from synergy_gym.sim.profiles import TASKS, ModelZoo
from synergy_gym.sim.simulator import Simulator

#: Per slot (a waiting job whose GPUs fit now), ``slots[q]``.
SLOT_FEATURES = (
    "gpu_share",  # GPUs / cluster GPUs
    "log_gpus",  # log2(GPUs) / 7
    "vision", "language", "speech",  # task one-hot
    "remaining_fraction",  # iterations left / total
    "runtime_fair",  # run time left at the fair share (squashed hours)
    "runtime_demand",  # run time left at its best-case demand (squashed hours)
    "age",  # time since arrival (squashed hours)
    "attained",  # time it has run so far (squashed hours)
    "was_running",  # it held GPUs until this event (preemptive mode)
)
#: Per slot and level, ``slot_levels[q, level]``.
LEVEL_FEATURES = (
    "cpu",  # CPUs per GPU / the fair share's
    "mem",  # GB per GPU / the fair share's
    "speedup",  # throughput / fair-share throughput (≥ 1)
)
#: What the running jobs hold and how fast they run, ``running``.
RUNNING_FEATURES = (
    "jobs",  # running jobs n / (n + cluster GPUs)
    "mean_speedup",  # GPU-weighted mean speed-up over the fair share
    *(f"speedup_hist_{b}" for b in range(HIST_BINS)),  # fraction of running jobs per speed-up bin over [1, max]
    *(f"runtime_hist_{b}" for b in range(HIST_BINS)),  # fraction per bin of squashed run time left at their rate
)
#: Best-case demand against capacity, ``demand``: each ratio x (demand / capacity) enters as x / (x + 1).
DEMAND_FEATURES = ("running_cpu", "running_mem", "waiting_cpu", "waiting_mem", "waiting_gpus")
#: The waiting jobs not in a slot, ``queue_rest``.
QUEUE_REST_FEATURES = (
    "beyond_slots",  # waiting jobs that fit but have no slot, n / (n + cluster GPUs)
    "beyond_slots_work",  # their GPU-hours left at the fair share / cluster GPUs (squashed)
    "not_fitting",  # waiting jobs whose GPUs do not fit now, n / (n + cluster GPUs)
)
_AGE = SLOT_FEATURES.index("age")
CLUSTER_FEATURES = (
    "free_gpus", "free_cpus", "free_mem",
    *(f"{r}_free_hist_{b}" for r in ("gpu", "cpu", "mem") for b in range(HIST_BINS)),
    "running", "waiting",
)


#: Bounds of the level features: resources per GPU relative to the fair share, and speed-ups, are
#: clipped here (the same for every cluster, so that all environment ids share one observation space).
RESOURCE_HIGH = 16.0
SPEEDUP_HIGH = 8.0


def slot_arrays(obs: dict) -> tuple[np.ndarray, np.ndarray]:
    """``obs["slots"]`` as (…, slots, features) and ``obs["slot_levels"]`` as (…, slots, levels, 3).

    The observation keeps them flat (1-D per environment, as Stable-Baselines3's
    checker wants); works on single and batched observations, numpy or torch.
    """
    q = obs["slot_mask"].shape[-1]
    slots = obs["slots"].reshape(*obs["slots"].shape[:-1], q, len(SLOT_FEATURES))
    levels = obs["slot_levels"]
    n_levels = levels.shape[-1] // (q * len(LEVEL_FEATURES))
    return slots, levels.reshape(*levels.shape[:-1], q, n_levels, len(LEVEL_FEATURES))


def squash_hours(h):
    """Hours as observed: ``h / (h + 10)``."""
    return h / (h + TIME_SCALE_H)


def hours(x):
    """The hours a squashed observation stands for (inverse of :func:`squash_hours`)."""
    return TIME_SCALE_H * x / np.maximum(1.0 - x, 1e-9)


class ObservationBuilder:
    """Builds observations from the simulator's state and the episode's level table."""

    def __init__(self, cluster: ClusterSpec, zoo: ModelZoo, max_queue: int, n_levels: int, n_actions: int) -> None:
        self.cluster = cluster
        self.zoo = zoo
        self.q = q = int(max_queue)
        self.n_levels = n_levels
        self.speedup_max = speedup_max = SPEEDUP_HIGH
        level_high = np.array([RESOURCE_HIGH, RESOURCE_HIGH, SPEEDUP_HIGH], dtype=np.float32)
        self.space = spaces.Dict(
            {
                "slots": spaces.Box(0.0, 1.0, (q * len(SLOT_FEATURES),), np.float32),
                "slot_levels": spaces.Box(0.0, np.tile(level_high, q * n_levels), dtype=np.float32),
                "slot_mask": spaces.Box(0.0, 1.0, (q,), np.float32),
                "cluster": spaces.Box(0.0, 1.0, (len(CLUSTER_FEATURES),), np.float32),
                "running": spaces.Box(
                    0.0, np.array([1.0, speedup_max] + [1.0] * (2 * HIST_BINS), dtype=np.float32), dtype=np.float32
                ),
                "demand": spaces.Box(0.0, 1.0, (len(DEMAND_FEATURES),), np.float32),
                "queue_rest": spaces.Box(0.0, 1.0, (len(QUEUE_REST_FEATURES),), np.float32),
                "time": spaces.Box(0.0, 1.0, (1,), np.float32),
                "action_mask": spaces.Box(0.0, 1.0, (n_actions,), np.float32),
            }
        )
        self._level_high = level_high
        self._speedup_bin_scale = HIST_BINS / max(speedup_max - 1.0, 1e-9)
        # Histogram bins per free GPU, CPU and GB of a server.
        self._free_scales = np.array(
            [HIST_BINS / cluster.gpus_per_server, HIST_BINS / cluster.cpus_per_server, HIST_BINS / cluster.mem_gb_per_server]
        )

    def new_episode(
        self, sim: Simulator, level_cpu: np.ndarray, level_mem: np.ndarray, level_tput: np.ndarray, never_ran: bool
    ) -> None:
        """Per-episode constants; call before any level changes a job's target (targets are the demand then).

        ``never_ran``: waiting jobs have never run (non-preemptive scheduling), so
        their slot features are known up front but for their age.
        """
        self.never_ran = never_ran
        jobs = sim.jobs
        c = self.cluster
        n = jobs.n
        static = np.zeros((n, 5), dtype=np.float32)
        static[:, 0] = jobs.gpus / c.total_gpus
        static[:, 1] = np.minimum(np.log2(jobs.gpus) / 7.0, 1.0)
        task = np.array([TASKS.index(m.task) for m in self.zoo.models])[jobs.model]
        static[np.arange(n), 2 + task] = 1.0
        self.static = static
        self.arrival_h = jobs.arrival_s / 3600.0
        self.fair_h_per_iter = jobs.iter_time_s / jobs.tput_fair / 3600.0
        self.demand_h_per_iter = jobs.iter_time_s / jobs.tput_target / 3600.0
        levels = np.empty((n, self.n_levels, 3), dtype=np.float32)
        levels[:, :, 0] = level_cpu / c.fair_cpus_per_gpu
        levels[:, :, 1] = level_mem / c.fair_mem_gb_per_gpu
        levels[:, :, 2] = level_tput / jobs.tput_fair[:, None]
        self.levels = np.minimum(levels, self._level_high)
        # Per job: best-case CPU and memory demand and GPUs, as fractions of the cluster's.
        self.demand = np.stack(
            [jobs.gpus * jobs.target_cpu / c.total_cpus, jobs.gpus * jobs.target_mem / c.total_mem_gb, static[:, 0]], axis=1
        )
        self.demand_running = np.ascontiguousarray(self.demand[:, :2])
        self.h_per_iter = np.stack([self.fair_h_per_iter, self.demand_h_per_iter], axis=1)
        self.fair_gpu_h_per_iter = jobs.gpus * self.fair_h_per_iter / c.total_gpus
        # What running_features reads per running job, gathered at once: GPUs, 1 / fair-share
        # throughput, hours per iteration at throughput 1.
        self.running_static = np.stack([jobs.gpus.astype(float), 1.0 / jobs.tput_fair, jobs.iter_time_s / 3600.0], axis=1)
        fresh = np.zeros((n, len(SLOT_FEATURES)), dtype=np.float32)
        fresh[:, :5] = static
        fresh[:, 5] = 1.0
        fresh[:, 6:8] = squash_hours(jobs.total_iters[:, None] * self.h_per_iter)
        self.fresh_rows = fresh

    def empty(self, mask: np.ndarray, time_fraction: float) -> dict[str, np.ndarray]:
        """The observation once the episode has ended."""
        obs: dict[str, np.ndarray] = {
            name: np.zeros(space.shape or (), dtype=np.float32) for name, space in self.space.spaces.items()
        }
        obs["action_mask"] = mask
        obs["time"] = np.array([min(1.0, time_fraction)], dtype=np.float32)
        return obs

    def build(
        self,
        sim: Simulator,
        slots: np.ndarray,
        waiting: np.ndarray,
        fits: np.ndarray,
        held: np.ndarray,
        was_running: np.ndarray,
        mask: np.ndarray,
        time_fraction: float,
    ) -> dict[str, np.ndarray]:
        """The observation at a decision.

        ``slots``: the slot jobs; ``waiting``: every waiting job (arrival order)
        with ``fits`` whether its GPUs fit now; ``held``: the jobs admitted so
        far this event; ``was_running``: per job, whether it held GPUs before
        this event; ``mask``: the valid actions (float32).
        """
        q, k = self.q, slots.size
        slot_obs = np.zeros((q, len(SLOT_FEATURES)), dtype=np.float32)
        slot_levels = np.zeros((q, self.n_levels, 3), dtype=np.float32)
        slot_mask = np.zeros(q, dtype=np.float32)
        if k:
            now_h = sim.now / 3600.0
            if self.never_ran:  # every waiting job is as it arrived: only its age changes
                kernels.fresh_slot_rows(
                    slots, self.fresh_rows, self.levels, self.arrival_h, now_h, _AGE, slot_obs, slot_levels, slot_mask
                )
            else:
                kernels.slot_rows(
                    slots, self.static, self.h_per_iter, sim.jobs.progress, self.levels, self.arrival_h, was_running,
                    now_h, slot_obs, slot_levels, slot_mask,
                )
        return {
            "slots": slot_obs.reshape(-1),
            "slot_levels": slot_levels.reshape(-1),
            "slot_mask": slot_mask,
            "cluster": self.cluster_features(sim, waiting.size),
            "running": self.running_features(sim),
            "demand": self.demand_features(held, waiting),
            "queue_rest": self.queue_rest_features(sim, waiting, fits, k),
            "time": np.array([min(1.0, time_fraction)], dtype=np.float32),
            "action_mask": mask,
        }

    def running_features(self, sim: Simulator) -> np.ndarray:
        ledger = sim.ledger
        n = len(ledger.jobs)
        if n == 0:
            return np.zeros(len(RUNNING_FEATURES), dtype=np.float32)
        idx = np.fromiter(ledger.jobs, dtype=np.int64, count=n)
        tput = np.fromiter(ledger.tput, dtype=float, count=n)
        return kernels.running_features(
            idx, tput, self.running_static, sim.jobs.progress, self._speedup_bin_scale, self.cluster.total_gpus,
            self.speedup_max,
        )

    def demand_features(self, held: np.ndarray, waiting: np.ndarray) -> np.ndarray:
        return kernels.demand_features(held, waiting, self.demand_running, self.demand)

    def queue_rest_features(self, sim: Simulator, waiting: np.ndarray, fits: np.ndarray, k: int) -> np.ndarray:
        jobs = sim.jobs
        return kernels.queue_rest_features(
            waiting, fits, k, jobs.total_iters, jobs.executed, self.fair_gpu_h_per_iter, self.cluster.total_gpus
        )

    def cluster_features(self, sim: Simulator, waiting: int) -> np.ndarray:
        c = self.cluster
        ledger = sim.ledger
        g = c.total_gpus
        running = len(ledger.jobs)
        out = np.zeros(len(CLUSTER_FEATURES))
        free = np.array((ledger.free_gpu, ledger.free_cpu, ledger.free_mem), dtype=float)
        kernels.cluster_histograms(free, self._free_scales, 1.0 / c.num_servers, out)
        out[0] = sim.planner.free_gpus / g
        out[3 + 3 * HIST_BINS] = running / (running + g)
        out[4 + 3 * HIST_BINS] = waiting / (waiting + g)
        return out.astype(np.float32)
