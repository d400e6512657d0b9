"""The ledger of one round: free resources per server, and the grants made.

Placement is first-fit by default, as in the paper's simulator: servers are
scanned in index order and a GPU is taken wherever its server still has the
job's per-GPU CPUs and memory; a job may span servers.
``placement="consolidate"`` puts a job on the single server with the fewest
free GPUs that holds it whole, or else on as few servers as possible.

The state lives in numpy arrays changed by compiled kernels
(:mod:`synergy_gym.sim.ledger_kernels`), so that Synergy-Tune's placement of a
whole round runs as one compiled call (:mod:`synergy_gym.sim.tune_kernels`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from synergy_gym.errors import UnknownNameError
from synergy_gym.sim import ledger_kernels as lk
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.ledger_kernels import EPS

Placement = Literal["first_fit", "consolidate"]
PLACEMENTS: tuple[str, ...] = ("first_fit", "consolidate")

__all__ = ["EPS", "PLACEMENTS", "ClusterLedger", "Parts", "Placement"]

Parts = list[tuple[int, int]]  # (server, GPUs on that server)


class ClusterLedger:
    """Free resources per server while one round is allocated, and the grants made.

    Each grant is a *slot*, numbered in grant order. :attr:`jobs`, :attr:`cpu`,
    :attr:`mem` and :attr:`tput` are numpy views of the slots' columns, valid until
    the ledger next changes (copy them to keep them); :attr:`free_gpu`,
    :attr:`free_cpu` and :attr:`free_mem` are the per-server arrays themselves.

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
        #: The kernels' state: the arrays named by :data:`~synergy_gym.sim.ledger_kernels.LEDGER_FIELDS`.
        self.state = lk.new_state(
            cluster.num_servers, cluster.gpus_per_server, cluster.cpus_per_server, cluster.mem_gb_per_server,
            undo, PLACEMENTS.index(placement),
        )
        self.free_gpu, self.free_cpu, self.free_mem = self.state[0], self.state[1], self.state[2]
        self._slot_job, self._slot_val = self.state[3], self.state[4]
        self._part_start, self._part = self.state[5], self.state[6]
        self._count = self.state[10]

    def _set_state(self, state: tuple) -> None:
        self.state = state  # only the undo log's arrays may be new; the rest are the same arrays

    @property
    def undo(self) -> bool:
        return bool(self._count[lk.UNDO])

    @undo.setter
    def undo(self, on: bool) -> None:
        self._count[lk.UNDO] = int(on)

    def reset(self) -> None:
        """Free everything: no grants, an empty undo log."""
        c = self.cluster
        self.free_gpu.fill(c.gpus_per_server)
        self.free_cpu.fill(c.cpus_per_server)
        self.free_mem.fill(c.mem_gb_per_server)
        self.state[7].fill(-1)
        count = self._count
        count[lk.N_SLOTS] = count[lk.N_PARTS] = count[lk.N_LOG] = count[lk.N_SAVED] = 0
        count[lk.FREE_TOTAL] = c.total_gpus
        count[lk.FIRST_OPEN] = 0 if c.gpus_per_server else c.num_servers
        lk.rebuild_index(self.state)

    # -- reading ------------------------------------------------------------
    @property
    def free_gpus_total(self) -> int:
        return int(self._count[lk.FREE_TOTAL])

    @property
    def n_slots(self) -> int:
        """Grants made (slots in use)."""
        return int(self._count[lk.N_SLOTS])

    @property
    def jobs(self) -> np.ndarray:
        """The job of each slot (int64)."""
        return self._slot_job[: self._count[lk.N_SLOTS]]

    @property
    def cpu(self) -> np.ndarray:
        """CPUs per GPU of each slot."""
        return self._slot_val[lk.CPU, : self._count[lk.N_SLOTS]]

    @property
    def mem(self) -> np.ndarray:
        """GB of memory per GPU of each slot."""
        return self._slot_val[lk.MEM, : self._count[lk.N_SLOTS]]

    @property
    def tput(self) -> np.ndarray:
        """Normalised throughput of each slot at its grant."""
        return self._slot_val[lk.TPUT, : self._count[lk.N_SLOTS]]

    @property
    def fallback(self) -> list[tuple[float, float, float]]:
        """What Tune may cut each slot back to: (CPUs, GB per GPU, throughput)."""
        n = self.n_slots
        return list(zip(*(self._slot_val[row, :n].tolist() for row in (lk.FB_CPU, lk.FB_MEM, lk.FB_TPUT))))

    @property
    def parts(self) -> list[Parts]:
        """Each slot's (server, GPUs) parts."""
        servers, gpus, start = self._part[lk.SERVER].tolist(), self._part[lk.GPUS].tolist(), self._part_start.tolist()
        return [list(zip(servers[start[k] : start[k + 1]], gpus[start[k] : start[k + 1]])) for k in range(self.n_slots)]

    @property
    def slot_on_server(self) -> list[list[int]]:
        """Per server, the slots holding GPUs on it, in grant order."""
        on: list[list[int]] = [[] for _ in range(self.num_servers)]
        for slot, parts in enumerate(self.parts):
            for s, _ in parts:
                on[s].append(slot)
        return on

    def gpus_of(self, slot: int, server: int) -> int:
        for s, n in self.parts[slot]:
            if s == server:
                return n
        return 0

    # -- changing -----------------------------------------------------------
    def find(self, gpus: int, cpu: float, mem: float) -> Parts | None:
        """Servers that can host ``gpus`` GPUs with (cpu, mem) each, or None."""
        n = lk.find(self.state, int(gpus), float(cpu), float(mem))
        if not n:
            return None
        found = self.state[11]
        return list(zip(found[0, :n].tolist(), found[1, :n].tolist()))

    def grant(
        self, job: int, parts: Parts, cpu: float, mem: float, tput: float,
        fallback: tuple[float, float, float] | None = None,
    ) -> int:
        """Give ``job`` the GPUs in ``parts`` with (cpu, mem) per GPU; returns its slot.

        ``fallback`` = (cpu, mem, tput) no larger than the grant: what Tune may
        later cut it back to (default: nothing, the grant itself).
        """
        parts = [(int(s), int(n)) for s, n in parts]
        free = self.free_gpu
        if not parts or len({s for s, _ in parts}) != len(parts) or any(
            not (0 <= s < self.num_servers and 1 <= n <= free[s]) for s, n in parts
        ):
            raise ValueError(
                f"grant of job {job}: parts={parts} must name distinct servers (0..{self.num_servers - 1}) and "
                f"1 to their free GPUs each (free: {free.tolist()})"
            )
        found = self.state[11]
        for i, (s, n) in enumerate(parts):
            found[0, i] = s
            found[1, i] = n
        fb_cpu, fb_mem, fb_tput = fallback if fallback is not None else (cpu, mem, tput)
        return int(lk.grant(
            self.state, int(job), len(parts), float(cpu), float(mem), float(tput), float(fb_cpu), float(fb_mem), float(fb_tput)
        ))

    def resize(self, slot: int, cpu: float, mem: float, tput: float) -> None:
        """Change a grant's per-GPU CPUs and memory on every server it spans."""
        if not 0 <= slot < self.n_slots:
            raise IndexError(f"resize: slot={slot} is not a grant (there are {self.n_slots})")
        if self.undo:  # room for this entry and for everything Tune's kernels may log after it
            cap = self._slot_job.size
            parts = int(self._part_start[slot + 1] - self._part_start[slot])
            self._set_state(lk.grow_log(self.state, 1 + 2 * cap, 3 + 2 * parts + 9 * cap))
        lk.resize(self.state, int(slot), float(cpu), float(mem), float(tput))

    def mark(self) -> int:
        """A point to :meth:`rollback` to (needs ``undo=True``)."""
        return int(self._count[lk.N_LOG])

    def rollback(self, mark: int) -> None:
        """Undo every grant and resize made since ``mark``, restoring the exact old values."""
        if self._count[lk.N_LOG] > mark:
            lk.rollback(self.state, int(mark))

    def check_capacity(self) -> None:
        """Raise AssertionError if any server is over any capacity (debug mode)."""
        for s in range(self.num_servers):
            assert self.free_gpu[s] >= 0, f"server {s}: GPUs over capacity ({self.free_gpu[s]} free)"
            assert self.free_cpu[s] >= -EPS, f"server {s}: CPUs over capacity ({self.free_cpu[s]} free)"
            assert self.free_mem[s] >= -EPS, f"server {s}: memory over capacity ({self.free_mem[s]} free)"
