"""The decision loop's compiled steps: the waiting jobs, the slots and the action mask, kept in per-episode buffers.

The environment keeps its job lists (waiting jobs, their fits, the slots, the running jobs in
admission order) in buffers allocated at ``reset`` (:class:`~synergy_gym.env.types.EpisodeState`),
each with its length; the kernels here update them in place and return lengths, so that a step
allocates no array for them and returns none from compiled code. Without numba they run as plain
Python, with the same results.
"""

from __future__ import annotations

from synergy_gym.sim.compiled import kernel


@kernel
def waiting_jobs(runnable, holds, out):
    """Write the ``runnable`` jobs that hold no GPUs (``holds``) to ``out``, in order; returns how many."""
    m = 0
    for i in range(runnable.size):
        j = runnable[i]
        if not holds[j]:
            out[m] = j
            m += 1
    return m


@kernel
def offer(waiting, m, drop, gpus, free, level_valid, max_queue, slots_offered, fits, slots, mask):
    """Take job ``drop`` (−1: none) out of ``waiting[:m]`` (order kept), then offer the rest.

    Fills ``fits[:m']`` (whose GPUs fit in ``free``) and ``slots`` (the first ``max_queue`` of
    them); when any fits, ``mask`` gets the valid actions (the first ``slots_offered`` slots'
    valid levels in ``level_valid``, and stop, the last action). Returns (m', slots filled).
    """
    if drop >= 0:
        w = 0
        for i in range(m):
            j = waiting[i]
            if j != drop:
                waiting[w] = j
                w += 1
        m = w
    k = 0
    for i in range(m):
        f = gpus[waiting[i]] <= free
        fits[i] = f
        if f and k < max_queue:
            slots[k] = waiting[i]
            k += 1
    if k:
        n_levels = level_valid.shape[1]
        mask[:] = 0
        for q in range(min(k, slots_offered)):
            j = slots[q]
            for lv in range(n_levels):
                mask[q * n_levels + lv] = level_valid[j, lv]
        mask[mask.size - 1] = 1
    return m, k


@kernel
def keep_held(held, n, holds):
    """Drop from ``held[:n]`` the jobs that no longer hold GPUs (``holds``), order kept; returns how many are left."""
    w = 0
    for i in range(n):
        j = held[i]
        if holds[j]:
            held[w] = j
            w += 1
    return w


@kernel
def offer_all(waiting, m, drop, gpus, free, level_valid, max_queue, slots_offered, ahead, n_preemptable, fits, slots,
              mask):
    """:func:`offer` for preemptive mode deciding only changes: every waiting job gets a slot (the first
    ``max_queue``, arrival order); the first ``slots_offered`` of those whose GPUs fit in ``free``
    get their valid levels in ``mask`` (and, when ``ahead``, the same in the ahead block that
    follows the admissions); then the preemption actions of the first ``n_preemptable`` running
    rows, and stop.

    Returns (m', slots filled, slots whose job fits, offered slots whose job fits).
    """
    if drop >= 0:
        w = 0
        for i in range(m):
            j = waiting[i]
            if j != drop:
                waiting[w] = j
                w += 1
        m = w
    n_levels = level_valid.shape[1]
    mask[:] = 0
    k = k_fit = k_offered = 0
    for i in range(m):
        f = gpus[waiting[i]] <= free
        fits[i] = f
        if k < max_queue:
            slots[k] = waiting[i]
            if f:
                k_fit += 1
                if k_offered < slots_offered:  # agent_orders=False: the earliest arrival that fits
                    k_offered += 1
                    for lv in range(n_levels):
                        mask[k * n_levels + lv] = level_valid[waiting[i], lv]
                        if ahead:
                            mask[(max_queue + k) * n_levels + lv] = level_valid[waiting[i], lv]
            k += 1
    first = 2 * max_queue * n_levels
    for r in range(n_preemptable):
        mask[first + r] = 1
    mask[mask.size - 1] = 1
    return m, k, k_fit, k_offered
