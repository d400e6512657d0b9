"""Synergy-Tune's placement, compiled: one job (:func:`tune_place`) or a round's walk (:func:`tune_walk`).

:class:`~synergy_gym.sim.allocation.Tune` and the :class:`~synergy_gym.sim.planner.RoundPlanner`
call these on a ledger's arrays (:mod:`synergy_gym.sim.ledger_kernels`); the rules are Tune's, as
:mod:`synergy_gym.sim.allocation` states them. The per-job columns come from
:meth:`~synergy_gym.sim.job_table.JobTable.placement_columns` as ``J`` = (GPUs, target CPUs and GB
per GPU, throughput there, fallback CPUs and GB, throughput there, throughput at the target capped
at the fair share).
"""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.compiled import kernel
from synergy_gym.sim.ledger_kernels import (
    CPU,
    EPS,
    FB_CPU,
    FB_MEM,
    FB_TPUT,
    FIRST_OPEN,
    GPUS,
    MEM,
    N_LOG,
    PREV,
    SLOT,
    find_room,
    grant,
    resize,
)
from synergy_gym.sim.server_index import fewest_free

#: What :func:`tune_walk` stopped at.
WALK_DONE, WALK_BIGGER, WALK_STUCK = 0, 1, 2
#: Rows of :func:`tune_walk`'s record of admitted jobs.
WALK_JOBS, WALK_TAKEN, WALK_MARKS = range(3)


@kernel
def tune_place(L, j, g, tc, tm, tt, cpu, mem, tput, cut_tput):
    """Place admitted job ``j`` (``g`` GPUs, free in the ledger): its target (tc, tm, tt) where it fits, else its
    fallback (cpu, mem, tput), reclaiming excess from over-provisioned jobs; returns its slot (−1: no room,
    impossible by construction).

    ``cut_tput``: the throughput at ``(min(cpu, tc), min(mem, tm))``, what a job granted its target is
    cut back to when its fallback asks for more of something than its target (a fallback raised to
    the fair share: then this is the target capped at the fair share, ``JobTable.tput_capped``).
    """
    free_gpu, free_cpu, free_mem, count, found, index = L[0], L[1], L[2], L[10], L[11], L[13]
    fb_cpu, fb_mem, fb_tput = cpu, mem, tput
    n = 0
    if tt >= tput:
        n = find_room(free_gpu, free_cpu, free_mem, count, found, index, g, tc, tm)
        if n:
            if cpu > tc or mem > tm:  # never cut a grant back to more of anything than it holds
                fb_cpu, fb_mem, fb_tput = min(cpu, tc), min(mem, tm), cut_tput
            cpu, mem, tput = tc, tm, tt  # granted: the target
    if n == 0 and (cpu != tc or mem != tm or tt < tput):
        n = find_room(free_gpu, free_cpu, free_mem, count, found, index, g, cpu, mem)
    if n == 0:
        _reclaim(L, g, cpu, mem)
        n = find_room(free_gpu, free_cpu, free_mem, count, found, index, g, cpu, mem)
    if n == 0:
        # The reference's choice of servers could not make room (a multi-GPU job placed
        # first-fit across servers): downgrade every over-provisioned job on servers with
        # free GPUs, which always leaves a fallback share per free GPU.
        for s in range(count[FIRST_OPEN], free_gpu.size):
            if free_gpu[s]:
                _downgrade_on(L, s, np.inf, np.inf)
        n = find_room(free_gpu, free_cpu, free_mem, count, found, index, g, cpu, mem)
        if n == 0:
            return -1
    return grant(L, j, n, cpu, mem, tput, fb_cpu, fb_mem, fb_tput)


@kernel
def _reclaim(L, g, cpu, mem):
    """Downgrade jobs on the servers :func:`reclaim_order` picks until each holds its share of the job."""
    free_gpu, free_cpu, free_mem = L[0], L[1], L[2]
    first_open = L[10][FIRST_OPEN]
    if g == 1:  # the common case, without the arrays: the server with the fewest free GPUs
        best = fewest_free(L[13])
        if best >= 0:
            need_cpu = cpu - free_cpu[best]
            need_mem = mem - free_mem[best]
            if need_cpu > EPS or need_mem > EPS:
                _downgrade_on(L, best, need_cpu, need_mem)
        return
    servers, take = reclaim_order(free_gpu, g, first_open)
    for i in range(servers.size):
        s = servers[i]
        n = take[i]
        need_cpu = n * cpu - free_cpu[s]
        need_mem = n * mem - free_mem[s]
        if need_cpu > EPS or need_mem > EPS:
            _downgrade_on(L, s, need_cpu, need_mem)


@kernel
def reclaim_order(free_gpu, gpus, first_open):
    """Servers on which Tune makes room for a ``gpus``-GPU job, and GPUs on each.

    A multi-GPU job prefers the first server with enough free GPUs; otherwise servers with the
    fewest free GPUs are taken first (ties by index). Servers before ``first_open`` have no free GPU.
    """
    if gpus > 1:
        for s in range(first_open, free_gpu.size):
            if free_gpu[s] >= gpus:
                return np.array([s], dtype=np.int64), np.array([gpus], dtype=np.int64)
    open_ = np.flatnonzero(free_gpu > 0)
    ranked = open_[np.argsort(free_gpu[open_], kind="mergesort")]  # fewest free first, ties by index
    servers = np.empty(ranked.size, dtype=np.int64)
    take = np.empty(ranked.size, dtype=np.int64)
    need = gpus
    k = 0
    for s in ranked:
        if need <= 0:
            break
        t = min(free_gpu[s], need)
        servers[k] = s
        take[k] = t
        need -= t
        k += 1
    return servers[:k], take[:k]


@kernel
def _downgrade_on(L, server, need_cpu, need_mem):
    """Cut jobs on ``server`` back to their fallback until (need_cpu, need_mem) is freed.

    Jobs over their fallback go first if they sit on this server alone, then those with the most
    CPUs per GPU, then the most memory per GPU (ties in grant order). Any excess counts, however
    small: targets from a solver carry round-off.
    """
    slot_val, part_start, part, head, scratch = L[4], L[5], L[6], L[7], L[12]
    slots, gpus = scratch[0], scratch[1]
    # The server's grants over their fallback, in grant order (its chain runs newest first).
    m = 0
    p = head[server]
    while p >= 0:
        slot = part[SLOT, p]
        if slot_val[CPU, slot] > slot_val[FB_CPU, slot] or slot_val[MEM, slot] > slot_val[FB_MEM, slot]:
            m += 1
        p = part[PREV, p]
    i = m
    p = head[server]
    while p >= 0:
        slot = part[SLOT, p]
        if slot_val[CPU, slot] > slot_val[FB_CPU, slot] or slot_val[MEM, slot] > slot_val[FB_MEM, slot]:
            i -= 1
            slots[i] = slot
            gpus[i] = part[GPUS, p]
        p = part[PREV, p]
    # A stable insertion sort by (parts, -CPUs, -memory).
    for a in range(1, m):
        slot, n = slots[a], gpus[a]
        b = a
        while b > 0 and _before(slot_val, part_start, slot, slots[b - 1]):
            slots[b] = slots[b - 1]
            gpus[b] = gpus[b - 1]
            b -= 1
        slots[b] = slot
        gpus[b] = n
    for i in range(m):
        if need_cpu <= EPS and need_mem <= EPS:
            return
        slot, n = slots[i], gpus[i]
        fb_cpu, fb_mem, fb_tput = slot_val[FB_CPU, slot], slot_val[FB_MEM, slot], slot_val[FB_TPUT, slot]
        extra_cpu = n * (slot_val[CPU, slot] - fb_cpu)
        extra_mem = n * (slot_val[MEM, slot] - fb_mem)
        if (need_cpu > EPS and extra_cpu > 0) or (need_mem > EPS and extra_mem > 0):
            resize(L, slot, fb_cpu, fb_mem, fb_tput)
            need_cpu -= extra_cpu
            need_mem -= extra_mem


@kernel
def _before(slot_val, part_start, a, b):
    """Whether slot ``a`` is cut back before slot ``b``: fewer parts, then more CPUs, then more memory per GPU."""
    na = part_start[a + 1] - part_start[a]
    nb = part_start[b + 1] - part_start[b]
    if na != nb:
        return na < nb
    if slot_val[CPU, a] != slot_val[CPU, b]:
        return slot_val[CPU, a] > slot_val[CPU, b]
    return slot_val[MEM, a] > slot_val[MEM, b]


@kernel
def tune_walk(L, J, order, pos, free, total, last_gpus, place, out, k):
    """Admit the jobs of ``order`` from ``pos`` whose GPUs fit in ``free`` (backfilling), placing each at once when
    ``place`` (they then come in non-increasing GPU count, which is Tune's order).

    Writes per admitted job, from position ``k`` of ``out`` on, its index (row :data:`WALK_JOBS`), the
    GPUs taken before it (:data:`WALK_TAKEN`) and the ledger's undo mark before its placement
    (:data:`WALK_MARKS`). Returns (pos, free, last_gpus, k, what it stopped at): the order's end or no
    free GPU (:data:`WALK_DONE`), a job with more GPUs than the one before it while placing
    (:data:`WALK_BIGGER`, not admitted: ``pos`` is at it) or a job that found no room
    (:data:`WALK_STUCK`, admitted last).
    """
    gpus, tc, tm, tt, fc, fm, ft, cut = J
    count = L[10]
    n = order.size
    while pos < n and free > 0:
        j = order[pos]
        g = gpus[j]
        if g <= free:
            if place and g > last_gpus:
                return pos, free, last_gpus, k, WALK_BIGGER
            out[WALK_JOBS, k] = j
            out[WALK_TAKEN, k] = total - free
            out[WALK_MARKS, k] = count[N_LOG]
            k += 1
            free -= g
            last_gpus = g
            if place and tune_place(L, j, g, tc[j], tm[j], tt[j], fc[j], fm[j], ft[j], cut[j]) < 0:
                return pos + 1, free, last_gpus, k, WALK_STUCK
        pos += 1
    return pos, free, last_gpus, k, WALK_DONE


@kernel
def keep_in_step(order, pos, free, total, gpus, prev, prev_n, rows, i, last_gpus):
    """Admit from ``pos`` on, as :func:`tune_walk` would, the jobs that continue last round's admitted jobs
    (``prev``, ``prev_n`` of them) from position ``i`` on, copying their records (and so their placement) to
    ``rows``; jobs whose GPUs do not fit in ``free`` are passed over, as in the walk.

    Stops at the order's end, when no GPU is free, or before the first job that fits but is not last
    round's next one (or has more GPUs than the one before it). Returns (pos, free, i, last_gpus).
    """
    n = order.size
    while pos < n and free > 0:
        j = order[pos]
        g = gpus[j]
        if g <= free:
            if i >= prev_n or prev[WALK_JOBS, i] != j or (i > 0 and g > last_gpus):
                break
            rows[WALK_JOBS, i] = j
            rows[WALK_TAKEN, i] = total - free
            rows[WALK_MARKS, i] = prev[WALK_MARKS, i]
            i += 1
            free -= g
            last_gpus = g
        pos += 1
    return pos, free, i, last_gpus


@kernel
def tune_place_all(L, J, ranked):
    """:func:`tune_place` each job of ``ranked`` (Tune's order) at its own target; returns −1, or the first job
    that found no room."""
    gpus, tc, tm, tt, fc, fm, ft, cut = J
    for i in range(ranked.size):
        j = ranked[i]
        if tune_place(L, j, gpus[j], tc[j], tm[j], tt[j], fc[j], fm[j], ft[j], cut[j]) < 0:
            return j
    return -1
