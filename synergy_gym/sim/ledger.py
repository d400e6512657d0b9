"""The ledger of one round: free resources per server, and the grants made.

Placement is first-fit by default, as in the paper's simulator: servers are
scanned in index order and a GPU is taken wherever its server still has the
job's per-GPU CPUs and memory; a job may span servers.
``placement="consolidate"`` puts a job on the single server with the fewest
free GPUs that holds it whole, or else on as few servers as possible.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Literal

from synergy_gym.errors import UnknownNameError
from synergy_gym.sim.cluster import ClusterSpec

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
        #: The servers with a free GPU, in index order: first fit scans only these (in a full cluster
        #: most servers have none, and skipping them one by one was most of a large cluster's round).
        self._open: list[int] = list(range(s)) if c.gpus_per_server else []
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
        if self.placement != "first_fit":
            return self._consolidate(gpus, cpu, mem)
        if gpus == 1:  # the hot case, scanned here rather than in a further call
            fc, fm = self.free_cpu, self.free_mem
            cpu_need, mem_need = cpu - EPS, mem - EPS
            for s in self._open:
                if fc[s] >= cpu_need and fm[s] >= mem_need:
                    return [(s, 1)]
            return None
        return self._first_fit(gpus, cpu, mem)

    def _first_fit(self, gpus: int, cpu: float, mem: float) -> Parts | None:
        """First fit of a multi-GPU job: GPUs taken from servers in index order, as many as each holds."""
        fg, fc, fm = self.free_gpu, self.free_cpu, self.free_mem
        parts: Parts = []
        need = gpus
        for s in self._open:
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
        self.jobs.append(job)
        self.cpu.append(cpu)
        self.mem.append(mem)
        self.tput.append(tput)
        self.parts.append(parts)
        self.fallback.append(fallback if fallback is not None else (cpu, mem, tput))
        if len(parts) == 1:  # the common case, without a loop
            s, n = parts[0]
            if self.undo:  # a grant on one server: 5 fields (see rollback)
                self._log.append((s, fg[s], fc[s], fm[s], self.free_gpus_total))
            fg[s] -= n
            fc[s] -= n * cpu
            fm[s] -= n * mem
            self.slot_on_server[s].append(slot)
            self.free_gpus_total -= n
            if not fg[s]:
                open_ = self._open
                del open_[bisect_left(open_, s)]
        else:
            if self.undo:  # a grant on several servers: 2 fields
                self._log.append(([(s, fg[s], fc[s], fm[s]) for s, _ in parts], self.free_gpus_total))
            on_server = self.slot_on_server
            taken = 0
            for s, n in parts:
                fg[s] -= n
                fc[s] -= n * cpu
                fm[s] -= n * mem
                on_server[s].append(slot)
                taken += n
                if not fg[s]:
                    open_ = self._open
                    del open_[bisect_left(open_, s)]
            self.free_gpus_total -= taken
        return slot

    def resize(self, slot: int, cpu: float, mem: float, tput: float) -> None:
        """Change a grant's per-GPU CPUs and memory on every server it spans."""
        if self.undo:  # a resize: 3 fields
            self._log.append(
                (slot, (self.cpu[slot], self.mem[slot], self.tput[slot]),
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
        open_ = self._open
        # Entries by length: 5 a grant on one server, 2 a grant on several, 3 a resize.
        while len(log) > mark:
            entry = log.pop()
            size = len(entry)
            if size == 5:
                s = entry[0]
                if not fg[s]:  # it had a free GPU before the grant
                    insort(open_, s)
                _, fg[s], fc[s], fm[s], self.free_gpus_total = entry
                on_server[s].pop()
                parts.pop()
                jobs.pop()
                cpus.pop()
                mems.pop()
                tputs.pop()
                fallback.pop()
            elif size == 2:
                servers, self.free_gpus_total = entry
                for s, _ in parts.pop():
                    on_server[s].pop()
                jobs.pop()
                cpus.pop()
                mems.pop()
                tputs.pop()
                fallback.pop()
                for s, g, c, m in servers:
                    if not fg[s]:
                        insort(open_, s)
                    fg[s] = g
                    fc[s] = c
                    fm[s] = m
            else:
                slot, (cpus[slot], mems[slot], tputs[slot]), servers = entry
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
