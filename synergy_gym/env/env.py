"""The Gymnasium environment: an agent chooses each job's CPU and memory around its GPUs."""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from synergy_gym.allocation import Tune
from synergy_gym.env.config import EnvConfig, as_cluster
from synergy_gym.env.masks import DEMAND_ACTION, FAIR_ACTION, ActionMasks, MaskedDiscrete
from synergy_gym.env.observation import ObservationBuilder
from synergy_gym.env.render import ClusterPicture, render_ansi, render_rgb
from synergy_gym.env.reward import SystemTimeMeter
from synergy_gym.env.source import episode_workload, source_from_config
from synergy_gym.env.summary import episode_summary
from synergy_gym.ordering import ORDERINGS
from synergy_gym.policy import SchedulingPolicy
from synergy_gym.profiles import ModelZoo
from synergy_gym.simulator import Simulator
from synergy_gym.workload import Workload


class SynergyEnv(gym.Env[dict[str, np.ndarray], np.int64]):
    """Allocate CPUs and memory around each job's GPUs on a multi-tenant GPU cluster.

    ## Description

    A cluster (by default the paper's 16 × (8 GPUs, 24 CPUs, 500 GB)) runs training jobs in
    rounds of 300 s. Each round the ordering (``order``: ``fifo``, ``srtf``, ``las``) ranks the
    runnable jobs and the simulator's :class:`~synergy_gym.planner.RoundPlanner` admits them by
    GPU count (smaller later jobs backfill) and places them with Synergy-Tune's mechanics. When a
    job is admitted for the first time the planner stops and the agent chooses its *preference*
    (CPUs and memory per GPU), which is its target every round: it gets it where it fits, else
    the preference capped at the fair share, and jobs holding more are cut back to make room.
    The agent is asked once per job (again every ``reconsider_every`` rounds if set). Always
    action 1 reproduces the simulator's ``<order>+tune`` exactly; always action 0 reproduces
    ``fifo+fair`` and ``las+fair`` (under ``srtf`` an undecided job ranks at its demand).

    ## Action Space

    ``Discrete(2 + G)``, or ``Discrete(3 + G)`` with ``allow_defer=True`` (G = 45 grid points):
    0 – the fair share (3 CPUs, 62.5 GB per GPU by default); 1 – the model's best-case demand;
    2 + k – grid point k in row-major (cpu level, memory level) order, i.e. ``cpu_grid[k // 5]``
    CPUs and ``mem_grid[k % 5]`` GB per GPU; 2 + G (with ``allow_defer``) – keep the job out this
    round (after ``max_defer_rounds`` deferrals it is admitted at its demand without asking).
    ``action_space.sample()`` draws a valid action. :meth:`action_masks` (and
    ``obs["action_mask"]``) masks grid points slower than the fair share (at the point or capped
    at the fair share) and points beyond one server's CPUs or memory; actions 0 and 1 are always
    valid. Stepping with an invalid action raises ``ValueError``.

    ## Observation Space

    A ``Dict`` of ``Box`` spaces whose shapes do not depend on the cluster size (durations
    enter as ``h / (h + 10)``, counts and sizes scaled into [0, 1]):

    * ``job`` (14): the job being decided – log GPUs, task one-hot, demand (CPUs, GB per GPU),
      speed-up at demand, age, fraction of work left, run time left at fair share and at demand,
      deferrals, whether it already has a preference, its fair-share throughput;
    * ``job_sensitivity`` (45): its normalised throughput matrix, row-major;
    * ``cluster`` (20): free GPU, CPU and memory fractions this round (after the jobs admitted so
      far; provisional while a multi-GPU job is re-placed at the round's end), histograms (5 bins)
      of the per-server free GPU, CPU and memory fractions, running and queued jobs;
    * ``queue`` (``max_queue`` · 10): the next waiting jobs in policy order (the first 10
      features of ``job``), zero-padded; ``queue_mask`` (``max_queue``): 1 for real rows;
    * ``time`` (1): rounds elapsed / ``max_rounds``; ``action_mask`` (actions): 1 for valid actions.

    ## Rewards

    After each action: minus the total time jobs spent in the system (arrived, not finished)
    from the previous decision to the next one, divided by ``reward_scale`` (default 3600, hours).
    The undiscounted return of a finished episode is −(sum of its JCTs) / scale.

    ## Starting State

    The cluster starts empty. Jobs come from a workload source (:mod:`synergy_gym.env.source`):
    the paper's generator (``jobs_per_hour``, ``num_jobs``, ``multigpu``, ``class_split``) with a
    seed from ``self.np_random`` on every reset (or ``reset(options={"workload_seed": s})``), or
    fixed jobs – ``workload`` (a replay CSV path, a :class:`Workload` or a source object) or
    ``trace`` (a real trace's first ``num_jobs`` jobs).
    The first observation is the first admitted job.

    ## Episode End

    ``terminated`` when every job has finished; ``truncated`` after ``max_rounds`` rounds.
    ``info`` holds ``finished_jct_h`` and ``finished_job_ids`` (since the last step) and
    ``sim_time_h``; at the end also ``mean_jct_h``, ``median_jct_h``, ``p99_jct_h`` (all arrived
    jobs; unfinished ones count with their time so far), ``window_mean_jct_h``,
    ``window_median_jct_h``, ``window_p99_jct_h`` (the workload's measured window: the middle
    half by arrival for generated workloads, a replay file's ``in_measured_window``),
    ``makespan_h``, ``jobs_finished``, ``jobs_unfinished``, ``jobs_total``, ``episode_rounds``.

    ## Arguments

    ``gym.make("Synergy-v0", **kwargs)`` or ``SynergyEnv(config_dict)`` (RLlib); every kwarg is a
    field of :class:`~synergy_gym.env.config.EnvConfig`, documented there. Registered:
    ``Synergy-v0`` (128 GPUs, 9 jobs/h, 1,000 jobs, max 10,000 rounds) and ``Synergy-small-v0``
    (4 × 8 GPUs, 2.25 jobs/h – the same load per GPU – 300 jobs, max 4,000 rounds).

    ## Version History

    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.cfg = cfg = EnvConfig.from_kwargs({**dict(config or {}), **kwargs})
        self.render_mode = cfg.render_mode
        self.cluster = as_cluster(cfg.cluster)
        self.zoo = ModelZoo.default()
        self.source = source_from_config(cfg, self.cluster, self.zoo)
        self.sim_config = cfg.simulation_config()
        self.policy = SchedulingPolicy(ORDERINGS[cfg.order](), Tune())
        n_grid = len(self.zoo.cpu_grid) * len(self.zoo.mem_grid)
        n_actions = 2 + n_grid + (1 if cfg.allow_defer else 0)
        self.defer_action = 2 + n_grid if cfg.allow_defer else None
        self.masks = ActionMasks(self.cluster, self.zoo, n_actions)
        self.action_space = MaskedDiscrete(n_actions, self.action_masks)
        self.obs_builder = ObservationBuilder(self.cluster, self.zoo, cfg.max_queue, n_actions)
        self.observation_space = self.obs_builder.space
        self._picture: ClusterPicture | None = None
        self.sim: Simulator | None = None
        self._job = -1

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.action_space._mask_fn = self.action_masks

    # -- gymnasium API --------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        workload = episode_workload(self.source, self.np_random, options)
        config = self.sim_config
        if self.cfg.sensitivity == "profiled":  # a fresh profiling noise draw per episode
            config = self.cfg.simulation_config(profile_seed=int(self.np_random.integers(0, 2**31 - 1)))
        self.sim = sim = Simulator(self.cluster, workload, self.policy, config)
        self.masks.new_episode()
        jobs = sim.jobs
        self._demand_cpu, self._demand_mem = jobs.target_cpu.copy(), jobs.target_mem.copy()
        self.obs_builder.new_episode(sim, workload)
        self._pref = np.full(jobs.n, -1, dtype=np.int64)
        self._decided_round = np.zeros(jobs.n, dtype=np.int64)
        self._defers = np.zeros(jobs.n, dtype=np.int64)
        self._meter = SystemTimeMeter(jobs, self.cfg.reward_scale)
        self._job, self._truncated = -1, False
        self._pending_finished: list[np.ndarray] = []
        self._advance_to_decision()
        return self._observation(), {}

    def step(self, action):
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() before step()")
        if self._job < 0:
            raise RuntimeError("the episode has ended; call reset()")
        a, j = self.masks.check(sim.jobs, self._job, action), self._job
        if a == self.defer_action:
            self._defers[j] += 1
            sim.planner.pass_over(j)
        else:
            self._set_preference(j, a)
            sim.planner.accept(j)
        self._advance_to_decision()
        reward = self._meter.reward_until(sim.now)
        jct_h: list[float] = []
        ids: list[int] = []
        if self._pending_finished:  # lists: vector envs batch per-env info of varying length as objects
            jobs, finished = sim.jobs, np.concatenate(self._pending_finished)
            self._pending_finished = []
            jct_h = ((jobs.finish_s[finished] - jobs.arrival_s[finished]) / 3600.0).tolist()
            ids = jobs.job_id[finished].tolist()
        info: dict[str, Any] = {"finished_jct_h": jct_h, "finished_job_ids": ids, "sim_time_h": sim.now / 3600.0}
        terminated, truncated = self._job < 0 and not self._truncated, self._truncated
        if terminated or truncated:
            info.update(self.episode_summary())
        return self._observation(), float(reward), terminated, truncated, info

    @property
    def current_job(self) -> int:
        """Index (in ``sim.jobs``) of the job awaiting a decision; −1 once the episode has ended."""
        return self._job

    def workload_for_seed(self, seed: int) -> Workload:
        """The jobs ``reset(options={"workload_seed": seed})`` runs (any seed, for a fixed workload)."""
        return self.source.workload(seed)

    def preference_of(self, j: int) -> int:
        """The action chosen for job ``j`` (−1: none yet)."""
        return int(self._pref[j])

    def action_masks(self) -> np.ndarray:
        """Valid actions for the current job (for sb3-contrib's MaskablePPO)."""
        return self.masks.ended() if self._job < 0 else self.masks.of(self.sim.jobs, self._job).copy()

    def render(self):
        finished = self._meter.finished if self.sim is not None else 0
        if self.render_mode == "ansi":
            return render_ansi(self.sim, self.zoo, finished, self._job)
        if self.render_mode == "rgb_array":
            if self._picture is None:
                self._picture = ClusterPicture(self.cluster)
            return render_rgb(self._picture, self.sim, self.zoo, finished, self._job)
        return None

    def close(self) -> None:
        if self._picture is not None:
            self._picture.close()
            self._picture = None
        super().close()

    def episode_summary(self) -> dict[str, float]:
        """JCT statistics of the episode so far (see :func:`synergy_gym.env.summary.episode_summary`)."""
        return episode_summary(self.sim)

    # -- the decision loop ----------------------------------------------------------------
    def _advance_to_decision(self) -> None:
        """Plan rounds until the planner stops at a job that needs a decision, or the episode ends."""
        sim, cfg = self.sim, self.cfg
        planner = sim.planner
        while True:
            if not planner.in_round:
                if sim.done or sim.exhausted:
                    self._job = -1
                    return
                if sim.rounds_elapsed >= cfg.max_rounds:
                    self._truncated, self._job = True, -1
                    return
                order = sim.begin_round()
                if order is None:
                    continue
                planner.begin(order.tolist(), reuse_prefix=cfg.reconsider_every is None)
            j = planner.next_decision(self._needs_decision)
            if j >= 0:
                self._job = j
                return
            passed_over = planner.passed_over
            planner.finish()
            limit = max(1, cfg.max_rounds - sim.rounds_elapsed)
            if passed_over:
                limit = 1  # deferred jobs are asked again next round
            elif cfg.reconsider_every is not None:
                limit = min(limit, self._rounds_until_reconsideration())
            finished = sim.advance(max_rounds=limit, allow_idle=passed_over)
            if finished.size:
                self._pending_finished.append(finished)
                self._meter.record_finished(finished)

    def _needs_decision(self, j: int) -> bool:
        if self._pref[j] < 0:
            if self.defer_action is not None and self._defers[j] >= self.cfg.max_defer_rounds:
                self._set_preference(j, DEMAND_ACTION)
                return False
            return True
        every = self.cfg.reconsider_every
        return every is not None and self.sim.rounds_elapsed - self._decided_round[j] >= every

    def _rounds_until_reconsideration(self) -> int:
        placed = self.sim.ledger.jobs
        if not placed:
            return 1
        due = self._decided_round[placed].min() + self.cfg.reconsider_every - self.sim.rounds_elapsed
        return max(1, int(due))

    def _set_preference(self, j: int, a: int) -> None:
        self._pref[j] = a
        self._decided_round[j] = self.sim.rounds_elapsed
        jobs = self.sim.jobs
        if a == FAIR_ACTION:
            jobs.set_target(j, jobs.fair_cpu, jobs.fair_mem)
        elif a == DEMAND_ACTION:
            jobs.set_target(j, float(self._demand_cpu[j]), float(self._demand_mem[j]))
        else:
            jobs.set_target(j, *self.masks.grid_points[a - 2])

    # -- observations ------------------------------------------------------------------------
    def _observation(self) -> dict[str, np.ndarray]:
        j = self._job
        mask = self.action_masks().astype(np.float32) if j < 0 else self.masks.of(self.sim.jobs, j, True).copy()
        defers = float(self._defers[j]) / self.cfg.max_defer_rounds if j >= 0 else 0.0
        has_preference = j >= 0 and self._pref[j] >= 0
        time_fraction = self.sim.rounds_elapsed / self.cfg.max_rounds
        return self.obs_builder.build(self.sim, j, defers, has_preference, mask, time_fraction)
