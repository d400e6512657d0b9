"""The ledger's compiled operations: finding room, granting, resizing and rolling back.

A :class:`~synergy_gym.sim.ledger.ClusterLedger` keeps its state in a tuple of numpy arrays
(:data:`LEDGER_FIELDS` names them, in order), which every kernel here takes as ``L`` and changes
in place:

* per server: free GPUs, CPUs and memory, and the last part granted on it (``head``);
* per grant ("slot", in grant order): the job, its (CPUs, GB per GPU, throughput) and the
  fallback Tune may cut it back to, and where its parts start;
* per part (a slot's GPUs on one server): the server, the GPUs, the slot, and the previous part on
  the same server, so that a server's grants are a chain from ``head``;
* an undo log: one entry per grant or resize, with the values it overwrote kept in ``saved``, so
  that :func:`rollback` restores them exactly (not recomputed);
* ``count``: how many slots, parts, log entries and saved values are in use, the free GPUs in all,
  the first server with a free GPU (every search for room starts there: in a busy cluster the
  servers before it are full), and the settings (undo on, placement);
* ``found``: where :func:`find` writes the servers it found and the GPUs on each;
* ``scratch``: room for one server's grants (Tune's downgrade sorts them there);
* ``index``: the servers with a free GPU as a tree (:mod:`synergy_gym.sim.server_index`), so that
  the first server with room, or the one with the fewest free GPUs, is found without a scan of
  every server.

Every grant takes at least one GPU and every part at least one, so a round never has more slots or
parts than the cluster has GPUs: those arrays are sized once (:class:`~synergy_gym.sim.ledger.ClusterLedger`
refuses a grant of GPUs that are not free). Tune resizes a grant at most once, down to its fallback,
so the undo log needs at most two entries a slot; resizes asked for through the ledger's own
:meth:`~synergy_gym.sim.ledger.ClusterLedger.resize` grow it first (:func:`grow_log`). Arithmetic is the
plain Python's it replaced, operation for operation, so results are bit-identical.
"""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.compiled import kernel
from synergy_gym.sim.server_index import new_index, next_with_room, rebuild, touch

#: Names of the ledger's arrays, in the order of the state tuple.
LEDGER_FIELDS = (
    "free_gpu", "free_cpu", "free_mem", "slot_job", "slot_val", "part_start", "part", "head", "log", "saved",
    "count", "found", "scratch", "index",
)
# Rows of slot_val.
CPU, MEM, TPUT, FB_CPU, FB_MEM, FB_TPUT = range(6)
# Rows of part.
SERVER, GPUS, PREV, SLOT = range(4)
# Rows of log, and its kinds.
KIND, LOG_SLOT, SAVED_AT = range(3)
GRANT, RESIZE = 0, 1
# Cells of count.
N_SLOTS, N_PARTS, FREE_TOTAL, N_LOG, N_SAVED, UNDO, PLACEMENT, FIRST_OPEN = range(8)
FIRST_FIT, CONSOLIDATE = 0, 1

#: Tolerance for comparing floating-point CPU and memory amounts.
EPS = 1e-6


def new_state(
    num_servers: int, gpus_per_server: int, cpus_per_server: float, mem_per_server: float, undo: bool, placement: int
) -> tuple:
    """An empty ledger's arrays (every GPU, CPU and GB free)."""
    cap = max(num_servers * gpus_per_server, 1)
    count = np.zeros(8, dtype=np.int64)
    count[FREE_TOTAL] = num_servers * gpus_per_server
    count[UNDO] = int(undo)
    count[PLACEMENT] = placement
    count[FIRST_OPEN] = 0 if gpus_per_server else num_servers
    state = (
        np.full(num_servers, gpus_per_server, dtype=np.int64),
        np.full(num_servers, float(cpus_per_server)),
        np.full(num_servers, float(mem_per_server)),
        np.zeros(cap, dtype=np.int64),
        np.zeros((6, cap)),
        np.zeros(cap + 1, dtype=np.int64),
        np.zeros((4, cap), dtype=np.int64),
        np.full(num_servers, -1, dtype=np.int64),
        np.zeros((3, 2 * cap), dtype=np.int64),  # at most a grant and a resize per slot
        np.zeros(9 * cap + 1),  # a grant saves 1 + 3 per part, a resize 3 + 2 per part
        count,
        np.zeros((2, max(num_servers, 1)), dtype=np.int64),
        np.zeros((2, max(gpus_per_server, 1)), dtype=np.int64),
        new_index(num_servers),
    )
    rebuild_index(state)
    return state


def log_room(state: tuple) -> tuple[int, int]:
    """Undo-log entries and saved values still free in ``state``."""
    log, saved, count = state[8], state[9], state[10]
    return log.shape[1] - int(count[N_LOG]), saved.size - int(count[N_SAVED])


def grow_log(state: tuple, entries: int, values: int) -> tuple:
    """``state`` with an undo log of room for at least ``entries`` more entries and ``values`` more saved values
    (the same tuple when it has room; otherwise one with larger log arrays, the old contents copied)."""
    free_entries, free_values = log_room(state)
    if free_entries >= entries and free_values >= values:
        return state
    log, saved = state[8], state[9]
    new_log = np.zeros((3, 2 * log.shape[1] + entries), dtype=np.int64)
    new_log[:, : log.shape[1]] = log
    new_saved = np.zeros(2 * saved.size + values)
    new_saved[: saved.size] = saved
    return state[:8] + (new_log, new_saved) + state[10:]


@kernel
def rebuild_index(L):
    """Fill the ledger's index from its free resources."""
    rebuild(L[0], L[1], L[2], L[13])


@kernel
def find(L, gpus, cpu, mem):
    """Servers that can host ``gpus`` GPUs with (cpu, mem) each, written to ``found``; returns how many (0: none).

    First fit takes GPUs from servers in index order, as many as each holds; consolidate takes the
    single server with the fewest free GPUs that holds the job whole, or else as few servers as possible.
    """
    return find_room(L[0], L[1], L[2], L[10], L[11], L[13], gpus, cpu, mem)


@kernel
def find_room(free_gpu, free_cpu, free_mem, count, found, index, gpus, cpu, mem):
    """:func:`find` on the ledger arrays it reads (a call with fewer arguments than the whole ledger)."""
    if gpus > count[FREE_TOTAL]:
        return 0
    if count[PLACEMENT] == CONSOLIDATE:
        return _consolidate(free_gpu, free_cpu, free_mem, found, gpus, cpu, mem)
    if gpus == 1:  # a free GPU where free_cpu >= cpu - EPS and free_mem >= mem - EPS
        s = next_with_room(index, count[FIRST_OPEN], cpu - EPS, mem - EPS, 0.0)
        if s < 0:
            return 0
        found[0, 0] = s
        found[1, 0] = 1
        return 1
    # Several GPUs: a server offers GPUs where (free + EPS) // need >= 1 for CPUs and memory,
    # that is free + EPS >= need.
    need = gpus
    k = 0
    s = next_with_room(index, count[FIRST_OPEN], cpu, mem, EPS)
    while s >= 0:
        # The quotients stay floats until the minimum: a tiny amount per GPU gives quotients past int64.
        take = int(min(need, free_gpu[s], (free_cpu[s] + EPS) // cpu, (free_mem[s] + EPS) // mem))
        if take > 0:
            k, need = _add_part(found, k, need, s, take)
            if need == 0:
                return k
        s = next_with_room(index, s + 1, cpu, mem, EPS)
    return 0


@kernel
def _consolidate(free_gpu, free_cpu, free_mem, found, gpus, cpu, mem):
    n = free_gpu.size
    room = np.empty(n, dtype=np.int64)
    best = -1
    for s in range(n):
        room[s] = int(min(free_gpu[s], (free_cpu[s] + EPS) // cpu, (free_mem[s] + EPS) // mem))
        if room[s] >= gpus and (best < 0 or free_gpu[s] < free_gpu[best]):
            best = s
    if best >= 0:
        found[0, 0] = best
        found[1, 0] = gpus
        return 1
    need = gpus
    k = 0
    for s in np.argsort(-room, kind="mergesort"):  # most room first, ties by index
        if room[s] <= 0:
            break
        k, need = _add_part(found, k, need, s, min(room[s], need))
        if need == 0:
            return k
    return 0


@kernel(inline=True)
def _add_part(found, k, need, server, take):
    """Write ``take`` GPUs on ``server`` as the ``k``-th part found; returns (parts, GPUs still needed)."""
    found[0, k] = server
    found[1, k] = take
    return k + 1, need - take


@kernel(inline=True)
def grant(L, job, nparts, cpu, mem, tput, fb_cpu, fb_mem, fb_tput):
    """Give ``job`` the GPUs of ``found[:, :nparts]`` with (cpu, mem) per GPU; returns its slot."""
    free_gpu, free_cpu, free_mem, slot_job, slot_val, part_start, part, head, log, saved, count, found, _, index = L
    slot = count[N_SLOTS]
    p0 = count[N_PARTS]
    if count[UNDO]:
        e = count[N_LOG]
        at = count[N_SAVED]
        log[KIND, e] = GRANT
        log[LOG_SLOT, e] = slot
        log[SAVED_AT, e] = at
        saved[at] = count[FREE_TOTAL]
        at += 1
        for i in range(nparts):
            s = found[0, i]
            saved[at] = free_gpu[s]
            saved[at + 1] = free_cpu[s]
            saved[at + 2] = free_mem[s]
            at += 3
        count[N_LOG] = e + 1
        count[N_SAVED] = at
    slot_job[slot] = job
    slot_val[CPU, slot] = cpu
    slot_val[MEM, slot] = mem
    slot_val[TPUT, slot] = tput
    slot_val[FB_CPU, slot] = fb_cpu
    slot_val[FB_MEM, slot] = fb_mem
    slot_val[FB_TPUT, slot] = fb_tput
    taken = 0
    for i in range(nparts):
        s = found[0, i]
        n = found[1, i]
        free_gpu[s] -= n
        free_cpu[s] -= n * cpu
        free_mem[s] -= n * mem
        touch(free_gpu, free_cpu, free_mem, index, s)
        p = p0 + i
        part[SERVER, p] = s
        part[GPUS, p] = n
        part[SLOT, p] = slot
        part[PREV, p] = head[s]
        head[s] = p
        taken += n
    count[FREE_TOTAL] -= taken
    first = count[FIRST_OPEN]
    while first < free_gpu.size and free_gpu[first] == 0:
        first += 1
    count[FIRST_OPEN] = first
    part_start[slot + 1] = p0 + nparts
    count[N_PARTS] = p0 + nparts
    count[N_SLOTS] = slot + 1
    return slot


@kernel(inline=True)
def resize(L, slot, cpu, mem, tput):
    """Change a grant's per-GPU CPUs and memory on every server it spans."""
    free_gpu, free_cpu, free_mem, slot_val, part_start, part, log, saved, count, index = (
        L[0], L[1], L[2], L[4], L[5], L[6], L[8], L[9], L[10], L[13]
    )
    first, end = part_start[slot], part_start[slot + 1]
    if count[UNDO]:
        e = count[N_LOG]
        at = count[N_SAVED]
        log[KIND, e] = RESIZE
        log[LOG_SLOT, e] = slot
        log[SAVED_AT, e] = at
        saved[at] = slot_val[CPU, slot]
        saved[at + 1] = slot_val[MEM, slot]
        saved[at + 2] = slot_val[TPUT, slot]
        at += 3
        for p in range(first, end):
            s = part[SERVER, p]
            saved[at] = free_cpu[s]
            saved[at + 1] = free_mem[s]
            at += 2
        count[N_LOG] = e + 1
        count[N_SAVED] = at
    d_cpu = slot_val[CPU, slot] - cpu
    d_mem = slot_val[MEM, slot] - mem
    for p in range(first, end):
        s = part[SERVER, p]
        n = part[GPUS, p]
        free_cpu[s] += n * d_cpu
        free_mem[s] += n * d_mem
        touch(free_gpu, free_cpu, free_mem, index, s)
    slot_val[CPU, slot] = cpu
    slot_val[MEM, slot] = mem
    slot_val[TPUT, slot] = tput


@kernel
def rollback(L, mark):
    """Undo every grant and resize logged since ``mark`` (a log length), restoring the exact old values."""
    free_gpu, free_cpu, free_mem, slot_job, slot_val, part_start, part, head, log, saved, count, found, _, index = L
    e = count[N_LOG]
    # Many entries (a large cluster re-placing a long tail): the index is rebuilt once at the end
    # rather than brought up to date entry by entry.
    leaves = index.shape[0] // 2
    depth = 1
    while (1 << depth) < leaves:
        depth += 1
    bulk = (e - mark) * depth > leaves
    while e > mark:
        e -= 1
        slot = log[LOG_SLOT, e]
        at = log[SAVED_AT, e]
        first, end = part_start[slot], part_start[slot + 1]
        if log[KIND, e] == GRANT:  # the last slot: its parts are the last parts
            count[FREE_TOTAL] = int(saved[at])
            a = at + 1
            for p in range(first, end):
                s = part[SERVER, p]
                free_gpu[s] = int(saved[a])
                free_cpu[s] = saved[a + 1]
                free_mem[s] = saved[a + 2]
                head[s] = part[PREV, p]
                if not bulk:
                    touch(free_gpu, free_cpu, free_mem, index, s)
                if s < count[FIRST_OPEN]:  # it had a free GPU before the grant
                    count[FIRST_OPEN] = s
                a += 3
            count[N_SLOTS] = slot
            count[N_PARTS] = first
        else:
            slot_val[CPU, slot] = saved[at]
            slot_val[MEM, slot] = saved[at + 1]
            slot_val[TPUT, slot] = saved[at + 2]
            a = at + 3
            for p in range(first, end):
                s = part[SERVER, p]
                free_cpu[s] = saved[a]
                free_mem[s] = saved[a + 1]
                if not bulk:
                    touch(free_gpu, free_cpu, free_mem, index, s)
                a += 2
        count[N_SAVED] = at
    count[N_LOG] = e
    if bulk:
        rebuild(free_gpu, free_cpu, free_mem, index)


#: Requests that found no room, remembered within one :func:`grant_in_order` call.
_FAILED_KEPT = 32


@kernel
def grant_in_order(L, order, gpus, cpu, mem, tput, per_job):
    """Grant the jobs of ``order`` in turn where they fit, at (cpu[j], mem[j]) per GPU – or (cpu[0], mem[0]) for
    every job when not ``per_job`` – and throughput ``tput[j]``; stops when no GPU is free (Fair, Greedy).

    Grants only take room, so a request that found none fails again, and so does any asking for at least as
    much of everything: up to :data:`_FAILED_KEPT` failed requests are remembered and such jobs skipped without
    a search (under Greedy, CPUs or memory often run out before GPUs, and every waiting job was searched for).
    """
    count = L[10]
    failed = np.empty((_FAILED_KEPT, 3))
    n_failed = 0
    for i in range(order.size):
        if count[FREE_TOTAL] == 0:
            break
        j = order[i]
        g = gpus[j]
        c = cpu[j] if per_job else cpu[0]
        m = mem[j] if per_job else mem[0]
        hopeless = False
        for k in range(n_failed):
            if failed[k, 0] <= g and failed[k, 1] <= c and failed[k, 2] <= m:
                hopeless = True
                break
        if hopeless:
            continue
        n = find(L, g, c, m)
        if n:
            grant(L, j, n, c, m, tput[j], c, m, tput[j])
        elif n_failed < _FAILED_KEPT:
            failed[n_failed, 0] = g
            failed[n_failed, 1] = c
            failed[n_failed, 2] = m
            n_failed += 1
