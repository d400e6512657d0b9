"""Compiled kernels for the per-step arithmetic on a few dozen jobs.

An environment step does a few dozen small array computations (the slots and
the action mask, the slots' rows, the running jobs' summary, a stretch of
rounds, the jobs that finished). With numpy each would be a handful of calls on
arrays of 1–100 elements, so the time would go to call overhead; here each is
one loop compiled by `numba <https://numba.pydata.org>`_. They are the only
implementation: the simulator (:mod:`synergy_gym.sim.simulator`), the
environment's observation builder, decision loop and reward meter
(:mod:`synergy_gym.env`) call them directly.

Without numba installed the same functions run as plain Python (correct, and
slow): :func:`~synergy_gym.sim.compiled.kernel` then returns them unchanged.
Sums follow numpy's: where a 1-D array is summed the kernels use
:func:`pairwise_sum`, numpy's pairwise summation, so that results are those of
the numpy code they replaced, bit for bit (the golden files of ``tests/`` were
recorded before them).

Compiled code is cached on disk in a per-user folder, never inside the installed
package (:mod:`synergy_gym.sim.compiled`), so only the first process on a machine
pays the compilation (about 2 s; loading takes about 0.25 s).
"""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.compiled import kernel
from synergy_gym.sim.job_table import ATTAINED, EXECUTED, ITER, LAST_END, START, TOTAL

#: Observation constants (re-exported by :mod:`synergy_gym.env.observation`): bins of its
#: histograms, and durations enter as h / (h + TIME_SCALE_H).
HIST_BINS = 5
TIME_SCALE_H = 10.0
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


# -- observation ---------------------------------------------------------------------------------
@kernel
def running_features(idx, tput, running_static, progress, bin_scale, total_gpus, speedup_max):
    """The ``running`` observation (see ``ObservationBuilder.running_features``) of the jobs ``idx`` at ``tput``."""
    n = idx.size
    bins = HIST_BINS
    out = np.zeros(2 + 2 * bins, dtype=np.float32)
    if n == 0:
        return out
    counts = np.zeros(2 * bins, dtype=np.int64)
    weighted = np.empty(n)
    gpu_sum = np.empty(n)
    for i in range(n):
        j = idx[i]
        t = tput[i]
        speedup = t * running_static[j, 1]
        g = running_static[j, 0]
        weighted[i] = g * speedup
        gpu_sum[i] = g
        left_h = (progress[j, TOTAL] - progress[j, EXECUTED]) * running_static[j, 2] / t
        b = int((speedup - 1.0) * bin_scale)  # truncates, as numpy's cast to int64
        counts[min(b, bins - 1)] += 1
        b = int(left_h / (left_h + TIME_SCALE_H) * bins)
        counts[bins + min(b, bins - 1)] += 1
    out[0] = n / (n + total_gpus)
    out[1] = min(pairwise_sum(weighted) / pairwise_sum(gpu_sum), speedup_max)
    for k in range(2 * bins):
        out[2 + k] = counts[k] / n
    return out


@kernel
def fresh_slot_rows(slots, fresh_rows, levels, arrival_h, now_h, age_col, slot_obs, slot_levels, slot_mask):
    """Fill the slots' rows of jobs that never ran (only their age changes since arrival)."""
    n_features = fresh_rows.shape[1]
    n_levels, n_level_features = levels.shape[1], levels.shape[2]
    for q in range(slots.size):
        j = slots[q]
        for c in range(n_features):  # element loops: slice assignment is slow in numba
            slot_obs[q, c] = fresh_rows[j, c]
        age = now_h - arrival_h[j]
        slot_obs[q, age_col] = age / (age + TIME_SCALE_H)
        for lv in range(n_levels):
            for c in range(n_level_features):
                slot_levels[q, lv, c] = levels[j, lv, c]
        slot_mask[q] = 1.0


@kernel
def slot_rows(slots, static, h_per_iter, progress, levels, arrival_h, was_running, now_h, slot_obs, slot_levels, slot_mask):
    """Fill the slots' rows of jobs that may have run (preemptive mode)."""
    n_static = static.shape[1]
    n_levels, n_level_features = levels.shape[1], levels.shape[2]
    for q in range(slots.size):
        j = slots[q]
        total = progress[j, TOTAL]
        left = total - progress[j, EXECUTED]
        for c in range(n_static):
            slot_obs[q, c] = static[j, c]
        slot_obs[q, n_static] = left / total
        x = left * h_per_iter[j, 0]
        slot_obs[q, n_static + 1] = x / (x + TIME_SCALE_H)
        x = left * h_per_iter[j, 1]
        slot_obs[q, n_static + 2] = x / (x + TIME_SCALE_H)
        x = now_h - arrival_h[j]
        slot_obs[q, n_static + 3] = x / (x + TIME_SCALE_H)
        x = progress[j, ATTAINED] / 3600.0
        slot_obs[q, n_static + 4] = x / (x + TIME_SCALE_H)
        slot_obs[q, n_static + 5] = was_running[j]
        for lv in range(n_levels):
            for c in range(n_level_features):
                slot_levels[q, lv, c] = levels[j, lv, c]
        slot_mask[q] = 1.0


@kernel
def cluster_histograms(free, scales, step, out):
    """Fill ``out[1:3]`` (mean free CPUs and memory) and the free-resource histograms ``out[3:3 + 3·bins]``.

    ``free``: free GPUs, CPUs and GB per server (a (3, servers) array); ``scales``: bins per unit of each.
    """
    bins = HIST_BINS
    top = bins - 1
    for k in range(3):
        row = free[k]
        scale = scales[k]
        base = 3 + k * bins
        total = 0.0
        for s in range(len(row)):
            x = row[s] * scale  # free fraction × bins
            if x < 0.0:
                x = 0.0
            elif x > bins:
                x = float(bins)
            total += x
            b = int(x)
            out[base + (b if b < top else top)] += step
        if k:
            out[k] = total * step / bins


@kernel
def demand_features(held, waiting, demand_running, demand):
    """The ``demand`` observation: summed best-case demand of ``held`` and ``waiting`` jobs, as x / (x + 1)."""
    a, b = demand_running.shape[1], demand.shape[1]
    ratio = np.zeros(a + b)
    for i in range(held.size):  # sequential over rows, as numpy's reduction along axis 0
        for c in range(a):
            ratio[c] += demand_running[held[i], c]
    for i in range(waiting.size):
        for c in range(b):
            ratio[a + c] += demand[waiting[i], c]
    out = np.empty(a + b, dtype=np.float32)
    for c in range(a + b):
        out[c] = ratio[c] / (ratio[c] + 1.0)
    return out


@kernel
def queue_rest_features(waiting, fits, k, total_iters, executed, fair_gpu_h_per_iter, total_gpus):
    """The ``queue_rest`` observation: waiting jobs that fit beyond the ``k`` slots, and those that do not fit."""
    n_fit = 0
    for i in range(fits.size):
        if fits[i]:
            n_fit += 1
    n_beyond = max(n_fit - k, 0)
    n_out = waiting.size - n_fit
    work = 0.0
    if n_beyond:
        terms = np.empty(n_beyond)
        seen = m = 0
        for i in range(waiting.size):
            if fits[i]:
                if seen >= k:
                    j = waiting[i]
                    terms[m] = (total_iters[j] - executed[j]) * fair_gpu_h_per_iter[j]
                    m += 1
                seen += 1
        work = pairwise_sum(terms)
    out = np.empty(3, dtype=np.float32)
    out[0] = n_beyond / (n_beyond + total_gpus)
    out[1] = work / (work + TIME_SCALE_H)
    out[2] = n_out / (n_out + total_gpus)
    return out


# -- decisions -----------------------------------------------------------------------------------
@kernel
def offer_slots(waiting, gpus, free, level_valid, max_queue, slots_offered, mask):
    """The waiting jobs whose GPUs fit in ``free`` (``fits``), the first ``max_queue`` of them (the slots)
    and their rows of ``level_valid``; when any fits, ``mask`` is filled with the valid actions
    (the first ``slots_offered`` slots' valid levels, and stop, the last action)."""
    m = waiting.size
    fits = np.empty(m, dtype=np.bool_)
    slots = np.empty(min(m, max_queue), dtype=np.int64)
    k = 0
    for i in range(m):
        f = gpus[waiting[i]] <= free
        fits[i] = f
        if f and k < max_queue:
            slots[k] = waiting[i]
            k += 1
    n_levels = level_valid.shape[1]
    slot_valid = np.empty((k, n_levels), dtype=level_valid.dtype)
    for q in range(k):
        for lv in range(n_levels):
            slot_valid[q, lv] = level_valid[slots[q], lv]
    if k:
        mask[:] = 0
        for q in range(min(k, slots_offered)):
            for lv in range(n_levels):
                mask[q * n_levels + lv] = slot_valid[q, lv]
        mask[mask.size - 1] = 1
    return fits, slots[:k], slot_valid


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


@kernel
def mark_finished(finish_s, measured, runnable, finished, finish_at, end):
    """Set the ``finished`` jobs' finish times to ``finish_at`` (or all to ``end`` when ``finish_at`` is
    empty); returns (the runnable jobs still unfinished, how many finished jobs are measured)."""
    n_measured = 0
    each = finish_at.size > 0
    for i in range(finished.size):
        j = finished[i]
        finish_s[j] = finish_at[i] if each else end
        if measured[j]:
            n_measured += 1
    keep = np.empty(runnable.size, dtype=np.int64)
    k = 0
    for i in range(runnable.size):
        j = runnable[i]
        if np.isnan(finish_s[j]):
            keep[k] = j
            k += 1
    return keep[:k], n_measured
