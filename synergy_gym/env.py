"""The Gymnasium environment: an agent chooses each job's CPU and memory around its GPUs.

A thin adapter over :class:`synergy_gym.Simulator`: the simulator orders jobs,
places them with Synergy-Tune's mechanics and advances time; the environment
only asks the agent for each newly admitted job's *preference* and turns
simulated time into rewards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from synergy_gym.allocation import Tune
from synergy_gym.cluster import ClusterSpec, load_cluster
from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.ordering import ORDERINGS
from synergy_gym.policy import SchedulingPolicy
from synergy_gym.profiles import TASKS, ModelZoo
from synergy_gym.profiling import ProfilerConfig
from synergy_gym.simulator import SimulationConfig, Simulator
from synergy_gym.workload import MAX_JOBS, Workload

#: Action 0: the fair share; action 1: the model's best-case demand; 2..: grid points.
FAIR_ACTION = 0
DEMAND_ACTION = 1
_HIST_BINS = 5  # bins of the per-server free-resource histograms
_TIME_SCALE_H = 10.0  # durations enter observations as h / (h + 10)
JOB_FEATURES = (
    "log_gpus", "vision", "language", "speech", "demand_cpus", "demand_mem", "speedup",
    "age", "remaining_fraction", "runtime_fair", "runtime_demand", "defers", "has_preference", "fair_tput",
)
QUEUE_FEATURES = (
    "log_gpus", "vision", "language", "speech", "demand_cpus", "demand_mem", "speedup",
    "age", "runtime_fair", "runtime_demand",
)


@dataclass(frozen=True)
class EnvConfig:
    """The environment's keyword arguments (see :class:`SynergyEnv`), validated."""

    cluster: Any = "default"
    order: str = "fifo"
    jobs_per_hour: float = 9.0
    num_jobs: int = 1000
    multigpu: bool = False
    class_split: tuple = (20.0, 70.0, 10.0)
    workload: Any = None
    trace: Any = None
    max_rounds: int = 10_000
    reward_scale: float = 3600.0
    allow_defer: bool = False
    max_defer_rounds: int = 12
    reconsider_every: int | None = None
    max_queue: int = 32
    round_s: float = 300.0
    placement: str = "first_fit"
    timing: str = "round"
    debug: bool = False
    sensitivity: str = "true"
    profile_noise: float = 0.0
    render_mode: str | None = None

    def simulation_config(self, profile_seed: int = 0) -> SimulationConfig:
        """The simulator settings these kwargs ask for (the env keeps no round log)."""
        return SimulationConfig(
            round_s=self.round_s, placement=self.placement, timing=self.timing, debug=self.debug,
            record_rounds=False, sensitivity=self.sensitivity,
            profiler=ProfilerConfig(noise=self.profile_noise, seed=profile_seed),
        )

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> "EnvConfig":
        valid = [f.name for f in fields(cls)]
        for key in kwargs:
            if key not in valid:
                raise ConfigError(f"unknown env kwarg {key!r}; valid: {', '.join(valid)}")
        cfg = cls(**dict(kwargs))
        cfg.validate()
        return cfg

    def validate(self) -> None:
        def positive(name: str, integer: bool = False, allow_none: bool = False) -> None:
            value = getattr(self, name)
            if value is None and allow_none:
                return
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
            ok = ok and math.isfinite(value) and value > 0 and (not integer or float(value).is_integer())
            if not ok:
                kind = "a positive integer" if integer else "a positive number"
                raise ConfigError(f"env kwarg {name} must be {kind}, got {value!r}")

        if self.order not in ORDERINGS:
            raise UnknownNameError("order", str(self.order), tuple(ORDERINGS))
        positive("jobs_per_hour")
        positive("num_jobs", integer=True)
        if self.num_jobs > MAX_JOBS:
            raise ConfigError(f"env kwarg num_jobs {self.num_jobs!r} exceeds the maximum of {MAX_JOBS:,}")
        positive("max_rounds", integer=True)
        positive("reward_scale")
        positive("max_defer_rounds", integer=True)
        positive("reconsider_every", integer=True, allow_none=True)
        positive("max_queue", integer=True)
        positive("round_s")
        self.simulation_config()  # validates placement, timing, sensitivity and profile noise
        if self.render_mode not in (None, "ansi", "rgb_array"):
            raise UnknownNameError("render_mode", str(self.render_mode), ("ansi", "rgb_array"))
        if self.workload is not None and self.trace is not None:
            raise ConfigError("env kwargs workload and trace cannot be combined")


class SynergyEnv(gym.Env):
    """Allocate CPUs and memory around each job's GPUs on a multi-tenant GPU cluster.

    ## Description

    A cluster of servers (by default the Synergy paper's 16 × (8 GPUs, 24 CPUs,
    500 GB)) runs deep-learning training jobs in rounds of 300 s. Each round
    the ordering policy (``order``: ``fifo``, ``srtf`` or ``las``) ranks the
    runnable jobs and admits them by GPU count (gang-scheduled; smaller later
    jobs backfill). When a job is admitted for the first time the agent
    chooses its *preference*: how many CPUs and how much memory per GPU it
    should get. The environment remembers preferences and every round places
    all admitted jobs with Synergy-Tune's mechanics, using each preference as
    the job's target: a job gets its preference where it fits, otherwise its
    preference capped at the fair share, and jobs holding more than that are
    cut back to make room. So the agent is asked once per job (again every
    ``reconsider_every`` rounds if set). Always choosing action 1 reproduces
    the simulator's ``<order>+tune`` exactly; always choosing action 0
    reproduces ``fifo+fair`` and ``las+fair`` (under ``srtf`` a job waiting for
    its first decision is ranked at its demand's throughput, as under tune, so
    action 0 differs slightly from ``srtf+fair``).

    ## Action Space

    ``Discrete(2 + G)``, or ``Discrete(3 + G)`` with ``allow_defer=True``
    (G = 45 grid points of the sensitivity matrices):

    * 0 – the GPU-proportional fair share (3 CPUs, 62.5 GB per GPU by default);
    * 1 – the model's best-case demand;
    * 2 + k – grid point k in row-major (cpu level, memory level) order, i.e.
      ``cpu_grid[k // 5]`` CPUs and ``mem_grid[k % 5]`` GB per GPU;
    * 2 + G (with ``allow_defer``) – keep the job out this round (its GPUs may
      go to later jobs); after ``max_defer_rounds`` deferrals it is admitted at
      its best-case demand without asking.

    ``action_space.sample()`` draws a valid action for the current job.
    :meth:`action_masks` (and ``obs["action_mask"]``) masks the preferences
    that can never be honoured: grid points slower than the fair share (at the
    point itself or at the point capped at the fair share) and points that
    exceed one server's CPUs or memory for the job's GPUs. Actions 0 and 1 are
    always valid. Stepping with an invalid action raises ``ValueError``.

    ## Observation Space

    A ``Dict`` of ``Box`` spaces whose shapes do not depend on the cluster size
    (durations enter as ``h / (h + 10)``, counts and sizes scaled into [0, 1]):

    * ``job`` (14): the job being decided – log GPUs, task one-hot, demand
      (CPUs, GB per GPU), speed-up at demand, age, fraction of work left,
      estimated run time left at fair share and at demand, deferrals, whether
      it already has a preference, its fair-share throughput;
    * ``job_sensitivity`` (45): its normalised throughput matrix, row-major;
    * ``cluster`` (20): free GPU, CPU and memory fractions this round (after
      the jobs admitted so far), histograms (5 bins) of the per-server free
      GPU, CPU and memory fractions, running and queued jobs;
    * ``queue`` (``max_queue`` · 10, flattened row-major from
      ``max_queue`` × 10): the next waiting jobs in policy order (the first
      10 features of ``job``), zero-padded;
    * ``queue_mask`` (``max_queue``): 1 for real queue rows;
    * ``time`` (1): rounds elapsed / ``max_rounds``;
    * ``action_mask`` (actions): 1 for valid actions.

    ## Rewards

    After each action: minus the total time that jobs spent in the system
    (arrived, not finished) from the previous decision to the next one,
    divided by ``reward_scale`` (default 3600, i.e. hours). The undiscounted
    return of a finished episode is −(sum of the episode's JCTs) / scale, so
    maximising reward minimises average JCT.

    ## Starting State

    A workload is drawn from the paper's Philly-derived generator
    (``jobs_per_hour``, ``num_jobs``, ``multigpu``, ``class_split``) with a
    seed from ``self.np_random`` on every reset; ``workload`` (a replay CSV path
    or a :class:`Workload`) or ``trace`` (a real trace: Philly CSV/JSON,
    Alibaba, Helios; its first ``num_jobs`` jobs at their submit times) fix the
    jobs instead. The cluster starts empty; the first observation is the first
    admitted job.

    ## Episode End

    ``terminated`` when every job of the episode has finished; ``truncated``
    after ``max_rounds`` rounds. ``info`` holds ``finished_jct_h`` and
    ``finished_job_ids`` (lists: JCTs in hours and ids of the jobs finished since
    the last step), ``sim_time_h`` and, at the end, ``mean_jct_h``,
    ``median_jct_h``, ``p99_jct_h`` (all arrived jobs; in a truncated episode
    unfinished ones count with their time so far), ``window_mean_jct_h``,
    ``window_median_jct_h``, ``window_p99_jct_h`` (the middle half by arrival),
    ``makespan_h``, ``jobs_finished``, ``jobs_unfinished`` and ``jobs_total``.

    ## Arguments

    ``gym.make("Synergy-v0", **kwargs)`` or ``SynergyEnv(config_dict)``
    (RLlib): ``cluster`` (preset name, TOML path, mapping or
    :class:`ClusterSpec`), ``order``, ``jobs_per_hour``, ``num_jobs``,
    ``multigpu``, ``class_split``, ``workload``, ``trace``, ``max_rounds``,
    ``reward_scale``, ``allow_defer``, ``max_defer_rounds``,
    ``reconsider_every``, ``max_queue``, ``round_s``, ``placement``,
    ``timing``, ``debug`` (assert capacities every round), ``sensitivity``
    (``"true"``, or ``"profiled"``: the job features, sensitivity matrix and
    masks are each job's estimate from optimistic profiling with relative
    measurement noise ``profile_noise``, while jobs progress at their true
    throughput), ``render_mode`` (``"ansi"`` or ``"rgb_array"``).

    Registered: ``Synergy-v0`` (128 GPUs, 9 jobs/h, 1,000 jobs, max 10,000
    rounds) and ``Synergy-small-v0`` (4 × 8 GPUs, 2.25 jobs/h – the same load
    per GPU – 300 jobs, max 4,000 rounds).

    ## Version History

    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = {**dict(config or {}), **kwargs}
        self.cfg = cfg = EnvConfig.from_kwargs(merged)
        self.render_mode = cfg.render_mode
        self.cluster = _as_cluster(cfg.cluster)
        self.zoo = ModelZoo.default()
        self._fixed_workload = self._load_fixed_workload()
        if self._fixed_workload is None:
            from traces.synthetic import SyntheticWorkload

            # Validate the generator's arguments now, not at the first reset.
            SyntheticWorkload(
                jobs_per_hour=float(cfg.jobs_per_hour), num_jobs=int(cfg.num_jobs), multigpu=bool(cfg.multigpu),
                class_split=tuple(cfg.class_split), max_gpus=self.cluster.total_gpus,
            )
        self.sim_config = cfg.simulation_config()
        self.policy = SchedulingPolicy(ORDERINGS[cfg.order](), Tune())
        zoo = self.zoo
        self._n_cpu, self._n_mem = len(zoo.cpu_grid), len(zoo.mem_grid)
        self.n_grid = self._n_cpu * self._n_mem
        self.defer_action = 2 + self.n_grid if cfg.allow_defer else None
        n_actions = 2 + self.n_grid + (1 if cfg.allow_defer else 0)
        self.action_space = MaskedDiscrete(n_actions, self.action_masks)
        q = int(cfg.max_queue)
        self.observation_space = spaces.Dict(
            {
                "job": spaces.Box(0.0, 1.0, (len(JOB_FEATURES),), np.float32),
                "job_sensitivity": spaces.Box(0.0, 1.0, (self.n_grid,), np.float32),
                "cluster": spaces.Box(0.0, 1.0, (3 + 3 * _HIST_BINS + 2,), np.float32),
                "queue": spaces.Box(0.0, 1.0, (q * len(QUEUE_FEATURES),), np.float32),
                "queue_mask": spaces.Box(0.0, 1.0, (q,), np.float32),
                "time": spaces.Box(0.0, 1.0, (1,), np.float32),
                "action_mask": spaces.Box(0.0, 1.0, (n_actions,), np.float32),
            }
        )
        # Per-model constants.
        tensor = zoo.tput_tensor()
        self._tput_scale = float(tensor.max())
        self._sensitivity = (tensor.reshape(len(zoo), -1) / self._tput_scale).astype(np.float32)
        self._grid_cpu = np.repeat(zoo.cpu_grid, self._n_mem)
        self._grid_mem = np.tile(zoo.mem_grid, self._n_cpu)
        self._grid_cpu_l = self._grid_cpu.tolist()
        self._grid_mem_l = self._grid_mem.tolist()
        self._mask_cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self.sim: Simulator | None = None

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.action_space._mask_fn = self.action_masks

    # -- construction helpers -------------------------------------------------------
    def _load_fixed_workload(self) -> Workload | None:
        cfg = self.cfg
        source = None
        if cfg.workload is not None:
            if isinstance(cfg.workload, Workload):
                w = replace(cfg.workload, run_until="all")
            else:
                from traces.replay import read_workload_csv

                source = str(cfg.workload)
                w = read_workload_csv(Path(cfg.workload), run_until="all")
        elif cfg.trace is not None:
            from traces.loader import load_trace
            from traces.trace_jobs import to_workload

            source = str(cfg.trace)
            w = to_workload(load_trace(Path(cfg.trace)), class_split=tuple(cfg.class_split), max_jobs=int(cfg.num_jobs))
        else:
            return None
        w.check_fits(self.cluster, source)
        return w

    def _draw_workload(self) -> Workload:
        if self._fixed_workload is not None:
            return self._fixed_workload
        from traces.synthetic import SyntheticWorkload

        cfg = self.cfg
        seed = int(self.np_random.integers(0, 2**31 - 1))
        return SyntheticWorkload(
            jobs_per_hour=float(cfg.jobs_per_hour), seed=seed, num_jobs=int(cfg.num_jobs),
            multigpu=bool(cfg.multigpu), class_split=tuple(cfg.class_split), max_gpus=self.cluster.total_gpus,
        ).build(self.zoo)

    # -- gymnasium API --------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        workload = self._draw_workload()
        config = self.sim_config
        if self.cfg.sensitivity == "profiled":  # a fresh profiling noise draw per episode
            config = self.cfg.simulation_config(profile_seed=int(self.np_random.integers(0, 2**31 - 1)))
        self.sim = sim = Simulator(self.cluster, workload, self.policy, config)
        sim.ledger.undo = True  # rounds re-use the unchanged start of the previous round's placement
        # Profiled masks are per job of the last episode; the per-(model, GPUs) ones stay valid.
        self._mask_cache = {k: v for k, v in self._mask_cache.items() if k[0] >= 0}
        self._prev: _Placed | None = None
        jobs = sim.jobs
        n = jobs.n
        self._demand_cpu = jobs.target_cpu.copy()
        self._demand_mem = jobs.target_mem.copy()
        self._pref = np.full(n, -1, dtype=np.int64)
        self._decided_round = np.zeros(n, dtype=np.int64)
        self._defers = np.zeros(n, dtype=np.int64)
        self._arrival_prefix = np.concatenate([[0.0], np.cumsum(jobs.arrival_s)])
        self._static = self._static_features(workload)
        self._arrival_h = jobs.arrival_s / 3600.0
        self._fair_h_per_iter = jobs.iter_time_s / jobs.tput_fair / 3600.0
        self._demand_h_per_iter = jobs.iter_time_s / jobs.tput_target / 3600.0  # targets are the demand here
        self._first_round_s = sim.now
        self._rounds_at = (sim.now, 0)  # (time, rounds elapsed) cache
        self._fin_jct_sum = 0.0
        self._fin_arrival_sum = 0.0
        self._fin_count = 0
        self._charged = 0.0
        self._scan: _Scan | None = None
        self._job = -1
        self._truncated = False
        self._pending_finished: list[np.ndarray] = []
        self._advance_to_decision()
        return self._observation(), {}

    def step(self, action):
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() before step()")
        if self._job < 0:
            raise RuntimeError("the episode has ended; call reset()")
        a = self._check_action(action)
        j = self._job
        scan = self._scan
        if a == self.defer_action:
            self._defers[j] += 1
            scan.deferred = True
        else:
            self._set_preference(j, a)
            self._admit(j)
        scan.pos += 1
        self._advance_to_decision()
        charged = self._charged_until(sim.now)
        reward = -(charged - self._charged) / self.cfg.reward_scale
        self._charged = charged
        if self._pending_finished:
            jobs = sim.jobs
            finished = np.concatenate(self._pending_finished)
            self._pending_finished = []
            # Lists, not arrays: vector envs batch per-env info of varying length as objects.
            jct_h = ((jobs.finish_s[finished] - jobs.arrival_s[finished]) / 3600.0).tolist()
            ids = jobs.job_id[finished].tolist()
        else:
            jct_h, ids = [], []
        info: dict[str, Any] = {"finished_jct_h": jct_h, "finished_job_ids": ids, "sim_time_h": sim.now / 3600.0}
        terminated = self._job < 0 and not self._truncated
        truncated = self._truncated
        if terminated or truncated:
            info.update(self.episode_summary())
        return self._observation(), float(reward), terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """Valid actions for the current job (for sb3-contrib's MaskablePPO)."""
        if self._job < 0:
            mask = np.zeros(self.action_space.n, dtype=bool)
            mask[[FAIR_ACTION, DEMAND_ACTION]] = True
            return mask
        return self._mask(self._job).copy()

    def render(self):
        if self.render_mode == "ansi":
            return self._render_ansi()
        if self.render_mode == "rgb_array":
            return self._render_rgb()
        return None

    # -- the decision loop ----------------------------------------------------------------
    def _advance_to_decision(self) -> None:
        """Scan and plan rounds until a job needs a decision or the episode ends."""
        sim = self.sim
        jobs = sim.jobs
        gpus = jobs.gpus_l
        ledger = sim.ledger
        while True:
            scan = self._scan
            if scan is None:
                if sim.done or sim.exhausted:
                    self._job = -1
                    return
                if self._rounds_elapsed() >= self.cfg.max_rounds:
                    self._truncated = True
                    self._job = -1
                    return
                order = sim.begin_round()
                if order is None:
                    continue
                if self._prev is None:
                    ledger.reset()
                scan = self._scan = _Scan(order.tolist(), free=self.cluster.total_gpus, in_sync=self._prev is not None)
            order = scan.order
            if scan.in_sync and self.cfg.reconsider_every is None:
                self._keep_unchanged_prefix(scan)
            while scan.pos < len(order) and scan.free:
                j = order[scan.pos]
                if gpus[j] <= scan.free:
                    if self._needs_decision(j):
                        self._leave_sync(scan, len(scan.admitted))  # the ledger shows only the jobs before it
                        self._job = j
                        return
                    self._admit(j)
                scan.pos += 1
            self._finish_scan(scan)
            limit = max(1, self.cfg.max_rounds - self._rounds_elapsed())
            if scan.deferred:
                limit = 1  # deferred jobs are asked again next round
            elif self.cfg.reconsider_every is not None:
                limit = min(limit, self._rounds_until_reconsideration())
            finished = sim.advance(max_rounds=limit, allow_idle=scan.deferred)
            if finished.size:
                self._pending_finished.append(finished)
                self._fin_jct_sum += float((jobs.finish_s[finished] - jobs.arrival_s[finished]).sum())
                self._fin_arrival_sum += float(jobs.arrival_s[finished].sum())
                self._fin_count += int(finished.size)
            self._scan = None

    def _admit(self, j: int) -> None:
        """Admit job ``j`` this round and place it as Tune would (re-using last round's placement when in step)."""
        scan = self._scan
        ledger = self.sim.ledger
        g = self.sim.jobs.gpus_l[j]
        i = len(scan.admitted)
        scan.admitted.append(j)
        scan.taken.append(self.cluster.total_gpus - scan.free)
        scan.free -= g
        if i and g > scan.last_gpus and scan.sorted_by_gpus:
            scan.sorted_by_gpus = False
            self._leave_sync(scan, i)
        scan.last_gpus = g
        if not scan.sorted_by_gpus:
            return  # Tune places these in GPU order when the scan ends
        prev = self._prev
        if scan.in_sync:
            # A job whose preference changed was asked first, which ended the sync.
            if i < len(prev.jobs) and prev.jobs[i] == j:
                scan.marks.append(prev.marks[i])  # placed exactly as last round: keep it
                return
            self._leave_sync(scan, i)
        scan.marks.append(ledger.mark())
        self.policy.mechanism.place(ledger, self.sim.jobs, j)

    def _keep_unchanged_prefix(self, scan: "_Scan") -> None:
        """Admit at once the run of jobs that continue last round's admitted jobs in the same order.

        They have preferences already (without ``reconsider_every`` none is due),
        admission by GPUs is the same as last round, and so is their placement.
        """
        prev = self._prev
        i = len(scan.admitted)
        rest = prev.jobs[i:]
        if not rest:
            return
        order = scan.order
        pos = scan.pos
        n = len(rest)
        if order[pos : pos + n] != rest:
            lo, hi = 0, min(n, len(order) - pos)  # longest common prefix, by bisection on slices
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if order[pos : pos + mid] == rest[:mid]:
                    lo = mid
                else:
                    hi = mid - 1
            n = lo
        if n == 0:
            return
        scan.admitted.extend(rest[:n])
        scan.marks.extend(prev.marks[i : i + n])
        scan.taken.extend(prev.taken[i : i + n])
        scan.free -= prev.taken[i + n] - prev.taken[i]
        scan.last_gpus = self.sim.jobs.gpus_l[rest[n - 1]]
        scan.pos += n

    def _leave_sync(self, scan: "_Scan", i: int) -> None:
        """Drop what last round placed from admitted position ``i`` on."""
        if scan.in_sync:
            if i < len(self._prev.marks):
                self.sim.ledger.rollback(self._prev.marks[i])
            scan.in_sync = False

    def _finish_scan(self, scan: "_Scan") -> None:
        """Leave the ledger holding exactly Tune's allocation of this round's admitted jobs."""
        ledger = self.sim.ledger
        if scan.sorted_by_gpus:
            self._leave_sync(scan, len(scan.admitted))  # last round may have placed more jobs
            scan.taken.append(self.cluster.total_gpus - scan.free)
            self._prev = _Placed(scan.admitted, scan.marks, scan.taken)
        else:
            ledger.reset()
            self.policy.mechanism.allocate(ledger, self.sim.jobs, scan.admitted)
            self._prev = None

    def _needs_decision(self, j: int) -> bool:
        pref = self._pref[j]
        if pref < 0:
            if self.defer_action is not None and self._defers[j] >= self.cfg.max_defer_rounds:
                self._set_preference(j, DEMAND_ACTION)
                return False
            return True
        every = self.cfg.reconsider_every
        return every is not None and self._rounds_elapsed() - self._decided_round[j] >= every

    def _rounds_until_reconsideration(self) -> int:
        every = self.cfg.reconsider_every
        placed = self.sim.ledger.jobs
        if not placed:
            return 1
        due = self._decided_round[placed].min() + every - self._rounds_elapsed()
        return max(1, int(due))

    def _rounds_elapsed(self) -> int:
        """Whole rounds simulated since the episode's first round."""
        now = self.sim.now
        if now != self._rounds_at[0]:
            self._rounds_at = (now, int(round((now - self._first_round_s) / self.sim_config.round_s)))
        return self._rounds_at[1]

    def _set_preference(self, j: int, a: int) -> None:
        self._pref[j] = a
        self._decided_round[j] = self._rounds_elapsed()
        jobs = self.sim.jobs
        if a == FAIR_ACTION:
            jobs.set_target(j, jobs.fair_cpu, jobs.fair_mem)
        elif a == DEMAND_ACTION:
            jobs.set_target(j, float(self._demand_cpu[j]), float(self._demand_mem[j]))
        else:
            k = a - 2
            jobs.set_target(j, self._grid_cpu_l[k], self._grid_mem_l[k])

    def _check_action(self, action) -> int:
        if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
            a = int(action)
        else:
            arr = np.asarray(action)
            if arr.size != 1 or arr.dtype.kind not in "iuf" or not float(arr.reshape(())).is_integer():
                raise ValueError(f"action {action!r} is not a single integer")
            a = int(arr.reshape(()))
        mask = self._mask(self._job)
        if not 0 <= a < mask.size:
            raise ValueError(f"action {a} is out of range: valid actions are 0..{mask.size - 1}")
        if not mask[a]:
            raise ValueError(
                f"action {a} is masked for job {self.sim.jobs.job_id[self._job]}; valid actions: "
                f"{np.flatnonzero(mask).tolist()}"
            )
        return a

    def _mask(self, j: int, as_float: bool = False) -> np.ndarray:
        """Valid actions of job ``j`` (cached per model and GPU count, or per job when profiled; read-only)."""
        jobs = self.sim.jobs
        profiled = jobs.belief is not None
        key = (-1 - j, 0) if profiled else (int(jobs.model[j]), jobs.gpus_l[j])
        masks = self._mask_cache.get(key)
        if masks is None:
            if profiled:
                mask = self._mask_from_estimates(j)
            else:
                mask = self._build_mask(*key)
            as_f32 = mask.astype(np.float32)
            as_f32.setflags(write=False)
            masks = self._mask_cache[key] = (mask, as_f32)
        return masks[1] if as_float else masks[0]

    def _mask_from_estimates(self, j: int) -> np.ndarray:
        """Valid actions of job ``j`` by its own estimated matrix (profiled sensitivity)."""
        jobs = self.sim.jobs
        idx = np.full(self.n_grid, j)
        fair_cpu, fair_mem = np.minimum(self._grid_cpu, jobs.fair_cpu), np.minimum(self._grid_mem, jobs.fair_mem)
        return self._grid_mask(
            jobs.est_throughput_many(idx, self._grid_cpu, self._grid_mem),
            jobs.est_throughput_many(idx, fair_cpu, fair_mem),
            jobs.tput_fair_l[j],
            jobs.gpus_l[j],
        )

    def _build_mask(self, model: int, gpus: int) -> np.ndarray:
        """Valid actions for a ``gpus``-GPU job of ``model`` by the zoo's measured matrix."""
        c = self.cluster
        zoo = self.zoo
        fair_cpu, fair_mem = c.fair_cpus_per_gpu, c.fair_mem_gb_per_gpu
        models = np.full(self.n_grid, model)
        return self._grid_mask(
            zoo.throughput_many(models, self._grid_cpu, self._grid_mem),
            zoo.throughput_many(models, np.minimum(self._grid_cpu, fair_cpu), np.minimum(self._grid_mem, fair_mem)),
            zoo.throughput_of(model, fair_cpu, fair_mem),
            gpus,
        )

    def _grid_mask(self, tput: np.ndarray, capped: np.ndarray, fair_tput: float, gpus: int) -> np.ndarray:
        """Actions 0 and 1, and the grid points as fast as the fair share (also capped at it) that fit a server."""
        c = self.cluster
        per_server = min(gpus, c.gpus_per_server)
        fits = (per_server * self._grid_cpu <= c.cpus_per_server + 1e-9) & (
            per_server * self._grid_mem <= c.mem_gb_per_server + 1e-9
        )
        grid_ok = (tput >= fair_tput - 1e-12) & (capped >= fair_tput - 1e-12) & fits
        mask = np.ones(self.action_space.n, dtype=bool)
        mask[2 : 2 + self.n_grid] = grid_ok
        mask.setflags(write=False)
        return mask

    # -- rewards and summaries ----------------------------------------------------------
    def _charged_until(self, t: float) -> float:
        """Sum over jobs of the time spent in the system up to ``t`` (finished jobs: their JCT)."""
        jobs = self.sim.jobs
        arrived = int(jobs.arrival_s.searchsorted(t, side="right"))
        in_system = arrived - self._fin_count
        return self._fin_jct_sum + in_system * t - (self._arrival_prefix[arrived] - self._fin_arrival_sum)

    def episode_summary(self) -> dict[str, float]:
        """JCT statistics of the episode so far, over all arrived jobs and over the middle-half window.

        A job still unfinished (a truncated episode) counts with its time in the
        system so far – a lower bound on its JCT – so starving jobs until the
        episode is cut off does not look good.
        """
        sim = self.sim
        jobs = sim.jobs
        done = ~np.isnan(jobs.finish_s)
        arrived = jobs.arrival_s <= sim.now
        end = np.where(done, jobs.finish_s, sim.now)
        jct_h = (end - jobs.arrival_s) / 3600.0

        def stats(mask: np.ndarray, prefix: str) -> dict[str, float]:
            x = jct_h[mask]
            if x.size == 0:
                return {f"{prefix}mean_jct_h": math.nan, f"{prefix}median_jct_h": math.nan, f"{prefix}p99_jct_h": math.nan}
            return {
                f"{prefix}mean_jct_h": float(x.mean()),
                f"{prefix}median_jct_h": float(np.median(x)),
                f"{prefix}p99_jct_h": float(np.percentile(x, 99)),
            }

        n = jobs.n
        window = np.zeros(n, dtype=bool)
        window[n // 4 : max(n // 4 + 1, (3 * n) // 4)] = True
        last = float(np.nanmax(jobs.finish_s)) if done.any() else float(jobs.arrival_s[0])
        return {
            **stats(arrived, ""),
            **stats(arrived & window, "window_"),
            "makespan_h": (last - float(jobs.arrival_s[0])) / 3600.0,
            "jobs_finished": int(done.sum()),
            "jobs_unfinished": int(np.count_nonzero(arrived & ~done)),
            "jobs_total": int(n),
            "episode_rounds": self._rounds_elapsed(),
        }

    # -- observations -------------------------------------------------------------------
    def _static_features(self, w: Workload) -> np.ndarray:
        """Per-job features that do not change during the episode (queue feature layout)."""
        zoo = self.zoo
        jobs = self.sim.jobs
        n = len(w)
        f = np.zeros((n, len(QUEUE_FEATURES)), dtype=np.float32)
        f[:, 0] = np.log2(w.gpus) / max(1.0, math.log2(self.cluster.total_gpus))
        task = np.array([TASKS.index(m.task) for m in zoo.models])[w.model]
        f[np.arange(n), 1 + task] = 1.0
        f[:, 4] = self._demand_cpu / zoo.cpu_grid[-1]
        f[:, 5] = self._demand_mem / zoo.mem_grid[-1]
        f[:, 6] = jobs.tput_target / self._tput_scale
        return np.clip(f, 0.0, 1.0)

    def _observation(self) -> dict[str, np.ndarray]:
        sim = self.sim
        jobs = sim.jobs
        now_h = sim.now / 3600.0
        q = int(self.cfg.max_queue)
        j = self._job
        queue = np.zeros((q, len(QUEUE_FEATURES)), dtype=np.float32)
        queue_mask = np.zeros(q, dtype=np.float32)
        if j < 0:
            job = np.zeros(len(JOB_FEATURES), dtype=np.float32)
            sensitivity = np.zeros(self.n_grid, dtype=np.float32)
            mask = self.action_masks().astype(np.float32)
        else:
            left = float(jobs.total_iters[j] - jobs.executed[j])
            age = now_h - float(self._arrival_h[j])
            fair = left * float(self._fair_h_per_iter[j])
            demand = left * float(self._demand_h_per_iter[j])
            job = np.concatenate(
                [
                    self._static[j, :7],
                    np.array(
                        [
                            age / (age + _TIME_SCALE_H),
                            left / float(jobs.total_iters[j]),
                            fair / (fair + _TIME_SCALE_H),
                            demand / (demand + _TIME_SCALE_H),
                            min(1.0, float(self._defers[j]) / self.cfg.max_defer_rounds),
                            1.0 if self._pref[j] >= 0 else 0.0,
                            min(1.0, float(jobs.tput_fair[j]) / self._tput_scale),
                        ],
                        dtype=np.float32,
                    ),
                ]
            )
            if jobs.belief is None:
                sensitivity = self._sensitivity[jobs.model[j]].copy()
            else:  # the job's estimated matrix
                sensitivity = np.minimum(jobs.belief[j].reshape(-1) / self._tput_scale, 1.0).astype(np.float32)
            mask = self._mask(j, as_float=True).copy()
            pos = self._scan.pos
            waiting = self._scan.order[pos + 1 : pos + 1 + q]
            if waiting:
                idx = np.asarray(waiting, dtype=np.int64)
                k = idx.size
                left_q = jobs.total_iters[idx] - jobs.executed[idx]
                times = np.empty((k, 3))
                times[:, 0] = now_h - self._arrival_h[idx]
                times[:, 1] = left_q * self._fair_h_per_iter[idx]
                times[:, 2] = left_q * self._demand_h_per_iter[idx]
                queue[:k, :7] = self._static[idx, :7]
                queue[:k, 7:] = times / (times + _TIME_SCALE_H)
                queue_mask[:k] = 1.0
        return {
            "job": job,
            "job_sensitivity": sensitivity,
            "cluster": self._cluster_features(),
            "queue": queue.reshape(-1),
            "queue_mask": queue_mask,
            "time": np.array([min(1.0, self._rounds_elapsed() / self.cfg.max_rounds)], dtype=np.float32),
            "action_mask": mask,
        }

    def _cluster_features(self) -> np.ndarray:
        c = self.cluster
        sim = self.sim
        ledger = sim.ledger
        bins = _HIST_BINS
        out = [0.0] * (3 + 3 * bins + 2)
        out[0] = (self._scan.free if self._scan is not None else ledger.free_gpus_total) / c.total_gpus
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
        queued = sim._runnable.size - running
        if queued < 0:
            queued = 0
        out[3 + 3 * bins] = running / (running + c.total_gpus)
        out[4 + 3 * bins] = queued / (queued + c.total_gpus)
        return np.array(out, dtype=np.float32)

    # -- rendering ---------------------------------------------------------------------------
    def _render_ansi(self) -> str:
        sim = self.sim
        if sim is None:
            return "(not reset)"
        ledger = sim.ledger
        c = self.cluster
        lines = [
            f"t={sim.now / 3600:.2f} h  round {self._rounds_elapsed()}  running {len(ledger.jobs)}  "
            f"waiting {max(0, sim._runnable.size - len(ledger.jobs))}  finished {self._fin_count}/{sim.jobs.n}",
            f"{'server':>6} {'free GPU':>8} {'free CPU':>8} {'free GB':>8}  jobs (id:model cpus/GB per GPU)",
        ]
        names = self.zoo.names
        for s in range(c.num_servers):
            held = [
                f"{sim.jobs.job_id[ledger.jobs[slot]]}:{names[sim.jobs.model[ledger.jobs[slot]]]} "
                f"{ledger.cpu[slot]:g}/{ledger.mem[slot]:g}"
                for slot in ledger.slot_on_server[s]
            ]
            lines.append(
                f"{s:>6} {ledger.free_gpu[s]:>8} {ledger.free_cpu[s]:>8.1f} {ledger.free_mem[s]:>8.1f}  {', '.join(held)}"
            )
        if self._job >= 0:
            j = self._job
            lines.append(f"deciding job {sim.jobs.job_id[j]} ({names[sim.jobs.model[j]]}, {sim.jobs.gpus[j]} GPUs)")
        return "\n".join(lines)

    def _render_rgb(self) -> np.ndarray:
        """The cluster as an RGB image (H × W × 3 uint8, at least 640 × 360).

        Three panels – GPUs, CPUs and memory in use – with one labelled bar per
        server (scaled to the server's capacity), and a header with the time,
        round, job counts and the job being decided. See :class:`_ClusterPicture`.
        """
        picture = getattr(self, "_picture", None)
        if picture is None:
            picture = self._picture = _ClusterPicture(self.cluster)
        sim = self.sim
        c = self.cluster
        if sim is None:
            zeros = np.zeros(c.num_servers)
            return picture.draw((zeros, zeros, zeros), "Synergy cluster (not reset)")
        ledger = sim.ledger
        used = (
            c.gpus_per_server - np.asarray(ledger.free_gpu, dtype=float),
            c.cpus_per_server - np.asarray(ledger.free_cpu, dtype=float),
            c.mem_gb_per_server - np.asarray(ledger.free_mem, dtype=float),
        )
        waiting = max(0, sim._runnable.size - len(ledger.jobs))
        header = (f"t = {sim.now / 3600:.2f} h, round {self._rounds_elapsed()}: {len(ledger.jobs)} running, "
                  f"{waiting} waiting, {self._fin_count}/{sim.jobs.n} finished")
        if self._job >= 0:
            j = self._job
            gpus = int(sim.jobs.gpus[j])
            header += (f"\ndeciding job {sim.jobs.job_id[j]} ({self.zoo.names[sim.jobs.model[j]]}, "
                       f"{gpus} GPU{'' if gpus == 1 else 's'})")
        return picture.draw(used, header)

    def close(self) -> None:
        picture = getattr(self, "_picture", None)
        if picture is not None:
            picture.close()
            self._picture = None
        super().close()


class _ClusterPicture:
    """The ``rgb_array`` picture of a cluster: a matplotlib figure on its own Agg canvas.

    The frame (axes, server labels, capacity bars, panel titles) is drawn once;
    each :meth:`draw` restores it and draws only the bars in use and the texts
    (blitting), which keeps a render at a few milliseconds. The figure is not
    registered with pyplot, so renders leave no open figures behind; pickling
    drops it (it is rebuilt on the next render).
    """

    PANELS = (("GPUs", "tab:blue"), ("CPUs", "tab:orange"), ("memory GB", "tab:green"))

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self._fig = None

    def __getstate__(self) -> dict:
        return {"cluster": self.cluster, "_fig": None}

    def close(self) -> None:
        if self._fig is not None:
            self._fig.clear()
        self._fig = None

    def _build(self) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        c = self.cluster
        n = c.num_servers
        height_in = min(max(3.6, 1.4 + 0.16 * n), 12.0)  # at 100 dpi: 640 × ≥360 pixels, taller for big clusters
        fig = Figure(figsize=(6.4, height_in), dpi=100, facecolor="white")
        canvas = FigureCanvasAgg(fig)
        axes = fig.subplots(1, 3, sharey=True)
        top_px, bottom_px = 62, 34  # room for the header and the totals, in pixels
        fig.subplots_adjust(left=0.14, right=0.98, bottom=bottom_px / (100 * height_in),
                            top=1 - top_px / (100 * height_in), wspace=0.12)
        y = np.arange(n)
        step = max(1, int(np.ceil(n / 24)))  # label at most ~24 servers
        fontsize = 7 if n <= 24 else 6
        self._bars, self._totals = [], []
        capacities = (c.gpus_per_server, c.cpus_per_server, c.mem_gb_per_server)
        for ax, (name, colour), capacity in zip(axes, self.PANELS, capacities):
            ax.barh(y, np.full(n, float(capacity)), color="0.9", height=0.8)
            bars = ax.barh(y, np.zeros(n), color=colour, height=0.8)
            for bar in bars.patches:
                bar.set_animated(True)
            self._bars.append(bars.patches)
            ax.set_xlim(0, capacity)
            ax.set_title(f"{name} in use (of {capacity:g})", fontsize=8)
            ax.set_xticks([0, capacity / 2, capacity], ["0", f"{capacity / 2:g}", f"{capacity:g}"])
            ax.tick_params(labelsize=fontsize, length=2, pad=1)
            self._totals.append(ax.text(0.5, -bottom_px * 0.45 / ax.bbox.height, "", transform=ax.transAxes,
                                        ha="center", va="top", fontsize=8, animated=True))
        axes[0].set_yticks(y[::step], [f"server {s}" for s in y[::step]])
        axes[0].set_ylim(n - 0.5, -0.5)  # server 0 at the top
        self._header = fig.text(0.5, 1 - 6 / (100 * height_in), "", ha="center", va="top", fontsize=9, animated=True)
        canvas.draw()
        self._background = canvas.copy_from_bbox(fig.bbox)
        self._fig, self._canvas, self._capacities = fig, canvas, capacities

    def draw(self, used: tuple[np.ndarray, np.ndarray, np.ndarray], header: str) -> np.ndarray:
        """The picture with ``used`` (GPUs, CPUs, GB in use per server) and ``header``, as H × W × 3 uint8."""
        if self._fig is None:
            self._build()
        fig, canvas = self._fig, self._canvas
        canvas.restore_region(self._background)
        n = self.cluster.num_servers
        for patches, values, total_text, capacity in zip(self._bars, used, self._totals, self._capacities):
            values = np.clip(np.asarray(values, dtype=float), 0.0, capacity)
            for patch, value in zip(patches, values.tolist()):
                patch.set_width(value)
                fig.draw_artist(patch)
            total = float(values.sum())
            total_text.set_text(f"total {total:g} / {capacity * n:g} ({100 * total / (capacity * n):.0f}%)")
            fig.draw_artist(total_text)
        self._header.set_text(header)
        fig.draw_artist(self._header)
        return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()


class MaskedDiscrete(spaces.Discrete):
    """``Discrete`` whose :meth:`sample` draws a valid action for the current job unless given a mask.

    Random exploration (``action_space.sample()`` in checkers, DQN's ε-greedy)
    thus never picks a masked action, which :meth:`SynergyEnv.step` rejects.
    """

    def __init__(self, n: int, mask_fn, seed: int | None = None) -> None:
        super().__init__(n, seed=seed)
        self._mask_fn = mask_fn

    def sample(self, mask=None, probability=None):
        if mask is None and probability is None and self._mask_fn is not None:
            mask = self._mask_fn().astype(np.int8)
        return super().sample(mask=mask, probability=probability)

    def __getstate__(self) -> dict:
        # A pickled space (sent between processes by vector envs) is a plain
        # Discrete; the environment re-attaches its masks when it is unpickled.
        state = dict(self.__dict__)
        state["_mask_fn"] = None
        return state


@dataclass
class _Scan:
    """Progress through one round's ordered jobs while the agent decides."""

    order: list
    free: int  # GPUs not yet taken by this round's admitted jobs
    in_sync: bool  # every job admitted so far sits where last round placed it
    pos: int = 0
    admitted: list = field(default_factory=list)
    marks: list = field(default_factory=list)  # ledger mark before each admitted job's placement
    taken: list = field(default_factory=list)  # GPUs taken before each admitted job
    deferred: bool = False
    #: Admitted jobs are in non-increasing GPU count, so placing them one by one
    #: in admission order is exactly what Tune does; otherwise Tune re-places them.
    sorted_by_gpus: bool = True
    last_gpus: int = 0


@dataclass
class _Placed:
    """Last round's admitted jobs in placement order, with the ledger mark before each."""

    jobs: list
    marks: list
    taken: list  # GPUs taken before each position, and after the last


def _as_cluster(value: Any) -> ClusterSpec:
    if isinstance(value, ClusterSpec):
        return value
    if isinstance(value, Mapping):
        return ClusterSpec.from_mapping(value, source="env kwarg cluster")
    if isinstance(value, (str, Path)):
        return load_cluster(value)
    raise ConfigError(f"env kwarg cluster must be a preset name, a TOML path, a mapping or a ClusterSpec, got {value!r}")
