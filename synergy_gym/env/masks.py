"""The action space: a waiting job's slot and an allocation level, or *stop*; valid actions; the fallback for the rest.

Action ``slot · n_levels + level`` admits the job in ``slot`` at ``level``; the
last action, ``n_slots · n_levels``, is *stop*. The space is a plain
``Discrete``: every action in it is accepted (trainers without masking sample
outside the mask). With ``invalid_action="fallback"`` a masked action is
replaced by a valid one (:meth:`ActionLayout.resolve`):

* an empty slot → the nearest filled slot (the last one), and a slot other
  than the offered one with ``agent_orders=False`` (the earliest arrival that fits) → that slot,
  at the chosen level;
* a level that can never be honoured for the slot's job → the nearest valid
  level of that slot (default levels: the nearest index, the lower first; grid
  levels: the nearest grid point in CPU and memory steps, the lower index first).

So in the default mode and with ``redecide="every_event"`` a masked action always admits a
job (an agent without masking starts out admitting jobs, not idling the cluster); only the stop
action stops.

With ``preemptive=True, redecide="changes"`` every waiting job has a slot (the first
``n_slots`` by arrival), those whose GPUs do not fit now masked, and two blocks follow the
admissions: the *ahead* admissions (action ``n_slots · n_levels + slot · n_levels + level``: the
same job and level, placed before the running jobs instead of after them) and the running rows
(``max_running``): action ``2 · n_slots · n_levels + r`` preempts running row ``r``'s job; stop
comes after those. A masked admission of an empty slot or of one whose job does not fit now
falls back to the offered slot whose job fits nearest to it (for an empty slot: nearest to the
last filled slot; the earlier of two as near), at the nearest valid level of that slot. A masked
ahead admission falls back as a masked admission does (and is placed ahead; with nothing
running, after). A masked preemption falls back to the last filled running row, or (with no
running row) to a masked admission as above. Where no waiting job fits now – the agent is asked
only to preempt or stop – a masked admission (ahead or not) falls back to *stop*.

With ``invalid_action="raise"`` a masked action raises
:class:`~synergy_gym.env.calls.EnvCallError` (a ``ValueError``), as does an action that is not
an integer of the space.
"""

from __future__ import annotations

import numpy as np

from synergy_gym.env.calls import EnvCallError, shown
from synergy_gym.errors import UnknownNameError

INVALID_ACTION_MODES: tuple[str, ...] = ("fallback", "raise")


class ActionLayout:
    """Encodes (slot, level) and stop as one integer and resolves masked actions.

    The mask itself is made by ``decision_kernels.offer``.
    """

    def __init__(
        self, n_slots: int, n_levels: int, agent_orders: bool, invalid_action: str, grid_shape: tuple[int, int] | None,
        n_running: int = 0,
    ) -> None:
        if invalid_action not in INVALID_ACTION_MODES:
            raise UnknownNameError("invalid_action", invalid_action, INVALID_ACTION_MODES)
        self.n_slots, self.n_levels = n_slots, n_levels
        self.agent_orders = agent_orders
        self.raise_on_invalid = invalid_action == "raise"
        #: With running rows (``n_running`` > 0): the first *ahead* admission (slot 0, level 0), placed
        #: before the running jobs; ``n_slots · n_levels`` of them. Without: no ahead admissions.
        self.ahead = n_slots * n_levels
        #: The first preemption action (running row 0); there are ``n_running`` of them.
        self.preempt = self.ahead + (n_slots * n_levels if n_running else 0)
        self.n_running = n_running
        self.stop = self.preempt + n_running
        self.n = self.stop + 1
        self.slots_offered = n_slots if agent_orders else 1
        #: For each level, every level nearest first (itself first).
        self.nearest = np.stack([self._by_distance(level, grid_shape) for level in range(n_levels)])

    def _by_distance(self, level: int, grid_shape: tuple[int, int] | None) -> np.ndarray:
        others = np.arange(self.n_levels)
        if grid_shape is None:
            return np.array(sorted(others, key=lambda k: (abs(k - level), k)))
        n_mem = grid_shape[1]
        ci, mi = divmod(level, n_mem)
        return np.array(sorted(others, key=lambda k: (abs(k // n_mem - ci) + abs(k % n_mem - mi), k)))

    def kind(self, a: int) -> str:
        """What action ``a`` does: ``"admit"``, ``"admit ahead"`` (before the running jobs), ``"preempt"`` or ``"stop"``."""
        return "stop" if a >= self.stop else "preempt" if a >= self.preempt else "admit ahead" if a >= self.ahead else "admit"

    def parse(self, action, call: str = "env.step()") -> int:
        """``action`` as an int in ``[0, n)``, or :class:`~synergy_gym.env.calls.EnvCallError` naming ``call``."""
        if type(action) is int and 0 <= action < self.n:  # the common case, first
            return action
        if isinstance(action, (int, np.integer)) and not isinstance(action, (bool, np.bool_)):
            a = int(action)
        else:
            try:
                arr = np.asarray(action)
                single = arr.size == 1 and arr.dtype.kind in "iuf" and float(arr.reshape(())).is_integer()
            except (TypeError, ValueError, OverflowError):  # ragged sequences, objects NumPy cannot hold
                single = False
            if not single:
                raise EnvCallError(
                    f"{call}: action {shown(action)} is not a single integer (the action space is 0..{self.n - 1})"
                )
            a = int(arr.reshape(()))
        if not 0 <= a < self.n:
            raise EnvCallError(f"{call}: action {shown(a)} is out of range: the action space is 0..{self.n - 1}")
        return a

    def resolve_preemption(self, a: int, n_preemptable: int, call: str = "env.step()") -> int:
        """The running row preemption action ``a`` preempts, after the fallback (−1: none is running).

        ``n_preemptable``: the running rows filled (all of them preemptable); ``call``: the call a
        masked action's error names.
        """
        r = a - self.preempt
        if r < n_preemptable:
            return r
        if self.raise_on_invalid:
            raise EnvCallError(f"{call}: action {a} is masked: running row {r} is empty "
                               f"({n_preemptable} running jobs can be preempted now); action {self.stop} stops")
        return n_preemptable - 1

    def resolve(self, a: int, valid_levels: np.ndarray, call: str = "env.step()") -> tuple[int, int, bool]:
        """``(slot, level, invalid)`` for action ``a`` (slot −1: stop); ``invalid`` when it fell back.

        ``valid_levels`` (slots, levels) are the filled slots' valid levels; ``call``: the call a masked
        action's error names. An ahead admission resolves as its admission does. A preemption action
        reaching here (no running row) is resolved as a masked admission of the last slot at the fair
        share. A filled slot whose job does not fit now (``redecide="changes"``: no valid level) falls
        back to the nearest slot whose job fits (the earlier of two as near), or to stop when none does.
        """
        if a == self.stop:
            return -1, -1, False
        masked = a >= self.preempt  # a preemption with no running row: always masked
        if masked:
            if self.raise_on_invalid:
                raise EnvCallError(f"{call}: action {a} is masked: no running job can be preempted now; "
                                   f"action {self.stop} stops")
            index = (self.n_slots - 1) * self.n_levels  # the last slot's fair share: falls back as a masked admission
        else:
            index = a - self.ahead if a >= self.ahead else a  # an ahead admission: its admission's slot and level
        slot, level = divmod(index, self.n_levels)
        filled = valid_levels.shape[0]
        usable = np.flatnonzero(valid_levels.any(axis=1))  # the filled slots whose job fits now
        if not self.agent_orders:
            usable = usable[:1]  # only the earliest arrival that fits is offered
        if slot in usable and valid_levels[slot, level]:
            return slot, level, masked
        if self.raise_on_invalid:
            raise EnvCallError(self._describe_invalid(call, a, slot, level, filled, valid_levels, usable))
        if usable.size == 0:  # redecide="changes", asked only to preempt or stop: no waiting job fits now
            return -1, -1, True
        if slot not in usable:  # an empty slot, one whose job does not fit now, or one not offered: the nearest offered
            near = min(slot, filled - 1)
            slot = int(usable[np.argmin(np.abs(usable - near) * 2 + (usable > near))])  # the earlier of two as near
        row = valid_levels[slot]
        for k in self.nearest[level]:
            if row[k]:
                return slot, int(k), True
        return -1, -1, True  # pragma: no cover - the fair-share level is always valid

    def _describe_invalid(
        self, call: str, a: int, slot: int, level: int, filled: int, valid_levels: np.ndarray, usable: np.ndarray
    ) -> str:
        if slot >= filled:
            why = f"slot {slot} is empty ({filled} slots are filled)"
        elif not valid_levels[slot].any():
            why = f"slot {slot}'s job does not fit the free GPUs now"
        elif slot not in usable:
            why = f"agent_orders=False offers only slot {usable[0]} (the earliest arrival that fits), not slot {slot}"
        else:
            valid = np.flatnonzero(valid_levels[slot]).tolist()
            why = f"level {level} can never be honoured for slot {slot}'s job (valid levels: {valid})"
        action = f"action {a} (an ahead admission: slot {slot}, level {level})" if a >= self.ahead else f"action {a}"
        return f"{call}: {action} is masked: {why}; action {self.stop} stops"
