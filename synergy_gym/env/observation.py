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

import synergy_gym.env.observe_kernel as ok
import synergy_gym.env.observe_rows_kernel as rk
from synergy_gym.env.observe_kernel import HIST_BINS, TIME_SCALE_H, layout_offsets
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.profiles import TASKS, ModelZoo
from synergy_gym.sim.simulator import Simulator

#: Per slot (a waiting job whose GPUs fit now), ``slots[q]``.
SLOT_FEATURES = (
    "gpu_share",  # GPUs / cluster GPUs
    "log_gpus",  # log2(GPUs) / 7
    "vision", "language", "speech",  # task one-hot
    "remaining_fraction",  # iterations left / total
    "runtime_fair",  # run time left at the fair share (squashed hours)
    "runtime_demand",  # run time left at its demand level, level 1 (squashed hours)
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
#: Per running row (``preemptive=True, redecide="changes"``), ``running_slots[r]``: the job's slot
#: features but ``was_running``, then what it runs at and what preempting it would free.
RUNNING_SLOT_FEATURES = (
    *SLOT_FEATURES[:-1],
    "runtime_now",  # run time left at its current grant's throughput (squashed hours)
    "level_cpu", "level_mem", "level_speedup",  # its level's features (as LEVEL_FEATURES)
    "frees_cpu",  # CPUs it holds / the cluster's (what preempting it frees at once; GPUs: gpu_share)
    "frees_mem",  # GB it holds / the cluster's
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

    def __init__(
        self, cluster: ClusterSpec, zoo: ModelZoo, max_queue: int, n_levels: int, n_actions: int,
        n_running: int = 0, fit_features: bool = False,
    ) -> None:
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
                **self._extra_spaces(q, n_levels, n_running, fit_features),
            }
        )
        self.n_running, self.fit_features = n_running, fit_features
        self._all_fit = np.ones(q, dtype=bool)  # slot_fits' per-slot flags where every slot's job fits
        self._level_high = level_high
        self._speedup_bin_scale = HIST_BINS / max(speedup_max - 1.0, 1e-9)
        # Histogram bins per free GPU, CPU and GB of a server.
        self._free_scales = np.array(
            [HIST_BINS / cluster.gpus_per_server, HIST_BINS / cluster.cpus_per_server, HIST_BINS / cluster.mem_gb_per_server]
        )
        # One buffer per observation; its parts, in the order of observe_kernel's offsets.
        names = ("slots", "slot_levels", "slot_mask", "cluster", "running", "demand", "queue_rest", "time", "action_mask",
                 *(["running_slots", "running_mask"] if n_running else []), *(["slot_fits"] if fit_features else []))
        sizes = [int(np.prod(self.space.spaces[name].shape or ())) for name in names]
        self._offsets = offsets = layout_offsets(sizes)
        self._size = int(offsets[-1])
        self._parts = [(name, int(offsets[i]), int(offsets[i + 1])) for i, name in enumerate(names)]
        starts = {name: a for name, a, _ in self._parts}
        self._rows_at, self._row_mask_at, self._fits_at = (starts.get(k, -1) for k in ("running_slots", "running_mask",
                                                                                   "slot_fits"))

    @staticmethod
    def _extra_spaces(q: int, n_levels: int, n_running: int, fit_features: bool) -> dict[str, spaces.Box]:
        """The parts only some modes have: running rows (``redecide="changes"``) and ``slot_fits``."""
        extra: dict[str, spaces.Box] = {}
        if n_running:
            high = np.ones(len(RUNNING_SLOT_FEATURES), dtype=np.float32)
            first_level = RUNNING_SLOT_FEATURES.index("level_cpu")
            high[first_level : first_level + 3] = (RESOURCE_HIGH, RESOURCE_HIGH, SPEEDUP_HIGH)
            extra["running_slots"] = spaces.Box(0.0, np.tile(high, n_running), dtype=np.float32)
            extra["running_mask"] = spaces.Box(0.0, 1.0, (n_running,), np.float32)
        if fit_features:
            extra["slot_fits"] = spaces.Box(0.0, 1.0, (q * n_levels,), np.float32)
        return extra

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
        levels = np.empty((n, self.n_levels, 3), dtype=np.float32)
        levels[:, :, 0] = level_cpu / c.fair_cpus_per_gpu
        levels[:, :, 1] = level_mem / c.fair_mem_gb_per_gpu
        levels[:, :, 2] = level_tput / jobs.tput_fair[:, None]
        self.levels = np.minimum(levels, self._level_high)
        # Per job and level, CPUs and GB per GPU, and per job its GPUs, for slot_fits.
        self.level_per_gpu = (level_cpu, level_mem)
        self.job_gpus = jobs.gpus
        # Per job, what the observation reads (observe_kernel's columns).
        table = np.empty((n, ok.JOB_COLUMNS))
        table[:, ok.ARRIVAL_H] = jobs.arrival_s / 3600.0
        table[:, ok.FAIR_H] = fair_h = jobs.iter_time_s / jobs.tput_fair / 3600.0
        # The demand as the demand level shows it: a request slower than its fallback is granted the fallback.
        demand_cpu, demand_mem, demand_tput = jobs.planned(np.arange(n), floor=True)
        table[:, ok.DEMAND_H] = jobs.iter_time_s / demand_tput / 3600.0
        table[:, ok.FAIR_GPU_H] = jobs.gpus * fair_h / c.total_gpus
        # The demand level's CPUs and memory, and the GPUs, as fractions of the cluster's.
        table[:, ok.DEMAND_CPU] = jobs.gpus * demand_cpu / c.total_cpus
        table[:, ok.DEMAND_MEM] = jobs.gpus * demand_mem / c.total_mem_gb
        table[:, ok.DEMAND_GPUS] = static[:, 0]
        table[:, ok.GPUS] = jobs.gpus
        table[:, ok.INV_FAIR_TPUT] = 1.0 / jobs.tput_fair
        table[:, ok.ITER_H] = jobs.iter_time_s / 3600.0
        self.job_table = table
        fresh = np.zeros((n, len(SLOT_FEATURES)), dtype=np.float32)
        fresh[:, :5] = static
        fresh[:, 5] = 1.0
        fresh[:, 6:8] = squash_hours(jobs.total_iters[:, None] * table[:, ok.FAIR_H : ok.DEMAND_H + 1])
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
        n_slots_fit: int | None = None,
        running: np.ndarray | None = None,
        level: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """The observation at a decision: a fresh buffer, its parts as the dict's arrays.

        ``slots``: the slot jobs; ``waiting``: every waiting job (arrival order)
        with ``fits`` whether its GPUs fit now; ``held``: the jobs admitted so
        far this event, in admission order; ``was_running``: per job, whether it
        held GPUs before this event; ``mask``: the valid actions (float32, copied);
        ``n_slots_fit``: the slots whose job fits (default: all; fewer only where slot q holds
        ``waiting[q]``, as with ``redecide="changes"``); ``running``: the running rows'
        jobs and ``level`` every job's level (``redecide="changes"``).
        """
        buf = np.zeros(self._size, dtype=np.float32)
        ledger = sim.ledger
        ok.fill_observation(  # through the module: its name there becomes numba's dispatcher on first use
            buf, self._offsets, slots, self.never_ran, self.fresh_rows, self.levels, self.job_table,
            sim.jobs.progress, was_running, sim.now / 3600.0,
            ledger.free_gpu, ledger.free_cpu, ledger.free_mem, self._free_scales,
            sim.planner.free_gpus, self.cluster.total_gpus,
            ledger.jobs, ledger.tput,
            self._speedup_bin_scale, self.speedup_max, held, waiting, fits, time_fraction, mask,
            slots.size if n_slots_fit is None else n_slots_fit,
        )
        if self.fit_features:
            # Per slot, whether its job's GPUs fit: all of them, unless some slot's job does not fit
            # (``redecide="changes"``, where slot q holds waiting job q).
            some_out = n_slots_fit is not None and n_slots_fit < slots.size
            slot_fit = fits[: slots.size] if some_out else self._all_fit
            rk.fill_slot_fits(buf, self._fits_at, slots, slot_fit, *self.level_per_gpu, self.job_gpus, ledger.free_gpu,
                              ledger.free_cpu, ledger.free_mem)
        if self.n_running and running is not None and level is not None:
            c = self.cluster
            rk.fill_running_rows(buf, self._rows_at, self._row_mask_at, running, self.fresh_rows, self.job_table,
                                 sim.jobs.progress, sim.now / 3600.0, ledger.jobs, ledger.cpu, ledger.mem, ledger.tput,
                                 self.levels, level, c.total_cpus, c.total_mem_gb)
        return {name: buf[a:b] for name, a, b in self._parts}
