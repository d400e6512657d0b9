"""Allocation mechanisms: how a round's jobs get GPUs, CPUs and memory.

Each round starts from an empty cluster (leases last one round; preemption is
free) and a mechanism walks the jobs in policy order:

``fair``   GPU-proportional: every placed job gets the fair share per GPU.
``greedy`` Synergy-Greedy: each job gets its target (best-case demand) where
           it fits; a job whose target does not fit is skipped this round and
           later jobs may take the GPUs.
``tune``   Synergy-Tune: jobs are admitted by GPU count in policy order, then
           placed in descending GPU count (the sequence lives in
           :class:`synergy_gym.sim.planner.RoundPlanner`, which the simulator, OPT
           and the environment all drive). Each gets its target if it fits,
           else its fallback (the target capped at the fair share); if even that
           does not fit, servers with free GPUs are chosen (a multi-GPU job
           takes the first server with enough free GPUs, otherwise servers with
           the fewest free GPUs first) and jobs there that hold more than their
           fallback are switched back to it – single-server jobs first, then
           those with the most CPUs per GPU, then the most memory per GPU –
           until the job's share fits. No job runs slower than at its fallback.

Placement (the :class:`ClusterLedger`) is first-fit by default, as in the
paper's simulator: servers are scanned in index order and a GPU is taken
wherever its server still has the job's per-GPU CPUs and memory; a job may span
servers. ``placement="consolidate"`` puts a job on the single server with the
fewest free GPUs that holds it whole, or else on as few servers as possible.

Mechanisms are pure functions of the ordered job list and the jobs' attributes;
the simulator relies on this to skip rounds in which nothing can change.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Literal, Protocol

from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.planner import RoundPlanner

Placement = Literal["first_fit", "consolidate"]
PLACEMENTS: tuple[str, ...] = ("first_fit", "consolidate")

# Tolerance for comparing floating-point CPU and memory amounts.
EPS = 1e-6

Parts = list[tuple[int, int]]  # (server, GPUs on that server)


class ClusterLedger:
    """Free resources per server while one round is allocated, and the grants made.

    With ``undo=True`` every change is logged so that :meth:`rollback` can
    return the ledger exactly (old values restored, not recomputed) to an
    earlier :meth:`mark`: a round whose jobs start like the previous round's
    keeps that part of the previous allocation instead of redoing it.
    """

    def __init__(self, cluster: ClusterSpec, placement: Placement = "first_fit", undo: bool = False) -> None:
        if placement not in PLACEMENTS:
            from synergy_gym.errors import UnknownNameError

            raise UnknownNameError("placement", placement, PLACEMENTS)
        self.cluster = cluster
        self.placement = placement
        self.num_servers = cluster.num_servers
        self.undo = undo
        self.reset()

    def reset(self) -> None:
        c = self.cluster
        s = self.num_servers
        self.free_gpu: list[int] = [c.gpus_per_server] * s
        self.free_cpu: list[float] = [c.cpus_per_server] * s
        self.free_mem: list[float] = [c.mem_gb_per_server] * s
        self.free_gpus_total = c.total_gpus
        self._first_open = 0  # servers before this one have no free GPU
        # One entry per grant, in grant order ("slots").
        self.jobs: list[int] = []
        self.cpu: list[float] = []  # CPUs per GPU
        self.mem: list[float] = []  # GB per GPU
        self.tput: list[float] = []
        self.parts: list[Parts] = []
        # What Tune may cut each grant back to: (cpu, mem, tput) per GPU, the grant itself by default.
        self.fallback: list[tuple[float, float, float]] = []
        self.slot_on_server: list[list[int]] = [[] for _ in range(s)]
        self._log: list[tuple] = []

    # -- finding room -------------------------------------------------------
    def find(self, gpus: int, cpu: float, mem: float) -> Parts | None:
        """Servers that can host ``gpus`` GPUs with (cpu, mem) each, or None."""
        if gpus > self.free_gpus_total:
            return None
        if self.placement == "first_fit":
            return self._first_fit(gpus, cpu, mem)
        return self._consolidate(gpus, cpu, mem)

    def _first_fit(self, gpus: int, cpu: float, mem: float) -> Parts | None:
        fg, fc, fm = self.free_gpu, self.free_cpu, self.free_mem
        cpu_need, mem_need = cpu - EPS, mem - EPS
        if gpus == 1:
            for s in range(self._first_open, self.num_servers):
                if fg[s] and fc[s] >= cpu_need and fm[s] >= mem_need:
                    return [(s, 1)]
            return None
        parts: Parts = []
        need = gpus
        for s in range(self._first_open, self.num_servers):
            if not fg[s]:
                continue
            k = min(need, fg[s], int((fc[s] + EPS) // cpu), int((fm[s] + EPS) // mem))
            if k > 0:
                parts.append((s, k))
                need -= k
                if need == 0:
                    return parts
        return None

    def _consolidate(self, gpus: int, cpu: float, mem: float) -> Parts | None:
        fg, fc, fm = self.free_gpu, self.free_cpu, self.free_mem
        room = [
            (min(fg[s], int((fc[s] + EPS) // cpu), int((fm[s] + EPS) // mem)), s)
            for s in range(self.num_servers)
        ]
        whole = [(fg[s], s) for k, s in room if k >= gpus]
        if whole:
            return [(min(whole)[1], gpus)]
        parts: Parts = []
        need = gpus
        for k, s in sorted(room, key=lambda r: (-r[0], r[1])):
            if k <= 0:
                break
            take = min(k, need)
            parts.append((s, take))
            need -= take
            if need == 0:
                return parts
        return None

    # -- granting -----------------------------------------------------------
    def grant(
        self, job: int, parts: Parts, cpu: float, mem: float, tput: float,
        fallback: tuple[float, float, float] | None = None,
    ) -> int:
        """Give ``job`` the GPUs in ``parts`` with (cpu, mem) per GPU; returns its slot.

        ``fallback`` = (cpu, mem, tput) no larger than the grant: what Tune may
        later cut it back to (default: nothing, the grant itself).
        """
        slot = len(self.jobs)
        fg, fc, fm = self.free_gpu, self.free_cpu, self.free_mem
        if self.undo:
            if len(parts) == 1:
                s = parts[0][0]
                servers = [(s, fg[s], fc[s], fm[s])]
            else:
                servers = [(s, fg[s], fc[s], fm[s]) for s, _ in parts]
            self._log.append(("grant", servers, self._first_open, self.free_gpus_total))
        self.jobs.append(job)
        self.cpu.append(cpu)
        self.mem.append(mem)
        self.tput.append(tput)
        self.parts.append(parts)
        self.fallback.append(fallback if fallback is not None else (cpu, mem, tput))
        on_server = self.slot_on_server
        taken = 0
        for s, n in parts:
            fg[s] -= n
            fc[s] -= n * cpu
            fm[s] -= n * mem
            on_server[s].append(slot)
            taken += n
        self.free_gpus_total -= taken
        first = self._first_open
        n_servers = self.num_servers
        while first < n_servers and not fg[first]:
            first += 1
        self._first_open = first
        return slot

    def resize(self, slot: int, cpu: float, mem: float, tput: float) -> None:
        """Change a grant's per-GPU CPUs and memory on every server it spans."""
        if self.undo:
            self._log.append(
                ("resize", slot, self.cpu[slot], self.mem[slot], self.tput[slot],
                 [(s, self.free_cpu[s], self.free_mem[s]) for s, _ in self.parts[slot]])
            )
        d_cpu = self.cpu[slot] - cpu
        d_mem = self.mem[slot] - mem
        for s, n in self.parts[slot]:
            self.free_cpu[s] += n * d_cpu
            self.free_mem[s] += n * d_mem
        self.cpu[slot] = cpu
        self.mem[slot] = mem
        self.tput[slot] = tput

    def mark(self) -> int:
        """A point to :meth:`rollback` to (needs ``undo=True``)."""
        return len(self._log)

    def rollback(self, mark: int) -> None:
        """Undo every grant and resize made since ``mark``, restoring the exact old values."""
        log = self._log
        if len(log) <= mark:
            return
        fg, fc, fm = self.free_gpu, self.free_cpu, self.free_mem
        jobs, cpus, mems, tputs, parts, fallback = self.jobs, self.cpu, self.mem, self.tput, self.parts, self.fallback
        on_server = self.slot_on_server
        while len(log) > mark:
            entry = log.pop()
            if entry[0] == "grant":
                _, servers, first_open, free_total = entry
                for s, _ in parts.pop():
                    on_server[s].pop()
                jobs.pop()
                cpus.pop()
                mems.pop()
                tputs.pop()
                fallback.pop()
                for s, g, c, m in servers:
                    fg[s] = g
                    fc[s] = c
                    fm[s] = m
                self._first_open, self.free_gpus_total = first_open, free_total
            else:
                _, slot, cpu, mem, tput, servers = entry
                cpus[slot], mems[slot], tputs[slot] = cpu, mem, tput
                for s, c, m in servers:
                    fc[s] = c
                    fm[s] = m

    def gpus_of(self, slot: int, server: int) -> int:
        for s, n in self.parts[slot]:
            if s == server:
                return n
        return 0

    def check_capacity(self) -> None:
        """Raise AssertionError if any server is over any capacity (debug mode)."""
        for s in range(self.num_servers):
            assert self.free_gpu[s] >= 0, f"server {s}: GPUs over capacity ({self.free_gpu[s]} free)"
            assert self.free_cpu[s] >= -EPS, f"server {s}: CPUs over capacity ({self.free_cpu[s]} free)"
            assert self.free_mem[s] >= -EPS, f"server {s}: memory over capacity ({self.free_mem[s]} free)"


class AllocationMechanism(Protocol):
    """Gives a round's jobs their resources, walking them in policy order."""

    name: str
    #: True if jobs may run faster than at their fair share (SRTF then estimates
    #: remaining time at the target's throughput).
    uses_targets: bool

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: Sequence[int]) -> None:
        """Grant resources in ``ledger`` to jobs of ``order`` (policy order)."""


class FairShare:
    """GPU-proportional allocation."""

    name = "fair"
    uses_targets = False

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: Sequence[int]) -> None:
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

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: Sequence[int]) -> None:
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

    def allocate(self, ledger: ClusterLedger, jobs: JobTable, order: Sequence[int]) -> None:
        """A round with no decisions: :class:`~synergy_gym.sim.planner.RoundPlanner` admits and places."""
        RoundPlanner(ledger, jobs, self).plan(order)

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
