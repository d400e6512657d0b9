"""Compiled kernels for the per-round arithmetic on a few dozen jobs.

A round advances the placed jobs over a stretch of rounds and records the jobs that
finished; the environment's reward sums the finished jobs' times. With numpy each
would be a handful of calls on arrays of 1–100 elements, so the time would go to call
overhead; here each is one loop compiled by `numba <https://numba.pydata.org>`_. They
are the only implementation: the simulator (:mod:`synergy_gym.sim.simulator`) and the
environment's reward meter (:mod:`synergy_gym.env.reward`) call them directly; the
environment's observation and decision loop have theirs in :mod:`synergy_gym.env`
(:mod:`~synergy_gym.env.observe_kernel`, :mod:`~synergy_gym.env.decision_kernels`),
which use :func:`pairwise_sum` from here.

Without numba installed the same functions run as plain Python (correct, and
slow): :func:`~synergy_gym.sim.compiled.kernel` then returns them unchanged.
Sums follow numpy's: where a 1-D array is summed the kernels use
:func:`pairwise_sum`, numpy's pairwise summation, so that results are those of
the numpy code they replaced, bit for bit (the golden files of ``tests/`` were
recorded before them).

Compiled code is cached on disk in a per-user folder, never inside the installed
package (:mod:`synergy_gym.sim.compiled`), so only the first process on a machine
pays the compilation (about 15 s for the simulator's kernels, ledger and placement included;
loading takes about 0.35 s).
"""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.compiled import kernel
from synergy_gym.sim.job_table import ATTAINED, EXECUTED, ITER, LAST_END, START, TOTAL

_PW_BLOCK = 128  # numpy's PW_BLOCKSIZE


@kernel
def pairwise_sum(a):
    """``np.add.reduce(a)`` for a 1-D float64 array, bit for bit: numpy's pairwise summation."""
    n = a.size
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    if n <= _PW_BLOCK:
        r0, r1, r2, r3, r4, r5, r6, r7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
        i = 8
        end = n - n % 8
        while i < end:
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_sum(a[:n2]) + pairwise_sum(a[n2:])


# -- the environment's reward -------------------------------------------------------------------
@kernel
def finished_sums(finish_s, arrival_s, finished):
    """(Σ (finish − arrival), Σ arrival) over ``finished``, each summed as ``np.add.reduce``."""
    m = finished.size
    jct = np.empty(m)
    arrival = np.empty(m)
    for i in range(m):
        j = finished[i]
        arrival[i] = arrival_s[j]
        jct[i] = finish_s[j] - arrival_s[j]
    return pairwise_sum(jct), pairwise_sum(arrival)


# -- simulator -----------------------------------------------------------------------------------
@kernel
def run_rounds(progress, placed, tput, round_s, skippable, has_wait, wait_rounds, has_max, max_rounds, start):
    """Run the placed jobs at ``tput`` for whole rounds from ``start``; returns (the jobs that finish, rounds run).

    It runs one round, or with ``skippable`` until the first job finishes, capped
    (at least one round) at ``wait_rounds`` (an arrival can be admitted then) if
    ``has_wait`` and at ``max_rounds`` if ``has_max``.
    """
    m = placed.size
    per_round = np.empty(m)
    rounds_left = np.empty(m)
    fewest = np.inf
    for i in range(m):
        j = placed[i]
        p = np.floor(round_s / (progress[j, ITER] / tput[i]))
        r = np.ceil((progress[j, TOTAL] - progress[j, EXECUTED]) / p)
        per_round[i] = p
        rounds_left[i] = r
        if r < fewest:
            fewest = r
    n = 1
    if skippable:
        n = int(fewest)
        if has_wait:
            n = max(1, min(n, wait_rounds))
        if has_max:
            n = max(1, min(n, max_rounds))
    duration = n * round_s
    end = start + duration
    finished = np.empty(m, dtype=np.int64)
    k = 0
    for i in range(m):
        j = placed[i]
        executed = progress[j, EXECUTED] + n * per_round[i]
        total = progress[j, TOTAL]
        progress[j, EXECUTED] = total if total < executed else executed
        s = progress[j, START]
        if not s <= start:  # NaN (never ran) or later: this start, as numpy's fmin
            progress[j, START] = start
        progress[j, ATTAINED] += duration
        progress[j, LAST_END] = end
        if rounds_left[i] <= n:
            finished[k] = j
            k += 1
    return finished[:k], n
