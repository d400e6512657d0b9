"""The environment's decision loop: events, what the agent is offered at each, and what its actions do.

An *event* is a round boundary at which something can change (a job arrived or finished). It
begins with the running jobs re-placed (:meth:`DecisionLoop.begin_event`), offers the agent the
waiting jobs (:meth:`DecisionLoop.offer`) until it stops or nothing is left to decide, and ends
by running the cluster until the next event (:meth:`DecisionLoop.end_event`).

* Default mode: the running jobs keep their GPUs and levels; the agent is asked while a waiting
  job's GPUs fit.
* ``preemptive=True, redecide="every_event"``: every job returns to the waiting set at each
  event and the agent refills the cluster.
* ``preemptive=True, redecide="changes"``: the running jobs keep their GPUs and levels unless
  the agent preempts them (:meth:`DecisionLoop.preempt`); the agent is asked while a waiting job
  fits, or while jobs wait and a running job could make room for them. A job preempted in an
  event waits again and may be admitted again in it (at another level: a resize); a job admitted
  in an event is not preemptable until the next one, so every event has a bounded number of decisions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import synergy_gym.env.decision_kernels as dk
from synergy_gym.env.config import EnvConfig
from synergy_gym.env.masks import ActionLayout
from synergy_gym.env.types import NO_JOBS, EpisodeState
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.simulator import Simulator


class DecisionLoop:
    """The events of one environment's episodes (the configuration, action layout and cluster fixed)."""

    def __init__(self, cfg: EnvConfig, layout: ActionLayout, cluster: ClusterSpec) -> None:
        self.cfg = cfg
        self.layout = layout
        self.cluster = cluster
        #: Preemptive, deciding only where something changes.
        self.on_changes = cfg.on_changes
        #: Every job returns to the waiting set at each event.
        self.every_event = cfg.preemptive and not cfg.on_changes

    def admit(self, s: EpisodeState, j: int, level: int, ahead: bool = False) -> None:
        """Admit job ``j`` at ``level`` through the round planner (``ahead``: placed before the running jobs)."""
        changed = int(s.level[j]) != level
        if changed:
            s.level[j] = level
            s.sim.jobs.assign_target(j, *s.level_targets[j, level].tolist())
        s.holds[j] = True
        s.drop = j  # taken out of the waiting jobs by the next offer (or the next event's waiting jobs)
        if self.every_event:
            s.sim.planner.add(j, target_changed=changed)
            return
        held = s.held_buf
        if not ahead:
            s.sim.planner.add(j, target_changed=changed)
            held[s.n_held] = j
            s.n_held += 1
            return
        # Ahead: after the jobs admitted ahead so far in this event, before the running ones.
        i = s.n_ahead
        held[i + 1 : s.n_held + 1] = held[i : s.n_held].copy()
        held[i] = j
        s.n_held += 1
        s.n_ahead += 1
        self._replan(s)

    def preempt(self, s: EpisodeState, r: int) -> None:
        """Preempt the job of running row ``r`` (``redecide="changes"``): it waits again, the event is re-planned."""
        held = s.held_buf
        i = s.n_ahead + s.n_kept - s.n_preemptable + r
        j = int(held[i])
        held[i : s.n_held - 1] = held[i + 1 : s.n_held]
        s.n_held -= 1
        s.n_kept -= 1
        s.holds[j] = False
        s.preemptions += 1
        self._replan(s)
        s.n_waiting = dk.waiting_jobs(s.sim.runnable, s.holds, s.wait_buf)
        s.drop = -1

    def _replan(self, s: EpisodeState) -> None:
        """Place the event's held jobs again, in their order (the planner keeps the unchanged start)."""
        planner = s.sim.planner
        planner.finish()
        planner.begin(self._keep(s))
        planner.admit_in_order()
        planner.settle()

    def advance(self, s: EpisodeState) -> None:
        """Run events until the agent has a choice (a waiting job fits and it has not stopped), or the episode ends."""
        sim, cfg = s.sim, self.cfg
        planner = sim.planner
        while True:
            if planner.in_round:
                if not s.stopped and s.n_waiting and self.offer(s, planner.free_gpus):
                    return
                self.end_event(s)
            if sim.done or sim.exhausted:
                return self.end_episode(s, truncated=False)
            if sim.rounds_elapsed >= cfg.max_rounds:
                sim.admit_arrivals()  # the last round's arrivals are in the system at the limit (and in its reward)
                return self.end_episode(s, truncated=True)
            # An idle cluster's clock jumps to the next arrival, but no further than the limit (the episode then
            # ends truncated, that arrival not yet in the system).
            if sim.begin_round(cfg.max_rounds) is not None:
                self.begin_event(s)

    def offer(self, s: EpisodeState, free: int) -> bool:
        """Fill the slots, their valid levels and the mask from the waiting jobs; whether the agent has a choice.

        Default and ``every_event``: the waiting jobs whose GPUs fit in ``free`` (none: no choice).
        ``changes``: every waiting job, those that fit with their levels, and the running rows'
        preemptions (a choice when a job fits, or when a running job could be preempted).
        """
        if self.on_changes:
            n_preemptable = min(s.n_kept, self.cfg.max_running)
            s.n_waiting, k, s.n_slots_fit, offered = dk.offer_all(
                s.wait_buf, s.n_waiting, s.drop, s.sim.jobs.gpus, free, s.level_valid, self.cfg.max_queue,
                self.layout.slots_offered, s.n_kept > 0, n_preemptable, s.fits_buf, s.slot_buf, s.mask,
            )
            s.drop = -1
            s.n_slots = k
            s.n_preemptable = n_preemptable
            return offered > 0 or (n_preemptable > 0 and s.n_waiting > 0)
        s.n_waiting, k = dk.offer(
            s.wait_buf, s.n_waiting, s.drop, s.sim.jobs.gpus, free, s.level_valid, self.cfg.max_queue,
            self.layout.slots_offered, s.fits_buf, s.slot_buf, s.mask,
        )
        s.drop = -1
        s.n_slots = s.n_slots_fit = k
        return k > 0

    def _keep(self, s: EpisodeState) -> np.ndarray:
        """The jobs the event keeps, in Tune's placement order: descending GPUs, ties in admission order."""
        keep = s.held_buf[: s.n_held].copy()  # finished jobs were removed as they finished
        if s.multi_gpu:
            keep = keep[np.argsort(-s.sim.jobs.gpus[keep], kind="stable")]
        return keep

    def begin_event(self, s: EpisodeState) -> None:
        sim = s.sim
        runnable = sim.runnable
        holds = s.holds
        keep: np.ndarray
        if self.cfg.preemptive:
            s.was_running[runnable] = holds[runnable]
        if self.every_event:
            holds[runnable] = False
            keep = NO_JOBS
        else:
            # The planner places them now and the observation shows them (the grants are the same).
            keep = self._keep(s)
            s.n_kept = s.n_held
            s.n_ahead = 0
        sim.planner.begin(keep)
        sim.planner.admit_in_order()  # the running jobs keep their GPUs and levels
        sim.planner.settle()  # the ledger now holds exactly them, for the observation
        s.n_waiting = dk.waiting_jobs(runnable, holds, s.wait_buf)
        s.drop = -1
        s.stopped = False

    def end_event(self, s: EpisodeState) -> None:
        sim, cfg = s.sim, self.cfg
        # A stop is chosen only when a job was offered: some waiting job's GPUs fit.
        stopped_with_choice = s.stopped and s.n_slots_fit > 0
        sim.planner.finish()
        s.n_slots = s.n_slots_fit = s.n_kept = s.n_preemptable = s.n_ahead = 0
        limit = max(1, cfg.max_rounds - sim.rounds_elapsed)
        idle = sim.ledger.n_slots == 0
        if not idle and (cfg.preemptive or stopped_with_choice):
            # The next event is the next arrival (or completion), even one the free GPUs could not take.
            wait = sim.seconds_until_admissible_arrival(self.cluster.total_gpus)
            if wait < float("inf"):
                limit = min(limit, max(1, int(round(wait / sim.config.round_s))))
        finished = sim.advance(max_rounds=1 if idle else limit, allow_idle=idle and s.stopped)
        if finished.size:
            s.holds[finished] = False
            if not self.every_event:
                s.n_held = dk.keep_held(s.held_buf, s.n_held, s.holds)
            s.pending_finished.append(finished)
            s.meter.record_finished(finished)

    def end_episode(self, s: EpisodeState, truncated: bool) -> None:
        """End the episode: nothing left to choose but stop, and the ledger holds only the unfinished jobs' grants.

        Jobs that finished in the last stretch leave the ledger at the next event, which never comes:
        their grants are dropped here, so that the final observation and :meth:`render` show what still runs.
        """
        s.ended, s.truncated = True, truncated
        s.n_slots = s.n_slots_fit = s.n_waiting = s.n_kept = s.n_preemptable = s.n_ahead = 0
        s.drop = -1
        s.mask[:] = 0
        s.mask[self.layout.stop] = 1
        drop_finished_grants(s.sim)

    def final_view(self, s: EpisodeState) -> FinalView:
        """What a decision at the episode's last instant would show (a truncated episode's final observation).

        The waiting jobs fill the slots as :meth:`offer` would fill them (into fresh arrays: the
        state keeps no slots once the episode has ended), the running jobs are those still holding
        GPUs (the running rows: the last ``max_running``, as at the next event) and ``was_running``
        is whether each job held GPUs in the last round; the action mask is left as it is (only stop).
        """
        sim, cfg = s.sim, self.cfg
        runnable, holds = sim.runnable, s.holds
        was_running = s.was_running
        if cfg.preemptive:  # as the next event would set it
            was_running = was_running.copy()
            was_running[runnable] = holds[runnable]
        waiting, fits = np.zeros(runnable.size, dtype=np.int64), np.zeros(runnable.size, dtype=bool)
        n = dk.waiting_jobs(runnable, holds, waiting)
        slots, scratch = np.zeros(cfg.max_queue, dtype=np.int64), np.zeros_like(s.mask)  # the offer's mask is not kept
        args = (waiting, n, -1, sim.jobs.gpus, sim.planner.free_gpus, s.level_valid, cfg.max_queue,
                self.layout.slots_offered)
        held = np.flatnonzero(holds) if self.every_event else s.held_buf[: s.n_held].copy()
        if self.on_changes:
            n, k, k_fit, _ = dk.offer_all(*args, False, 0, fits, slots, scratch)
            running = held[held.size - min(held.size, cfg.max_running) :]
        else:
            n, k = dk.offer(*args, fits, slots, scratch)
            k_fit, running = k, None
        return FinalView(slots[:k], waiting[:n], fits[:n], held, was_running, k_fit, running)


class FinalView(NamedTuple):
    """:meth:`DecisionLoop.final_view`: the arguments of
    :meth:`ObservationBuilder.build <synergy_gym.env.observation.ObservationBuilder.build>` that describe the jobs."""

    slots: np.ndarray
    waiting: np.ndarray
    fits: np.ndarray
    held: np.ndarray
    was_running: np.ndarray
    n_slots_fit: int
    running: np.ndarray | None


def drop_finished_grants(sim: Simulator) -> None:
    """Leave ``sim``'s ledger with only the grants of unfinished jobs, each as it was (servers, CPUs, GB, throughput).

    Once per episode, at its end; the simulator is not advanced afterwards.
    """
    ledger = sim.ledger
    finished = ~np.isnan(sim.jobs.finish_s[ledger.jobs])
    if not finished.any():
        return
    grants = [
        (int(j), parts, cpu, mem, tput, fallback)
        for j, parts, cpu, mem, tput, fallback, done in zip(
            ledger.jobs.tolist(), ledger.parts, ledger.cpu.tolist(), ledger.mem.tolist(), ledger.tput.tolist(),
            ledger.fallback, finished.tolist(),
        )
        if not done
    ]
    ledger.reset()
    for j, parts, cpu, mem, tput, fallback in grants:
        ledger.grant(j, parts, cpu, mem, tput, fallback)
