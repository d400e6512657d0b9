"""The round planner: Synergy-Tune's admit–sort–place sequence as a cursor that can stop for decisions.

One round under Tune (see :mod:`synergy_gym.sim.allocation`) is

1. **admission** – walk the runnable jobs in policy order and admit each job
   whose GPUs still fit in the free GPUs (smaller later jobs backfill);
2. **placement** – place the admitted jobs in descending GPU count (ties in
   admission order) with :meth:`Tune.place`: the target where it fits, else the
   fallback, reclaiming excess from over-provisioned jobs.

:class:`RoundPlanner` is the one implementation of that sequence. Everything
that schedules a round with Tune's mechanics goes through it, so they cannot
take different paths:

* ``Tune.allocate`` is a round with no decisions (:meth:`RoundPlanner.plan`);
* Synergy-OPT admits with :meth:`RoundPlanner.admission` and places its
  solver's targets with :meth:`RoundPlanner.place_all`;
* the Gymnasium environment begins a round over the jobs that keep running,
  then admits the jobs its agent picks one at a time with
  :meth:`RoundPlanner.add`, and ends it with :meth:`RoundPlanner.finish`;
* a decider that walks a fixed order and stops at some jobs uses
  :meth:`RoundPlanner.next_decision`, :meth:`RoundPlanner.accept` /
  :meth:`RoundPlanner.pass_over`.

While the admitted jobs come in non-increasing GPU count – always with
single-GPU jobs – placing each as it is admitted is exactly Tune's placement, so
the planner places them at once (and a decision sees the cluster with the
earlier jobs placed). A job with more GPUs than the one before it breaks that
order; the planner then places the whole round again in Tune's order when the
scan ends.

**Placement reuse.** A persistent planner (``reuse=True``; the simulator owns
one) remembers the last round's admitted jobs and the ledger's undo mark before
each. When a round admits the same jobs in the same order as the last one, their
placement is the same, so the planner keeps that part of the ledger and rolls
back (exactly, from the undo log) only what follows. This changes no result –
the kept grants are the ones a fresh placement would compute – and makes the
common round (nothing arrived or finished that matters) cheap.

The planner is a plain object (no generator), so an environment holding one
mid-round pickles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # allocation.py builds Tune.allocate on this module
    from synergy_gym.sim.allocation import ClusterLedger, Tune
    from synergy_gym.sim.job_table import JobTable

#: Per admitted job: (CPUs, GB per GPU, throughput) overriding its own target this round.
Targets = dict[int, tuple[float, float, float]]
#: ``needs_decision(job)``: whether the round must stop and ask about ``job``.
NeedsDecision = Callable[[int], bool]


@dataclass
class _Placed:
    """A round's admitted jobs in placement order, with the ledger mark before each."""

    jobs: list[int]
    marks: list[int]
    taken: list[int]  # GPUs taken before each position, and after the last


@dataclass
class _Scan:
    """Progress through one round's ordered jobs."""

    order: list[int]
    free: int  # GPUs not yet taken by this round's admitted jobs
    in_sync: bool  # every job admitted so far sits where last round placed it
    reuse_prefix: bool
    pos: int = 0
    admitted: list[int] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)  # ledger mark before each admitted job's placement
    taken: list[int] = field(default_factory=list)  # GPUs taken before each admitted job
    passed_over: bool = False  # a decision kept a job out of this round
    pending: int = -1  # the job next_decision returned, until accepted or passed over
    #: Admitted jobs are in non-increasing GPU count, so placing them one by one
    #: in admission order is exactly what Tune does; otherwise they are re-placed.
    sorted_by_gpus: bool = True
    last_gpus: int = 0


def admit_by_gpus(order: Sequence[int], gpus: Sequence[int], free: int) -> list[int]:
    """Jobs of ``order`` whose GPUs fit in what is still free, in order (backfilling)."""
    admitted: list[int] = []
    for j in order:
        if free == 0:
            break
        g = gpus[j]
        if g <= free:
            admitted.append(j)
            free -= g
    return admitted


class RoundPlanner:
    """Admits and places one round's jobs with Tune's mechanics, stopping where a decision is needed."""

    def __init__(self, ledger: ClusterLedger, jobs: JobTable, mechanism: Tune, reuse: bool = False) -> None:
        self.ledger = ledger
        self.jobs = jobs
        self.mechanism = mechanism
        self.reuse = reuse
        self._total_gpus = ledger.cluster.total_gpus
        if reuse:
            ledger.undo = True
        self._prev: _Placed | None = None
        self._scan: _Scan | None = None

    # -- whole rounds -------------------------------------------------------
    def plan(self, order: Sequence[int]) -> None:
        """Allocate the round with no decisions: exactly ``Tune.allocate`` from an empty cluster."""
        self.begin(order)
        self.next_decision(None)
        self.finish()

    def admission(self, order: Sequence[int]) -> list[int]:
        """The jobs of ``order`` whose GPUs fit in the ledger's free GPUs, in order (backfilling)."""
        return admit_by_gpus(order, self.jobs.gpus_l, self.ledger.free_gpus_total)

    def place_all(self, admitted: Sequence[int], targets: Targets | None = None) -> None:
        """Place ``admitted`` jobs in descending GPU count (stable), each at its target or ``targets[j]``."""
        gpus = self.jobs.gpus_l
        ledger, jobs, place = self.ledger, self.jobs, self.mechanism.place
        ranked = list(admitted)
        if any(gpus[j] > 1 for j in ranked):
            ranked.sort(key=lambda j: -gpus[j])  # stable: policy order among equals
        for j in ranked:
            place(ledger, jobs, j, None if targets is None else targets[j])

    # -- a round with decisions ---------------------------------------------
    def begin(self, order: Sequence[int], reuse_prefix: bool = True) -> None:
        """Start a round over the runnable jobs in policy ``order``.

        ``reuse_prefix=False`` stops the planner from admitting the unchanged
        start of last round's jobs in one go (do so when any of them may need a
        decision again).
        """
        if self._prev is None:
            self.ledger.reset()
        self._scan = _Scan(
            list(order), free=self._total_gpus, in_sync=self._prev is not None, reuse_prefix=reuse_prefix
        )

    @property
    def in_round(self) -> bool:
        return self._scan is not None

    @property
    def free_gpus(self) -> int:
        """GPUs not yet taken by the jobs admitted so far this round (or the ledger's, between rounds)."""
        return self._scan.free if self._scan is not None else self.ledger.free_gpus_total

    @property
    def passed_over(self) -> bool:
        """Whether a decision kept a job out of this round."""
        return self._scan is not None and self._scan.passed_over

    def waiting_after(self, job_count: int) -> list[int]:
        """Up to ``job_count`` jobs after the one being decided, in policy order."""
        scan = self._scan
        return scan.order[scan.pos + 1 : scan.pos + 1 + job_count]

    def next_decision(self, needs_decision: NeedsDecision | None) -> int:
        """Admit jobs in order until one whose GPUs fit needs a decision; return it, or -1 when the scan is done.

        While a decision is pending the ledger shows exactly the jobs admitted
        before it (placed, as long as they came in non-increasing GPU count).
        """
        scan = self._scan
        gpus = self.jobs.gpus_l
        if scan.in_sync and scan.reuse_prefix:
            self._keep_unchanged_prefix(scan)
        order = scan.order
        while scan.pos < len(order) and scan.free:
            j = order[scan.pos]
            if gpus[j] <= scan.free:
                if needs_decision is not None and needs_decision(j):
                    self._leave_sync(scan, len(scan.admitted))  # the ledger shows only the jobs before it
                    scan.pending = j
                    return j
                self._admit(j)
            scan.pos += 1
        return -1

    def accept(self, j: int) -> None:
        """Admit ``j``, the job :meth:`next_decision` returned, at its (possibly new) target."""
        self._decided(j)
        self._admit(j)
        self._scan.pos += 1

    def settle(self) -> None:
        """Make the ledger hold exactly the jobs admitted so far (drop what last round placed after them).

        While in step with last round the ledger keeps last round's later grants
        until they are found to differ; a decider that shows the ledger (the
        environment's observation) settles it first. Results do not change:
        anything dropped is placed again, identically, if it is admitted again.
        """
        self._leave_sync(self._scan, len(self._scan.admitted))

    def add(self, j: int, target_changed: bool = True) -> None:
        """Admit ``j`` now, after the jobs admitted so far, at its current target.

        For deciders that pick jobs themselves (the environment's agent) rather
        than walking ``order``: ``j``'s GPUs must fit :attr:`free_gpus`.
        ``target_changed=False`` promises that ``j`` asks for what it asked for
        last round, so an unchanged placement can be kept.
        """
        scan = self._scan
        if scan.pending >= 0:
            raise RuntimeError(f"job {scan.pending} is awaiting a decision; accept or pass it over first")
        if self.jobs.gpus_l[j] > scan.free:
            raise RuntimeError(f"job {j} needs {self.jobs.gpus_l[j]} GPUs but only {scan.free} are free")
        if target_changed:
            self._leave_sync(scan, len(scan.admitted))
        self._admit(j)

    def pass_over(self, j: int) -> None:
        """Keep ``j``, the job :meth:`next_decision` returned, out of this round."""
        self._decided(j)
        self._scan.passed_over = True
        self._scan.pos += 1

    def _decided(self, j: int) -> None:
        scan = self._scan
        if scan is None or scan.pending < 0 or scan.pending != j:
            pending = "none" if scan is None or scan.pending < 0 else scan.pending
            raise RuntimeError(f"job {j} is not awaiting a decision (pending: {pending})")
        scan.pending = -1

    def finish(self) -> None:
        """End the scan, leaving the ledger with exactly Tune's allocation of the admitted jobs."""
        scan = self._scan
        if scan.sorted_by_gpus:
            self._leave_sync(scan, len(scan.admitted))  # last round may have placed more jobs
            scan.taken.append(self._total_gpus - scan.free)
            self._prev = _Placed(scan.admitted, scan.marks, scan.taken) if self.reuse else None
        else:
            self.ledger.reset()
            self.place_all(scan.admitted)
            self._prev = None
        self._scan = None

    # -- internals ----------------------------------------------------------
    def _admit(self, j: int) -> None:
        """Admit ``j`` and place it as Tune would, re-using last round's placement while in step."""
        scan = self._scan
        g = self.jobs.gpus_l[j]
        i = len(scan.admitted)
        scan.admitted.append(j)
        scan.taken.append(self._total_gpus - scan.free)
        scan.free -= g
        if i and g > scan.last_gpus and scan.sorted_by_gpus:
            scan.sorted_by_gpus = False
            self._leave_sync(scan, i)
        scan.last_gpus = g
        if not scan.sorted_by_gpus:
            return  # placed in Tune's order when the scan ends
        prev = self._prev
        if scan.in_sync:
            # A job whose target changed was asked about first, which ended the sync.
            if i < len(prev.jobs) and prev.jobs[i] == j:
                scan.marks.append(prev.marks[i])  # placed exactly as last round: keep it
                return
            self._leave_sync(scan, i)
        ledger = self.ledger
        scan.marks.append(ledger.mark())
        self.mechanism.place(ledger, self.jobs, j)

    def _keep_unchanged_prefix(self, scan: _Scan) -> None:
        """Admit at once the run of jobs that continue last round's admitted jobs in the same order.

        Admission by GPUs is the same as last round for them, and so is their placement.
        """
        prev = self._prev
        i = len(scan.admitted)
        rest = prev.jobs[i:]
        if not rest:
            return
        pos = scan.pos
        n = 0  # length of the common prefix
        for a, b in zip(scan.order[pos : pos + len(rest)], rest):
            if a != b:
                break
            n += 1
        if n == 0:
            return
        scan.admitted.extend(rest[:n])
        scan.marks.extend(prev.marks[i : i + n])
        scan.taken.extend(prev.taken[i : i + n])
        scan.free -= prev.taken[i + n] - prev.taken[i]
        scan.last_gpus = self.jobs.gpus_l[rest[n - 1]]
        scan.pos += n

    def _leave_sync(self, scan: _Scan, i: int) -> None:
        """Drop what last round placed from admitted position ``i`` on."""
        if scan.in_sync:
            if i < len(self._prev.marks):
                self.ledger.rollback(self._prev.marks[i])
            scan.in_sync = False
