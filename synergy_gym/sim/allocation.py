"""Allocation mechanisms: how a round's jobs get GPUs, CPUs and memory.

Each round starts from an empty cluster (leases last one round; preemption is
free) and a mechanism walks the jobs in policy order, granting resources in a
:class:`~synergy_gym.sim.ledger.ClusterLedger`:

``fair``   GPU-proportional: every placed job gets the fair share per GPU.
``greedy`` Synergy-Greedy: each job gets its target (best-case demand) where
           it fits; a job whose target does not fit is skipped this round and
           later jobs may take the GPUs.
``tune``   Synergy-Tune: jobs are admitted by GPU count in policy order
           (:func:`admit_by_gpus`), then placed in descending GPU count, ties in
           policy order (:meth:`Tune.place_all`). Each gets its target if it fits,
           else its fallback (the target capped at the fair share); if even that
           does not fit, servers with free GPUs are chosen (a multi-GPU job
           takes the first server with enough free GPUs, otherwise servers with
           the fewest free GPUs first) and jobs there that hold more than their
           fallback are switched back to it – single-server jobs first, then
           those with the most CPUs per GPU, then the most memory per GPU –
           until the job's share fits. No job runs slower than at its fallback.

Tune places admitted jobs one at a time (:meth:`Tune.place`), so it is a
:class:`JobPlacer`: the simulator's :class:`~synergy_gym.sim.planner.RoundPlanner`
drives it to keep the unchanged start of the last round's placement, and the
Gymnasium environment to admit the jobs its agent picks.

Mechanisms are pure functions of the ordered job list and the jobs' attributes;
the simulator relies on this to skip rounds in which nothing can change.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.ledger import EPS, ClusterLedger, Parts

#: Job indices in policy order: what the simulator's orderings give (an array) or any sequence.
JobOrder = Sequence[int] | np.ndarray
#: Per admitted job: (CPUs, GB per GPU, throughput) overriding its own target this round.
Targets = dict[int, tuple[float, float, float]]


class JobPlacer(Protocol):
    """Places the admitted jobs of a round one at a time (Synergy-Tune's placement)."""

    def place(
        self, ledger: ClusterLedger, jobs: JobTable, j: int, target: tuple[float, float, float] | None = None
    ) -> int:
        """Place admitted job ``j`` (its GPUs are free in ``ledger``); returns its ledger slot."""
        ...

    def place_all(
        self, ledger: ClusterLedger, jobs: JobTable, admitted: Sequence[int], targets: Targets | None = None
    ) -> None:
        """Place ``admitted`` jobs in descending GPU count (stable), each at its target or ``targets[j]``."""
        ...


class AllocationMechanism(Protocol):
    """Gives a round's jobs their resources, walking them in policy order."""

    name: str
    #: True if jobs may run faster than at their fair share (SRTF then estimates
    #: remaining time at the target's throughput).
    uses_targets: bool

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: JobOrder) -> None:
        """Grant resources in ``ledger`` to jobs of ``order`` (policy order)."""
        ...

    def round_placer(self) -> JobPlacer | None:
        """The placer of a round that admits jobs by GPU count in policy order and places them one at a
        time in descending GPU count (Tune), or None when :meth:`allocate` plans each round as a whole."""
        ...


class FairShare:
    """GPU-proportional allocation."""

    name = "fair"
    uses_targets = False

    def round_placer(self) -> None:
        return None

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: JobOrder) -> None:
        fc, fm = jobs.fair_cpu, jobs.fair_mem
        gpus, tput_fair = jobs.gpus_l, jobs.tput_fair_l
        for j in order:
            if ledger.free_gpus_total == 0:
                break
            g = gpus[j]
            parts = ledger.find(g, fc, fm)
            if parts is not None:
                ledger.grant(j, parts, fc, fm, tput_fair[j])


class Greedy:
    """Synergy-Greedy: each job's target where it fits, else skipped this round."""

    name = "greedy"
    uses_targets = True

    def round_placer(self) -> None:
        return None

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: JobOrder) -> None:
        gpus, tc, tm, tt = jobs.gpus_l, jobs.target_cpu_l, jobs.target_mem_l, jobs.tput_target_l
        for j in order:
            if ledger.free_gpus_total == 0:
                break
            parts = ledger.find(gpus[j], tc[j], tm[j])
            if parts is not None:
                ledger.grant(j, parts, tc[j], tm[j], tt[j])


class Tune:
    """Synergy-Tune: targets where they fit, never below the fallback, reclaiming excess."""

    name = "tune"
    uses_targets = True

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: JobOrder) -> None:
        """Admit the jobs of ``order`` whose GPUs fit (backfilling), then place them in Tune's order."""
        self.place_all(ledger, jobs, admit_by_gpus(order, jobs.gpus_l, ledger.free_gpus_total))

    def round_placer(self) -> Tune:
        return self

    def place_all(
        self, ledger: ClusterLedger, jobs: JobTable, admitted: Sequence[int], targets: Targets | None = None
    ) -> None:
        """Place ``admitted`` jobs in descending GPU count (stable), each at its target or ``targets[j]``."""
        gpus = jobs.gpus_l
        ranked = list(admitted)
        if any(gpus[j] > 1 for j in ranked):
            ranked.sort(key=lambda j: -gpus[j])  # stable: policy order among equals
        place = self.place
        for j in ranked:
            place(ledger, jobs, j, None if targets is None else targets[j])

    def place(self, ledger: ClusterLedger, jobs: JobTable, j: int, target: tuple[float, float, float] | None = None) -> int:
        """Place admitted job ``j`` (its GPUs must be free); returns its ledger slot.

        ``target`` = (CPUs, GB per GPU, throughput) overrides the job's own
        target for this round (Synergy-OPT's choice); the fallback is then that
        target capped at the fair share. A target slower than its fallback (a
        request below the fair share that the job's profile punishes) is not
        tried: the job gets its fallback.
        """
        g = jobs.gpus_l[j]
        if target is None:
            tc, tm, tt = jobs.target_cpu_l[j], jobs.target_mem_l[j], jobs.tput_target_l[j]
            cpu, mem, tput = jobs.fallback_cpu_l[j], jobs.fallback_mem_l[j], jobs.tput_fallback_l[j]
        else:
            tc, tm, tt = target
            cpu, mem = min(tc, jobs.fair_cpu), min(tm, jobs.fair_mem)
            tput = jobs.est_throughput(j, cpu, mem)
        fallback = (cpu, mem, tput)
        if tt >= tput:
            parts = ledger.find(g, tc, tm)
            if parts is not None:
                if cpu > tc or mem > tm:  # never cut a grant back to more of anything than it holds
                    low_cpu, low_mem = min(cpu, tc), min(mem, tm)
                    fallback = (low_cpu, low_mem, jobs.est_throughput(j, low_cpu, low_mem))
                return ledger.grant(j, parts, tc, tm, tt, fallback)
        if cpu != tc or mem != tm or tt < tput:
            parts = ledger.find(g, cpu, mem)
            if parts is not None:
                return ledger.grant(j, parts, cpu, mem, tput, fallback)
        self._reclaim(ledger, jobs, g, cpu, mem)
        parts = ledger.find(g, cpu, mem)
        if parts is None:
            # The reference's choice of servers could not make room (a
            # multi-GPU job placed first-fit across servers): downgrade
            # every over-provisioned job on servers with free GPUs, which
            # always leaves a fallback share per free GPU.
            for s in range(ledger.num_servers):
                if ledger.free_gpu[s]:
                    self._downgrade_on(ledger, jobs, s, float("inf"), float("inf"))
            parts = ledger.find(g, cpu, mem)
            if parts is None:  # pragma: no cover - impossible by construction
                raise AssertionError(f"tune could not place job {jobs.job_id[j]} after reclaiming")
        return ledger.grant(j, parts, cpu, mem, tput, fallback)

    def _reclaim(self, ledger: ClusterLedger, jobs: JobTable, g: int, cpu: float, mem: float) -> None:
        for s, n in reclaim_servers(ledger.free_gpu, g):
            need_cpu = n * cpu - ledger.free_cpu[s]
            need_mem = n * mem - ledger.free_mem[s]
            if need_cpu > EPS or need_mem > EPS:
                self._downgrade_on(ledger, jobs, s, need_cpu, need_mem)

    @staticmethod
    def _downgrade_on(ledger: ClusterLedger, jobs: JobTable, server: int, need_cpu: float, need_mem: float) -> None:
        """Cut jobs on ``server`` back to their fallback until (need_cpu, need_mem) is freed."""
        fallback = ledger.fallback
        # Any excess counts, however small: targets from a solver carry round-off.
        over = [
            slot for slot in ledger.slot_on_server[server]
            if ledger.cpu[slot] > fallback[slot][0] or ledger.mem[slot] > fallback[slot][1]
        ]
        over.sort(key=lambda slot: (len(ledger.parts[slot]), -ledger.cpu[slot], -ledger.mem[slot]))
        for slot in over:
            if need_cpu <= EPS and need_mem <= EPS:
                return
            n = ledger.gpus_of(slot, server)
            fb_cpu, fb_mem, fb_tput = fallback[slot]
            extra_cpu = n * (ledger.cpu[slot] - fb_cpu)
            extra_mem = n * (ledger.mem[slot] - fb_mem)
            if (need_cpu > EPS and extra_cpu > 0) or (need_mem > EPS and extra_mem > 0):
                ledger.resize(slot, fb_cpu, fb_mem, fb_tput)
                need_cpu -= extra_cpu
                need_mem -= extra_mem


def admit_by_gpus(order: JobOrder, gpus: Sequence[int], free: int) -> list[int]:
    """Jobs of ``order`` whose GPUs fit in what is still free, in order (smaller later jobs backfill)."""
    admitted: list[int] = []
    for j in order:
        if free == 0:
            break
        g = gpus[j]
        if g <= free:
            admitted.append(j)
            free -= g
    return admitted


def reclaim_servers(free_gpu: Sequence[int], gpus: int) -> Parts:
    """Servers on which Tune makes room for a ``gpus``-GPU job, and GPUs on each.

    A multi-GPU job prefers the first server with enough free GPUs; otherwise
    servers with the fewest free GPUs are taken first (ties by index).
    """
    if gpus > 1:
        for s, f in enumerate(free_gpu):
            if f >= gpus:
                return [(s, gpus)]
    heap = [(f, s) for s, f in enumerate(free_gpu) if f > 0]
    heapq.heapify(heap)
    parts: Parts = []
    need = gpus
    while need > 0 and heap:
        f, s = heapq.heappop(heap)
        take = min(f, need)
        parts.append((s, take))
        need -= take
    return parts


MECHANISMS: dict[str, type] = {"fair": FairShare, "greedy": Greedy, "tune": Tune}
