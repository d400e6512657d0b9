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

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from synergy_gym.sim import tune_kernels as tk
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.ledger import ClusterLedger, Parts
from synergy_gym.sim.ledger_kernels import grant_in_order

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
    # Optional (False if absent): ``floors_targets``, True if a job whose target is slower than its fallback is
    # granted the fallback (Tune, OPT); the orderings then rank such a job at it (JobTable.planned).

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
    floors_targets = False

    def round_placer(self) -> None:
        return None

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: JobOrder) -> None:
        fair = (np.array([jobs.fair_cpu], dtype=float), np.array([jobs.fair_mem], dtype=float))
        grant_in_order(ledger.state, _as_order(order), jobs.gpus, *fair, jobs.tput_fair, False)


class Greedy:
    """Synergy-Greedy: each job's target where it fits, else skipped this round."""

    name = "greedy"
    uses_targets = True
    floors_targets = False

    def round_placer(self) -> None:
        return None

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: JobOrder) -> None:
        grant_in_order(ledger.state, _as_order(order), jobs.gpus, jobs.target_cpu, jobs.target_mem, jobs.tput_target, True)


class Tune:
    """Synergy-Tune: targets where they fit, never below the fallback, reclaiming excess."""

    name = "tune"
    uses_targets = True
    floors_targets = True

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
        if targets is None and type(self).place is Tune.place:  # all in one compiled call
            stuck = tk.tune_place_all(ledger.state, jobs.placement_columns(), _as_order(ranked))
            if stuck >= 0:  # pragma: no cover - impossible by construction
                raise AssertionError(f"tune could not place job {jobs.job_id[stuck]} after reclaiming")
            return
        for j in ranked:
            self.place(ledger, jobs, j, None if targets is None else targets[j])

    def place(self, ledger: ClusterLedger, jobs: JobTable, j: int, target: tuple[float, float, float] | None = None) -> int:
        """Place admitted job ``j`` (its GPUs must be free); returns its ledger slot.

        ``target`` = (CPUs, GB per GPU, throughput) overrides the job's own
        target for this round (Synergy-OPT's choice); the fallback is then that
        target capped at the fair share. A target slower than its fallback (a
        request below the fair share that the job's profile punishes) is not
        tried: the job gets its fallback. The rules are carried out by
        :func:`~synergy_gym.sim.tune_kernels.tune_place`.
        """
        if target is None:
            slot = tk.tune_place(
                ledger.state, j, jobs.gpus_l[j], jobs.target_cpu_l[j], jobs.target_mem_l[j], jobs.tput_target_l[j],
                jobs.fallback_cpu_l[j], jobs.fallback_mem_l[j], jobs.tput_fallback_l[j], jobs.tput_capped[j],
            )
        else:
            tc, tm, tt = (float(x) for x in target)
            cpu, mem = min(tc, jobs.fair_cpu), min(tm, jobs.fair_mem)
            tput = jobs.est_throughput(j, cpu, mem)
            cut = jobs.est_throughput(j, min(cpu, tc), min(mem, tm)) if cpu > tc or mem > tm else tput
            slot = tk.tune_place(ledger.state, j, jobs.gpus_l[j], tc, tm, tt, cpu, mem, tput, cut)
        if slot < 0:  # pragma: no cover - impossible by construction
            raise AssertionError(f"tune could not place job {jobs.job_id[j]} after reclaiming")
        return int(slot)


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


def reclaim_servers(free_gpu: Sequence[int] | np.ndarray, gpus: int) -> Parts:
    """Servers on which Tune makes room for a ``gpus``-GPU job, and GPUs on each.

    A multi-GPU job prefers the first server with enough free GPUs; otherwise
    servers with the fewest free GPUs are taken first (ties by index).
    """
    servers, take = tk.reclaim_order(np.asarray(free_gpu, dtype=np.int64), int(gpus), 0)
    return list(zip(servers.tolist(), take.tolist()))


def _as_order(order: JobOrder) -> np.ndarray:
    """An order as the int64 array the kernels take."""
    return order if isinstance(order, np.ndarray) and order.dtype == np.int64 else np.asarray(order, dtype=np.int64)


MECHANISMS: dict[str, type] = {"fair": FairShare, "greedy": Greedy, "tune": Tune}
