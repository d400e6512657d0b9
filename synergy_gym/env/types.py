"""The environment's typed episode state (as Jumanji's ``types.py``): everything one episode changes.

:meth:`SynergyEnv.reset <synergy_gym.env.SynergyEnv.reset>` builds a fresh :class:`EpisodeState`
around a new :class:`~synergy_gym.sim.simulator.Simulator`; ``step`` changes only it. The
environment object itself holds what stays fixed across episodes (the configuration, the
spaces, the level table, the observation builder).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from synergy_gym.env.reward import SystemTimeMeter
from synergy_gym.sim.simulator import Simulator

#: An empty list of job indices.
NO_JOBS = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Decision:
    """What an action does at the current decision, after the fallback for a masked action
    (:meth:`SynergyEnv.decode <synergy_gym.env.SynergyEnv.decode>`)."""

    #: ``"admit"``, ``"preempt"`` (``redecide="changes"``) or ``"stop"``.
    kind: str
    #: An admission's slot and level (−1 otherwise); ``ahead``: placed before the running jobs.
    slot: int = -1
    level: int = -1
    ahead: bool = False
    #: A preemption's running row (−1 otherwise).
    row: int = -1
    #: The action was masked and fell back to this one.
    invalid: bool = False


@dataclass
class EpisodeState:
    """One episode of :class:`~synergy_gym.env.SynergyEnv`: the simulator and the decision loop's state."""

    sim: Simulator
    #: Per job and level (jobs × levels): CPUs and GB per GPU, throughput, and whether the level
    #: can ever be honoured for the job (:class:`~synergy_gym.env.levels.LevelTable`).
    level_cpu: np.ndarray
    level_mem: np.ndarray
    level_tput: np.ndarray
    level_valid: np.ndarray
    #: Per job and level (jobs × levels × 7): the target admitting the job at that level sets, as
    #: :meth:`JobTable.target_rows <synergy_gym.sim.job_table.JobTable.target_rows>` gives it.
    level_targets: np.ndarray
    #: Per job: the level it was last admitted at (−1: never; its target is then its demand).
    level: np.ndarray
    #: Per job: admitted in the current event (or running between events).
    holds: np.ndarray
    #: Per job: held GPUs until the current event (preemptive mode), as float32 for the observation.
    was_running: np.ndarray
    #: Whether any job has more than one GPU (re-placement in Tune's order then matters).
    multi_gpu: bool
    #: The reward's running sum of job time in the system.
    meter: SystemTimeMeter
    #: Valid actions now (float32, the observation's ``action_mask``).
    mask: np.ndarray
    #: Buffers of one entry per job, each filled to its count below (:mod:`synergy_gym.env.decision_kernels`):
    #: the waiting jobs in arrival order, whether each one's GPUs fit now, and (default mode) the
    #: running jobs in admission order.
    wait_buf: np.ndarray
    fits_buf: np.ndarray
    held_buf: np.ndarray
    #: The jobs in the slots, slot 0 first (``max_queue`` entries, filled to :attr:`n_slots`).
    slot_buf: np.ndarray
    n_waiting: int = 0
    n_held: int = 0
    n_slots: int = 0
    #: Slots whose job's GPUs fit now (all of them but with ``redecide="changes"``).
    n_slots_fit: int = 0
    #: ``redecide="changes"``: ``n_kept`` of the held jobs ran before this event (the others were
    #: admitted in it); the last ``n_preemptable`` of those in planning order (at most
    #: ``max_running``) are the running rows, shown and preemptable.
    n_kept: int = 0
    n_preemptable: int = 0
    #: ``redecide="changes"``: jobs admitted ahead in this event, at the front of the held jobs
    #: (held: the ``n_ahead`` admitted ahead, the ``n_kept`` that ran before, then those admitted after).
    n_ahead: int = 0
    #: Preemptions chosen so far this episode.
    preemptions: int = 0
    #: A job admitted since the slots were offered, still to be taken out of the waiting jobs
    #: (−1: none); the next offer does it.
    drop: int = -1
    #: The agent chose stop in the current event.
    stopped: bool = False
    ended: bool = False
    truncated: bool = False
    decisions: int = 0
    invalid: int = 0
    #: Jobs that finished since the last step (arrays, concatenated into its ``info``).
    pending_finished: list[np.ndarray] = field(default_factory=list)

    @property
    def waiting(self) -> np.ndarray:
        """Waiting jobs in arrival order (a view of :attr:`wait_buf`; valid until the next step)."""
        return self.wait_buf[: self.n_waiting]

    @property
    def fits(self) -> np.ndarray:
        """Whether each waiting job's GPUs fit now, as offered (a view of :attr:`fits_buf`)."""
        return self.fits_buf[: self.n_waiting]

    @property
    def slots(self) -> np.ndarray:
        """The jobs in the slots, slot 0 first (a view of :attr:`slot_buf`; valid until the next step)."""
        return self.slot_buf[: self.n_slots]

    @property
    def first_offered_job(self) -> int:
        """The job in the first slot whose job fits now (the one rendered as being decided); −1: none fits."""
        fitting = np.flatnonzero(self.fits_buf[: self.n_slots]) if self.n_slots_fit < self.n_slots else range(self.n_slots)
        return int(self.slot_buf[fitting[0]]) if len(fitting) else -1

    @property
    def slot_valid(self) -> np.ndarray:
        """The slots' rows of :attr:`level_valid` (slots × levels); none for a slot whose job does not fit now."""
        valid = self.level_valid[self.slots]
        if self.n_slots_fit < self.n_slots:
            valid &= self.fits_buf[: self.n_slots, None]
        return valid

    @property
    def running_rows(self) -> np.ndarray:
        """``redecide="changes"``: the running rows' jobs (the preemptable ones shown), in admission order (a view)."""
        end = self.n_ahead + self.n_kept
        return self.held_buf[end - self.n_preemptable : end]
