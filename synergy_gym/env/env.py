"""The Gymnasium environment: an agent schedules a GPU cluster – which waiting job runs next, and with how much."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from synergy_gym.env.calls import (
    EnvCallError,
    before_reset,
    check_job_index,
    check_reset_options,
    check_seed,
    check_workload_seed,
    episode_ended,
    shown,
)
from synergy_gym.env.config import EnvConfig, as_cluster, constructor_kwargs, same_env_kwarg
from synergy_gym.env.decision_loop import DecisionLoop
from synergy_gym.env.levels import LevelTable, check_grid_levels
from synergy_gym.env.masks import ActionLayout
from synergy_gym.env.observation import ObservationBuilder
from synergy_gym.env.render import ClusterPicture, render_ansi, render_rgb
from synergy_gym.env.reward import SystemTimeMeter
from synergy_gym.env.source import episode_workload, job_shapes, source_from_config, source_jobs
from synergy_gym.env.summary import episode_summary
from synergy_gym.env.types import NO_JOBS, Decision, EpisodeState
from synergy_gym.sim.allocation import Tune
from synergy_gym.sim.ordering import FIFO
from synergy_gym.sim.policy import SchedulingPolicy
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.simulator import Simulator
from synergy_gym.sim.workload import Workload

#: A decoded action as :meth:`SynergyEnv._resolve` gives it: (kind, slot, level, ahead, row, invalid).
_Resolved = tuple[str, int, int, bool, int, bool]
_STOP: _Resolved = ("stop", -1, -1, False, -1, False)


class SynergyEnv(gym.Env[dict[str, np.ndarray], np.int64]):
    """Schedule training jobs on a multi-tenant GPU cluster: which job runs next, and with how many CPUs and GB.

    ## Description

    A cluster (by default the paper's 16 × (8 GPUs, 24 CPUs, 500 GB)) runs training jobs in
    rounds of 300 s. Each job asks for a fixed number of GPUs; its speed depends on the CPUs
    and memory it gets around them. At every *scheduling event* – a round boundary at which a
    job arrived or finished, and then each next ask after an admission – while some waiting
    job's GPUs fit in the free GPUs, the agent picks one of those jobs and an *allocation
    level* for it, or *stop*. Rounds in which nothing can change are skipped.

    **Default (non-preemptive) mode:** an admitted job keeps its GPUs until it finishes; every
    round the running jobs are re-placed in admission order at their levels with
    Synergy-Tune's mechanics (a level that does not fit falls back towards the fair share and
    over-provisioned jobs give back their excess; placement in descending GPU count, ties in
    admission order). **``preemptive=True``** (``redecide="changes"``): running jobs keep their
    GPUs and level at an event unless the agent preempts them; the agent may also admit a job
    *ahead* of the running jobs (placed before them). **``preemptive=True,
    redecide="every_event"``:** at each event every job returns to the waiting set and the agent
    refills the cluster, as the paper's simulator re-plans every round. Always choosing the first
    slot at its demand level reproduces the simulator's ``fifo+tune`` exactly with
    ``"every_event"``, and in the default mode on single-GPU workloads (with ``timing="exact"`` to
    rounding error: the environment splits time at arrivals); with ``"changes"`` the environment
    heuristic ``fifo+tune`` does while every waiting job has a slot (``max_queue``) and every running job a
    row (``max_running``).

    ## Action Space

    ``Discrete(max_queue · L + 1)``, L = the number of levels (5 with ``levels="default"``,
    45 with ``"grid"``; :mod:`synergy_gym.env.levels`). Action ``slot · L + level`` admits the job
    in ``slot`` at ``level``; the last action is *stop*: admit nothing more until the next
    event (a stop that leaves the cluster idle moves to the next round boundary). Default
    levels: 0 the fair share, 1 the job's best-case demand, 2–4 the cheapest grid points
    reaching 90 %, 75 % and 50 % of the way from fair-share to demand throughput. Slots are
    the first ``max_queue`` waiting jobs by arrival among those whose GPUs fit now.
    ``agent_orders=False`` offers only the earliest job that fits (the agent allocates, FIFO orders). With
    ``preemptive=True, redecide="changes"``: ``Discrete(2 · max_queue · L + max_running + 1)`` –
    the admissions, the same placed ahead of the running jobs, a preemption per running row,
    stop; every waiting job has a slot, those whose GPUs do not fit now masked.

    Every action is accepted: :meth:`action_masks` (and ``obs["action_mask"]``) marks the
    valid ones – filled slots, levels that can ever be honoured for the job, stop – and with
    ``invalid_action="fallback"`` (default) a masked action falls back to a valid one (an
    empty slot → the last filled slot; an invalid level → the nearest valid level of that
    slot; see :mod:`synergy_gym.env.masks`), counted in ``info["invalid_action"]``. With
    ``invalid_action="raise"`` it raises :class:`~synergy_gym.env.calls.EnvCallError` (a ``ValueError``).

    ## Observation Space

    A ``Dict`` of ``Box`` spaces whose shapes do not depend on the cluster size (feature
    order: :mod:`synergy_gym.env.observation`): ``slots`` (``max_queue`` × 11, flat: GPUs,
    task, remaining work, run time left at fair share and at demand, age, attained service,
    was running), ``slot_levels`` (``max_queue`` × L × 3, flat: CPUs and GB per GPU relative
    to the fair share, speed-up; :func:`~synergy_gym.env.observation.slot_arrays` reshapes
    both), ``slot_mask``; ``cluster`` (free GPU/CPU/memory fractions and
    per-server histograms, running and waiting counts); ``running`` (what the running jobs run
    at: count, mean speed-up, speed-up and run-time-left histograms); ``demand`` (best-case
    CPU and memory demand of running and waiting jobs, waiting GPUs, against capacity);
    ``queue_rest`` (waiting jobs beyond the slots: count and work; jobs that do not fit);
    ``time`` (rounds / ``max_rounds``); ``action_mask``; with ``preemptive=True,
    redecide="changes"`` also ``running_slots`` (``max_running`` × 16, flat: the running rows'
    job features, level, and what preempting each frees), ``running_mask`` and ``slot_fits``
    (per slot and level, whether the servers have room for it now). All four ids share one
    observation space in each mode. During an event that admits a job with more GPUs than one admitted before it,
    the free resources are provisional: the round is re-placed in Tune's order when it ends.

    ## Rewards

    After each action: minus the total time jobs spent in the system (arrived, not finished)
    from the previous decision to the next one, divided by ``reward_scale`` (default 3600, hours).
    The undiscounted return of a finished episode is −(sum of its JCTs) / scale.

    ## Starting State

    The cluster starts empty. Jobs come from a workload source (:mod:`synergy_gym.env.source`):
    the paper's generator (``jobs_per_hour``, ``num_jobs``, ``multigpu``, ``class_split``) with a
    seed from ``self.np_random`` on every reset (or ``reset(options={"workload_seed": s})``;
    :meth:`workload_for_seed` gives those jobs), or fixed jobs – ``workload`` (a replay CSV
    path, a :class:`Workload` or a source object) or ``trace`` (a real trace's first
    ``num_jobs`` jobs).

    ## Episode End

    ``terminated`` when every job has finished; ``truncated`` after ``max_rounds`` rounds.
    ``info`` holds ``finished_jct_h`` and ``finished_job_ids`` (since the last step),
    ``sim_time_h`` and ``invalid_action``; at the end also ``mean_jct_h``, ``median_jct_h``,
    ``p99_jct_h`` (all arrived jobs; unfinished ones count with their time so far),
    ``window_mean_jct_h``, ``window_median_jct_h``, ``window_p99_jct_h`` (the workload's
    measured window), ``makespan_h``, ``jobs_finished``, ``jobs_unfinished``, ``jobs_total``,
    ``episode_rounds``, ``decisions``, ``invalid_actions`` and ``preemptions``.

    The final observation's ``action_mask`` allows only stop. Terminated: nothing else is left
    (all zeros but ``time``). Truncated: the state at the limit as a decision there would show it –
    the free resources, the running jobs (and running rows), the waiting jobs in the slots
    (``slot_mask``, ``running_mask`` and ``slot_fits`` as at a decision), demand and queue – so
    that a value bootstrapped from it sees the unfinished work.

    ## Arguments

    ``gym.make("Synergy-v0", **kwargs)`` or ``SynergyEnv(config_dict)`` (RLlib); every kwarg is a
    field of :class:`~synergy_gym.env.config.EnvConfig`, documented there. Registered ids:
    ``Synergy-v0``, ``Synergy-small-v0``, ``Synergy-scarce-v0``, ``Synergy-small-scarce-v0``
    (see ``synergy_gym.SCENARIOS``).

    ## Misuse

    One-line errors naming the call (:mod:`synergy_gym.env.calls`): ``ResetNeeded`` for ``step``,
    ``action_masks``, ``episode_summary``, ``level_of`` or ``state`` before ``reset()`` and for
    ``step`` after the end; ``EnvCallError`` for a bad ``seed``, ``options``, action or job index.

    ## Version History

    * v0: scheduling actions (slot × allocation level, and stop), non-preemptive by default;
      ``preemptive=True`` decides only what changes (preemptions, admissions ahead) since issue 26,
      the earlier preemptive mode is ``redecide="every_event"``.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.cfg = cfg = EnvConfig.from_kwargs(constructor_kwargs(config, kwargs))  # a key set differently in both: refused
        self.render_mode = cfg.render_mode
        self.cluster = as_cluster(cfg.cluster)
        self.zoo = ModelZoo.default()
        self.source = source_from_config(cfg, self.cluster, self.zoo)
        self.sim_config = cfg.simulation_config()
        self.policy = SchedulingPolicy(FIFO(), Tune())
        self.levels = LevelTable(self.zoo, self.cluster, cfg.levels)
        if cfg.levels == "grid":  # a job that could never be admitted: refused now, not at some later reset
            check_grid_levels(self.zoo, self.cluster, job_shapes(self.source, self.zoo))
        grid_shape = (len(self.zoo.cpu_grid), len(self.zoo.mem_grid)) if cfg.levels == "grid" else None
        n_running = cfg.max_running if cfg.on_changes else 0
        self.layout = ActionLayout(
            cfg.max_queue, self.levels.n_levels, cfg.agent_orders, cfg.invalid_action, grid_shape, n_running
        )
        self.loop = DecisionLoop(cfg, self.layout, self.cluster)
        self.action_space = spaces.Discrete(self.layout.n)
        self.obs_builder = ObservationBuilder(
            self.cluster, self.zoo, cfg.max_queue, self.levels.n_levels, self.layout.n, n_running, cfg.with_fit_features
        )
        # (a spaces.Dict is a Space of dict[str, Any] to Gymnasium ≥ 1.4's types; its values are arrays)
        self.observation_space = cast("spaces.Space[dict[str, np.ndarray]]", self.obs_builder.space)
        self._picture: ClusterPicture | None = None
        self._state: EpisodeState | None = None

    # -- gymnasium API --------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        seed, options = check_seed(seed), check_reset_options(options)  # before anything changes
        super().reset(seed=seed)
        workload = episode_workload(self.source, self.np_random, options, self.zoo)
        config = self.sim_config
        if self.cfg.sensitivity == "profiled":  # a fresh profiling noise draw per episode
            config = self.cfg.simulation_config(profile_seed=int(self.np_random.integers(0, 2**31 - 1)))
        sim = Simulator(self.cluster, workload, self.policy, config)
        jobs = sim.jobs
        level_cpu, level_mem, level_tput, level_valid = self.levels.build(jobs)
        n, n_levels = level_cpu.shape
        # Per job and level, what admitting it there sets as its target (JobTable.target_rows).
        level_targets = jobs.target_rows(np.repeat(np.arange(n), n_levels), level_cpu.ravel(), level_mem.ravel())
        self.obs_builder.new_episode(sim, level_cpu, level_mem, level_tput, never_ran=not self.cfg.preemptive)
        self._state = EpisodeState(
            sim=sim, level_cpu=level_cpu, level_mem=level_mem, level_tput=level_tput, level_valid=level_valid,
            level_targets=level_targets.reshape(n, n_levels, -1),
            level=np.full(n, -1, dtype=np.int64), holds=np.zeros(n, dtype=bool),
            was_running=np.zeros(n, dtype=np.float32), multi_gpu=bool((jobs.gpus > 1).any()),
            meter=SystemTimeMeter(jobs, self.cfg.reward_scale), mask=np.zeros(self.layout.n, dtype=np.float32),
            wait_buf=np.zeros(n, dtype=np.int64), fits_buf=np.zeros(n, dtype=bool), held_buf=np.zeros(n, dtype=np.int64),
            slot_buf=np.zeros(self.cfg.max_queue, dtype=np.int64),
        )
        self.loop.advance(self._state)
        return self._observation(self._state), {}

    def step(self, action):
        s = self._episode("env.step()")
        if s.ended:
            raise episode_ended("env.step()")
        kind, slot, level, ahead, row, invalid = self._resolve(s, action)  # a tuple: no Decision built per step
        s.decisions += 1
        s.invalid += invalid
        if kind == "stop":
            s.stopped = True
        elif kind == "preempt":
            self.loop.preempt(s, row)
        else:
            self.loop.admit(s, int(s.slot_buf[slot]), level, ahead)
        return self._after_action(s, invalid)

    def decode(self, action) -> Decision:
        """What ``action`` would do at the current decision, after the fallback for a masked action; nothing changes.

        With ``invalid_action="raise"`` a masked action raises as :meth:`step` would.
        """
        s = self._episode("env.decode()")
        if s.ended:
            raise episode_ended("env.decode()")
        kind, slot, level, ahead, row, invalid = self._resolve(s, action, "env.decode()")  # its errors name this call
        return Decision(kind, slot=slot, level=level, ahead=ahead, row=row, invalid=invalid)

    def _resolve(self, s: EpisodeState, action, call: str = "env.step()") -> _Resolved:
        """:meth:`decode`'s fields as a tuple (the step's hot path); errors name ``call``."""
        layout = self.layout
        a = layout.parse(action, call)
        if a == layout.stop:
            return _STOP
        if a >= layout.preempt and s.n_preemptable:  # preempt a running row (redecide="changes")
            row = layout.resolve_preemption(a, s.n_preemptable, call)
            return ("preempt", -1, -1, False, row, row != a - layout.preempt)
        ahead = layout.ahead <= a < layout.preempt  # placed before the running jobs (redecide="changes")
        slot, level = divmod(a - layout.ahead if ahead else a, layout.n_levels)
        invalid = False
        if a >= layout.preempt:  # no running row: a masked admission
            slot, level, invalid = layout.resolve(a, s.slot_valid, call)
        elif not s.mask[slot * layout.n_levels + level]:  # not offered, or does not fit now, or a level never honoured
            slot, level, invalid = layout.resolve(a, s.slot_valid, call)  # masked: raise, or fall back
        if slot < 0:
            return ("stop", -1, -1, False, -1, invalid)
        if ahead and s.n_kept == 0:  # nothing runs to be placed before: an admission (masked)
            if layout.raise_on_invalid:
                raise EnvCallError(f"{call}: action {a} is masked: no running job to place the admission ahead of; "
                                   f"action {a - layout.ahead} admits the same job and level")
            ahead, invalid = False, True
        return ("admit", slot, level, ahead, -1, invalid)

    def _after_action(self, s: EpisodeState, invalid: bool):
        """Run to the next decision; the step's observation, reward, flags and info."""
        self.loop.advance(s)
        sim = s.sim
        reward = s.meter.reward_until(sim.now)
        jct_h: list[float] = []
        ids: list[int] = []
        if s.pending_finished:  # lists: vector envs batch per-env info of varying length as objects
            jobs, finished = sim.jobs, np.concatenate(s.pending_finished)
            s.pending_finished = []
            jct_h = ((jobs.finish_s[finished] - jobs.arrival_s[finished]) / 3600.0).tolist()
            ids = jobs.job_id[finished].tolist()
        info: dict[str, Any] = {
            "finished_jct_h": jct_h, "finished_job_ids": ids, "sim_time_h": sim.now / 3600.0, "invalid_action": invalid,
        }
        terminated, truncated = s.ended and not s.truncated, s.truncated
        if terminated or truncated:
            info.update(self.episode_summary())
        return self._observation(s), float(reward), terminated, truncated, info

    def _episode(self, call: str) -> EpisodeState:
        """The current episode's state, or :class:`~synergy_gym.env.calls.ResetNeeded` naming ``call``."""
        if self._state is None:
            raise before_reset(call)
        return self._state

    @property
    def state(self) -> EpisodeState:
        """The current episode's state (:class:`~synergy_gym.env.types.EpisodeState`); ``reset()`` first."""
        return self._episode("access env.state")

    @property
    def sim(self) -> Simulator | None:
        """The current episode's simulator (None before the first ``reset()``)."""
        return self._state.sim if self._state is not None else None

    @property
    def slot_jobs(self) -> np.ndarray:
        """Indices (in ``sim.jobs``) of the jobs in the slots, slot 0 first (empty once the episode has ended)."""
        return self._state.slots.copy() if self._state is not None else NO_JOBS.copy()

    def level_of(self, j: int) -> int:
        """The level job ``j`` (an index into ``sim.jobs``) was last admitted at (−1: never admitted)."""
        s = self._episode("env.level_of()")
        return int(s.level[check_job_index(j, s.level.size)])

    def workload_for_seed(self, seed: int) -> Workload:
        """The jobs ``reset(options={"workload_seed": seed})`` runs (any seed, for a fixed workload); no reset needed."""
        return source_jobs(self.source, check_workload_seed(seed), self.zoo)

    def action_masks(self) -> np.ndarray:
        """Valid actions (for sb3-contrib's MaskablePPO): filled slots' honourable levels, and stop.

        After the episode has ended: only stop (the final observation's ``action_mask``).
        """
        return self._episode("env.action_masks()").mask > 0

    def render(self):
        """The cluster as text (``ansi``) or an RGB image (``rgb_array``); None without a render mode.

        Before ``reset()`` it shows the empty cluster (``"(not reset)"`` as text) – called on the
        environment itself (``env.unwrapped``) or under ``gymnasium.wrappers.OrderEnforcing(env,
        disable_render_order_enforcing=True)``; through ``gym.make`` Gymnasium's order enforcing
        raises ``ResetNeeded`` first. After the episode has ended it shows the cluster at its end:
        the unfinished jobs still running (none once every job has finished).
        """
        s = self._state
        finished = s.meter.finished if s is not None else 0
        job = s.first_offered_job if s is not None else -1
        if self.render_mode == "ansi":
            return render_ansi(self.sim, self.zoo, finished, job)
        if self.render_mode == "rgb_array":
            if self._picture is None:
                self._picture = ClusterPicture(self.cluster)
            return render_rgb(self._picture, self.sim, self.zoo, finished, job)
        return None

    def close(self) -> None:
        if self._picture is not None:
            self._picture.close()
            self._picture = None
        super().close()

    def episode_summary(self) -> dict[str, float]:
        """JCT statistics of the episode so far (see :func:`synergy_gym.env.summary.episode_summary`)."""
        s = self._episode("env.episode_summary()")
        return {**episode_summary(s.sim), "decisions": s.decisions, "invalid_actions": s.invalid,
                "preemptions": s.preemptions}

    # -- observations ------------------------------------------------------------------------
    def _observation(self, s: EpisodeState) -> dict[str, np.ndarray]:
        time_fraction = s.sim.rounds_elapsed / self.cfg.max_rounds
        if s.ended:
            if not s.truncated:  # every job has finished: nothing to show
                return self.obs_builder.empty(s.mask.copy(), time_fraction)
            # Truncated: the state at the limit, as a decision there would show it, with only stop valid.
            v = self.loop.final_view(s)
            return self.obs_builder.build(s.sim, v.slots, v.waiting, v.fits, v.held, v.was_running, s.mask,
                                          time_fraction, v.n_slots_fit, v.running, s.level)
        held = np.flatnonzero(s.holds) if self.loop.every_event else s.held_buf[: s.n_held]
        if not self.cfg.on_changes:
            return self.obs_builder.build(s.sim, s.slots, s.waiting, s.fits, held, s.was_running, s.mask, time_fraction)
        return self.obs_builder.build(
            s.sim, s.slots, s.waiting, s.fits, held, s.was_running, s.mask, time_fraction, s.n_slots_fit,
            s.running_rows, s.level,
        )


def make_synergy_env(**kwargs: Any) -> SynergyEnv:
    """The registered ids' entry point: ``SynergyEnv(**kwargs)``.

    A function (with no ``metadata``) rather than the class, so that ``gym.make(...,
    render_mode="human")`` reaches the constructor, which refuses it naming the render modes
    there are, instead of Gymnasium wrapping the environment in a pygame window.

    ``gym.make(id, config={...})`` is refused where the dict and the keyword arguments (the id's
    registered ones among them) set a key differently: the keyword arguments would win, silently.
    """
    config = kwargs.get("config")
    if isinstance(config, Mapping):
        for key, value in config.items():
            if key in kwargs and not same_env_kwarg(key, value, kwargs[key]):
                raise EnvCallError(
                    f"gym.make(id, config=...): config sets {key}={shown(value)}, but the id (or a keyword argument) "
                    f"sets {key}={shown(kwargs[key])}, which would win; pass the settings as keyword arguments "
                    f"instead, gym.make(id, **config), which override the id's"
                )
    return SynergyEnv(**kwargs)
