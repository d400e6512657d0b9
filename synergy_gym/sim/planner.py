"""The round planner: Synergy-Tune's admit–sort–place sequence as a cursor, owned by the simulator.

One round under Tune (see :mod:`synergy_gym.sim.allocation`) is

1. **admission** – walk the runnable jobs in policy order and admit each job
   whose GPUs still fit in the free GPUs (smaller later jobs backfill);
2. **placement** – place the admitted jobs in descending GPU count (ties in
   admission order) with :meth:`Tune.place <synergy_gym.sim.allocation.Tune.place>`:
   the target where it fits, else the fallback, reclaiming excess from
   over-provisioned jobs.

The :class:`~synergy_gym.sim.simulator.Simulator` owns one :class:`RoundPlanner`
and plans every round through it (:meth:`RoundPlanner.plan`). The Gymnasium
environment drives the same planner one admission at a time: it begins a round
over the jobs that keep running (:meth:`RoundPlanner.begin`,
:meth:`RoundPlanner.admit_in_order`), admits the jobs its agent picks with
:meth:`RoundPlanner.add`, and ends the round with :meth:`RoundPlanner.finish`.
A mechanism that is not a :class:`~synergy_gym.sim.allocation.JobPlacer`
(``fair``, ``greedy``, OPT) allocates each round whole, with its own
``allocate``.

While the admitted jobs come in non-increasing GPU count – always with
single-GPU jobs – placing each as it is admitted is exactly Tune's placement, so
the planner places them at once (and the environment's observation sees the
cluster with the earlier jobs placed). A job with more GPUs than the one before
it breaks that order; the planner then places the whole round again in Tune's
order when the round ends.

**Placement reuse.** A persistent planner (``reuse=True``; the simulator's)
remembers the last round's admitted jobs and the ledger's undo mark before each.
When a round admits the same jobs in the same order as the last one, their
placement is the same, so the planner keeps that part of the ledger and rolls
back (exactly, from the undo log) only what follows. This changes no result –
the kept grants are the ones a fresh placement would compute – and makes the
common round (nothing arrived or finished that matters) cheap.

The planner is a plain object (no generator), so an environment holding one
mid-round pickles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from synergy_gym.sim import tune_kernels as tk
from synergy_gym.sim.allocation import AllocationMechanism, JobOrder, JobPlacer, Targets, Tune
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.ledger import ClusterLedger

#: Rows of an :class:`_Admitted` record.
JOBS, TAKEN, MARKS = tk.WALK_JOBS, tk.WALK_TAKEN, tk.WALK_MARKS


class _Admitted:
    """A round's admitted jobs in admission order: per position the job, the GPUs taken before it (and, at
    position ``n``, after the last) and the ledger's undo mark before its placement."""

    __slots__ = ("rows", "n")

    def __init__(self, capacity: int) -> None:
        self.rows = np.zeros((3, capacity + 1), dtype=np.int64)
        self.n = 0


@dataclass
class _Scan:
    """Progress through one round's ordered jobs."""

    order: np.ndarray
    free: int  # GPUs not yet taken by this round's admitted jobs
    in_sync: bool  # every job admitted so far sits where last round placed it
    reuse_prefix: bool
    admitted: _Admitted
    pos: int = 0
    #: Admitted jobs are in non-increasing GPU count, so placing them one by one
    #: in admission order is exactly what Tune does; otherwise they are re-placed.
    sorted_by_gpus: bool = True
    last_gpus: int = 0


class _NoPlacer:
    """The placer of a mechanism that has none: never called, as :meth:`RoundPlanner.begin` refuses such rounds."""

    def place(self, ledger: ClusterLedger, jobs: JobTable, j: int, target: tuple[float, float, float] | None = None) -> int:
        raise AssertionError("a round without a job placer admitted a job")

    def place_all(
        self, ledger: ClusterLedger, jobs: JobTable, admitted: Sequence[int], targets: Targets | None = None
    ) -> None:
        raise AssertionError("a round without a job placer placed jobs")


class RoundPlanner:
    """Plans the rounds of one ledger: with a :class:`~synergy_gym.sim.allocation.JobPlacer`, Tune's
    admission and placement as a cursor that re-uses last round's placement; otherwise the mechanism's
    whole-round ``allocate``."""

    def __init__(self, ledger: ClusterLedger, jobs: JobTable, mechanism: AllocationMechanism, reuse: bool = False) -> None:
        self.ledger = ledger
        self.jobs = jobs
        self.mechanism = mechanism
        self.placer: JobPlacer | None = mechanism.round_placer()
        self._placer: JobPlacer = self.placer if self.placer is not None else _NoPlacer()
        self.reuse = reuse and self.placer is not None
        #: Tune's placement of a round's walk runs compiled (:func:`~synergy_gym.sim.tune_kernels.tune_walk`),
        #: unless a subclass of Tune places jobs its own way.
        self._compiled = isinstance(self.placer, Tune) and type(self.placer).place is Tune.place
        self._total_gpus = ledger.cluster.total_gpus
        if self.reuse:
            ledger.undo = True
        # Two records: last round's (kept while this one is planned) and this round's.
        capacity = max(ledger.cluster.total_gpus, 1)
        self._records = (_Admitted(capacity), _Admitted(capacity))
        self._prev: _Admitted | None = None
        self._scan: _Scan | None = None

    # -- whole rounds -------------------------------------------------------
    def plan(self, order: JobOrder) -> None:
        """Allocate the round from an empty cluster: exactly the mechanism's ``allocate``."""
        if self.placer is None:
            self.ledger.reset()
            self.mechanism.allocate(self.ledger, self.jobs, order)
            return
        scan = self._start(order, reuse_prefix=True)
        self._admit_in_order(scan)
        self._finish(scan)

    # -- a round admitted job by job ----------------------------------------
    def begin(self, order: JobOrder, reuse_prefix: bool = True) -> None:
        """Start a round over the runnable jobs in policy ``order``.

        ``reuse_prefix=False`` stops the planner from admitting the unchanged
        start of last round's jobs in one go.
        """
        if self.placer is None:
            raise TypeError(
                f"allocation {self.mechanism.name!r} plans whole rounds; admitting jobs one by one needs a job placer (tune)"
            )
        self._start(order, reuse_prefix)

    @property
    def in_round(self) -> bool:
        return self._scan is not None

    @property
    def free_gpus(self) -> int:
        """GPUs not yet taken by the jobs admitted so far this round (or the ledger's, between rounds)."""
        return self._scan.free if self._scan is not None else self.ledger.free_gpus_total

    def admit_in_order(self) -> None:
        """Admit, in order, every job of the round's order whose GPUs still fit (backfilling)."""
        self._admit_in_order(self._current())

    def settle(self) -> None:
        """Make the ledger hold exactly the jobs admitted so far (drop what last round placed after them).

        While in step with last round the ledger keeps last round's later grants
        until they are found to differ; a caller that shows the ledger (the
        environment's observation) settles it first. Results do not change:
        anything dropped is placed again, identically, if it is admitted again.
        """
        scan = self._current()
        self._leave_sync(scan, scan.admitted.n)

    def add(self, j: int, target_changed: bool = True) -> None:
        """Admit ``j`` now, after the jobs admitted so far, at its current target.

        For callers that pick jobs themselves (the environment's agent) rather
        than walking the order: ``j``'s GPUs must fit :attr:`free_gpus`.
        ``target_changed=False`` promises that ``j`` asks for what it asked for
        last round, so an unchanged placement can be kept.
        """
        scan = self._current()
        if self.jobs.gpus_l[j] > scan.free:
            raise RuntimeError(f"job {j} needs {self.jobs.gpus_l[j]} GPUs but only {scan.free} are free")
        if target_changed:
            self._leave_sync(scan, scan.admitted.n)
        self._admit(scan, j)

    def finish(self) -> None:
        """End the round, leaving the ledger with exactly Tune's allocation of the admitted jobs."""
        self._finish(self._current())

    # -- internals ----------------------------------------------------------
    def _start(self, order: JobOrder, reuse_prefix: bool) -> _Scan:
        if self._prev is None:
            self.ledger.reset()
        record = self._records[1] if self._prev is self._records[0] else self._records[0]
        record.n = 0
        scan = self._scan = _Scan(
            np.asarray(order, dtype=np.int64),
            free=self._total_gpus, in_sync=self._prev is not None, reuse_prefix=reuse_prefix, admitted=record,
        )
        return scan

    def _admit_in_order(self, scan: _Scan) -> None:
        gpus = self.jobs.gpus_l
        if scan.in_sync and scan.reuse_prefix:
            self._keep_in_step(scan)
            if scan.in_sync and self._compiled and scan.pos < scan.order.size and scan.free:
                # The next job that fits is not last round's next one: its placement and all later ones
                # are made afresh, in the compiled walk.
                self._leave_sync(scan, scan.admitted.n)
        order = scan.order
        n = order.size
        # The walk stops once the GPUs are taken, usually long before the end of a long queue.
        while scan.pos < n and scan.free:
            if scan.in_sync or not self._compiled:
                # Job by job while last round's placement may still be kept (or for a placer of one's own).
                j = int(order[scan.pos])
                scan.pos += 1
                if gpus[j] <= scan.free:
                    self._admit(scan, j)
                continue
            self._walk(scan)

    def _walk(self, scan: _Scan) -> None:
        """Admit (and, while the admitted jobs come in Tune's order, place) jobs in one compiled call."""
        record = scan.admitted
        pos, free, last_gpus, record.n, stop = tk.tune_walk(
            self.ledger.state, self.jobs.placement_columns(), scan.order, scan.pos, scan.free, self._total_gpus,
            scan.last_gpus, scan.sorted_by_gpus, record.rows, record.n,
        )
        scan.pos, scan.free, scan.last_gpus = int(pos), int(free), int(last_gpus)
        if stop == tk.WALK_BIGGER:  # a job with more GPUs than the one before it: it breaks Tune's order
            j = int(scan.order[scan.pos])
            scan.pos += 1
            self._admit(scan, j)
        elif stop == tk.WALK_STUCK:  # pragma: no cover - impossible by construction
            j = record.rows[JOBS, record.n - 1]
            raise AssertionError(f"tune could not place job {self.jobs.job_id[j]} after reclaiming")

    def _finish(self, scan: _Scan) -> None:
        record = scan.admitted
        if scan.sorted_by_gpus:
            self._leave_sync(scan, record.n)  # last round may have placed more jobs
            record.rows[TAKEN, record.n] = self._total_gpus - scan.free
            self._prev = record if self.reuse else None
        else:
            self.ledger.reset()
            self._placer.place_all(self.ledger, self.jobs, record.rows[JOBS, : record.n].tolist())
            self._prev = None
        self._scan = None

    def _current(self) -> _Scan:
        if self._scan is None:
            raise RuntimeError("no round in progress: call begin() first")
        return self._scan

    def _admit(self, scan: _Scan, j: int) -> None:
        """Admit ``j`` and place it as Tune would, re-using last round's placement while in step."""
        g = self.jobs.gpus_l[j]
        record = scan.admitted
        rows = record.rows
        i = record.n
        rows[JOBS, i] = j
        rows[TAKEN, i] = self._total_gpus - scan.free
        record.n = i + 1
        scan.free -= g
        if i and g > scan.last_gpus and scan.sorted_by_gpus:
            scan.sorted_by_gpus = False
            self._leave_sync(scan, i)
        scan.last_gpus = g
        if not scan.sorted_by_gpus:
            return  # placed in Tune's order when the scan ends
        prev = self._prev
        if scan.in_sync and prev is not None:
            # A job whose target changed was admitted with target_changed, which ended the sync.
            if i < prev.n and prev.rows[JOBS, i] == j:
                rows[MARKS, i] = prev.rows[MARKS, i]  # placed exactly as last round: keep it
                return
            self._leave_sync(scan, i)
        ledger = self.ledger
        rows[MARKS, i] = ledger.mark()
        self._placer.place(ledger, self.jobs, j)

    def _keep_in_step(self, scan: _Scan) -> None:
        """Admit at once the jobs that continue last round's admitted jobs in the same order (passing over
        those whose GPUs do not fit): their admission and their placement are the same as last round's."""
        prev = self._prev
        if prev is None:
            return
        record = scan.admitted
        pos, free, i, last_gpus = tk.keep_in_step(
            scan.order, scan.pos, scan.free, self._total_gpus, self.jobs.gpus, prev.rows, prev.n, record.rows, record.n,
            scan.last_gpus,
        )
        scan.pos, scan.free, record.n, scan.last_gpus = int(pos), int(free), int(i), int(last_gpus)

    def _leave_sync(self, scan: _Scan, i: int) -> None:
        """Drop what last round placed from admitted position ``i`` on."""
        if scan.in_sync:
            prev = self._prev
            if prev is not None and i < prev.n:
                self.ledger.rollback(int(prev.rows[MARKS, i]))
            scan.in_sync = False
