"""The observation as one compiled pass: every part of it written into one fresh float32 buffer.

:class:`~synergy_gym.env.observation.ObservationBuilder` allocates one buffer per observation
and hands out its parts as views (``slots``, ``slot_levels``, …, ``action_mask``); one call of
:func:`fill_observation` fills them all. A kernel call costs about a microsecond whatever it
does and a returned array about as much again, so one call that writes into its argument
replaces the six (and their numpy glue) that built the parts one by one.

The arithmetic is that of the numpy code the kernels replaced, operation for operation:
sums are sequential where numpy summed along an axis and :func:`~synergy_gym.sim.kernels.pairwise_sum`
where it reduced a 1-D array, values are computed in float64 and rounded to float32 once,
as ``astype(np.float32)`` did. Without numba the same function runs as plain Python, with
the same results (``tests/sim/test_kernels.py``).
"""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.compiled import kernel
from synergy_gym.sim.job_table import ATTAINED, EXECUTED, TOTAL
from synergy_gym.sim.kernels import pairwise_sum

#: Bins of the observation's histograms; durations enter observations as h / (h + TIME_SCALE_H).
HIST_BINS = 5
TIME_SCALE_H = 10.0

#: Columns of the per-job float64 table (:attr:`ObservationBuilder.job_table`, jobs × JOB_COLUMNS).
ARRIVAL_H = 0  # arrival, hours
FAIR_H = 1  # hours per iteration at the fair share
DEMAND_H = 2  # hours per iteration at the demand level (the best-case demand, or the fallback Tune grants a slower one)
FAIR_GPU_H = 3  # GPU-hours per iteration at the fair share / cluster GPUs
DEMAND_CPU, DEMAND_MEM, DEMAND_GPUS = 4, 5, 6  # the demand level's CPUs and GB / the cluster's
GPUS = 7  # GPUs, as a float
INV_FAIR_TPUT = 8  # 1 / fair-share throughput
ITER_H = 9  # hours per iteration at throughput 1
JOB_COLUMNS = 10

#: Entries of the offsets array (:func:`layout_offsets`): where each part of the observation starts.
(SLOTS, SLOT_LEVELS, SLOT_MASK, CLUSTER, RUNNING, DEMAND, QUEUE_REST, TIME, ACTION_MASK, END) = range(10)


def layout_offsets(sizes: list[int]) -> np.ndarray:
    """Start of each part in the buffer, in the order of the constants above, and its end."""
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@kernel
def fill_observation(
    buf, offs, slots, never_ran, fresh_rows, levels, job_table, progress, was_running, now_h,
    free_gpu, free_cpu, free_mem, free_scales, free_gpus, total_gpus, run_idx, run_tput, bin_scale, speedup_max,
    held, waiting, fits, time_fraction, mask, n_slots_fit,
):
    """Write the observation into ``buf`` (float32, zeros) at ``offs``.

    ``slots``: the slot jobs; ``never_ran``: every waiting job is as it arrived (non-preemptive),
    so its slot row is its fresh row (``fresh_rows``) but for its age; ``free_gpu``, ``free_cpu``,
    ``free_mem``: free GPUs, CPUs and GB per server (the ledger's); ``free_gpus``: GPUs not taken by the jobs
    admitted so far; ``run_idx``, ``run_tput``: the ledger's grants; ``held``: the jobs admitted
    so far (or running), in admission order; ``waiting`` (arrival order) with ``fits``;
    ``n_slots_fit``: the slots whose job fits (all of them but with ``redecide="changes"``).
    """
    n_waiting = waiting.size
    k = n_slots_fit
    _slot_rows(buf, offs, slots, never_ran, fresh_rows, levels, job_table, progress, was_running, now_h)
    _cluster(buf, offs[CLUSTER], free_gpu, free_cpu, free_mem, free_scales, free_gpus, total_gpus, run_idx.size, n_waiting)
    _running(buf, offs[RUNNING], run_idx, run_tput, job_table, progress, bin_scale, total_gpus, speedup_max)
    _demand(buf, offs[DEMAND], held, waiting, job_table)
    _queue_rest(buf, offs[QUEUE_REST], waiting, fits, k, progress, job_table, total_gpus)
    buf[offs[TIME]] = min(1.0, time_fraction)
    base = offs[ACTION_MASK]
    for a in range(mask.size):
        buf[base + a] = mask[a]


@kernel
def _slot_rows(buf, offs, slots, never_ran, fresh_rows, levels, job_table, progress, was_running, now_h):
    """The slots' rows (``slots``, ``slot_levels``) and ``slot_mask``."""
    n_features = fresh_rows.shape[1]
    n_levels, n_level_features = levels.shape[1], levels.shape[2]
    per_level_row = n_levels * n_level_features
    age_col = n_features - 3  # age, attained, was_running are the last three
    for q in range(slots.size):
        j = slots[q]
        row = offs[SLOTS] + q * n_features
        if never_ran:  # only its age changed since it arrived
            for c in range(n_features):
                buf[row + c] = fresh_rows[j, c]
            age = now_h - job_table[j, ARRIVAL_H]
            buf[row + age_col] = age / (age + TIME_SCALE_H)
        else:
            n_static = n_features - 6
            for c in range(n_static):
                buf[row + c] = fresh_rows[j, c]
            total = progress[j, TOTAL]
            left = total - progress[j, EXECUTED]
            buf[row + n_static] = left / total
            x = left * job_table[j, FAIR_H]
            buf[row + n_static + 1] = x / (x + TIME_SCALE_H)
            x = left * job_table[j, DEMAND_H]
            buf[row + n_static + 2] = x / (x + TIME_SCALE_H)
            x = now_h - job_table[j, ARRIVAL_H]
            buf[row + n_static + 3] = x / (x + TIME_SCALE_H)
            x = progress[j, ATTAINED] / 3600.0
            buf[row + n_static + 4] = x / (x + TIME_SCALE_H)
            buf[row + n_static + 5] = was_running[j]
        row = offs[SLOT_LEVELS] + q * per_level_row
        for lv in range(n_levels):
            for c in range(n_level_features):
                buf[row + lv * n_level_features + c] = levels[j, lv, c]
        buf[offs[SLOT_MASK] + q] = 1.0


@kernel
def _cluster(buf, base, free_gpu, free_cpu, free_mem, scales, free_gpus, total_gpus, n_running, n_waiting):
    """``cluster``: free GPU, CPU and memory fractions, per-server free-resource histograms, jobs running and waiting."""
    bins = HIST_BINS
    out = np.zeros(3 + 3 * bins)  # float64, rounded to float32 once at the end
    out[0] = free_gpus / total_gpus
    _free_histogram(out, 0, free_gpu, scales[0])
    _free_histogram(out, 1, free_cpu, scales[1])
    _free_histogram(out, 2, free_mem, scales[2])
    for c in range(out.size):
        buf[base + c] = out[c]
    buf[base + out.size] = n_running / (n_running + total_gpus)
    buf[base + out.size + 1] = n_waiting / (n_waiting + total_gpus)


@kernel
def _free_histogram(out, k, free, scale):
    """Resource ``k``'s histogram of the servers' ``free`` amounts (× ``scale``: bins per unit) into ``out``, and
    for CPUs and memory (``k`` > 0) the cluster's free fraction."""
    bins = HIST_BINS
    top = bins - 1
    n_servers = free.size
    step = 1.0 / n_servers
    first = 3 + k * bins
    total = 0.0
    for s in range(n_servers):
        x = float(free[s]) * scale  # free fraction × bins
        if x < 0.0:
            x = 0.0
        elif x > bins:
            x = float(bins)
        total += x
        b = int(x)
        out[first + (b if b < top else top)] += step
    if k:
        out[k] = total * step / bins


@kernel
def _running(buf, base, idx, tput, job_table, progress, bin_scale, total_gpus, speedup_max):
    """``running``: how many jobs run, their GPU-weighted mean speed-up, speed-up and run-time-left histograms."""
    n = idx.size
    if n == 0:
        return
    bins = HIST_BINS
    counts = np.zeros(2 * bins, dtype=np.int64)
    weighted = np.empty(n)
    gpu_sum = np.empty(n)
    for i in range(n):
        j = idx[i]
        t = tput[i]
        speedup = t * job_table[j, INV_FAIR_TPUT]
        g = job_table[j, GPUS]
        weighted[i] = g * speedup
        gpu_sum[i] = g
        left_h = (progress[j, TOTAL] - progress[j, EXECUTED]) * job_table[j, ITER_H] / t
        b = int((speedup - 1.0) * bin_scale)  # truncates, as numpy's cast to int64
        counts[min(b, bins - 1)] += 1
        b = int(left_h / (left_h + TIME_SCALE_H) * bins)
        counts[bins + min(b, bins - 1)] += 1
    buf[base] = n / (n + total_gpus)
    buf[base + 1] = min(pairwise_sum(weighted) / pairwise_sum(gpu_sum), speedup_max)
    for c in range(2 * bins):
        buf[base + 2 + c] = counts[c] / n


@kernel
def _demand(buf, base, held, waiting, job_table):
    """``demand``: summed best-case demand of the ``held`` and the ``waiting`` jobs, each ratio x as x / (x + 1)."""
    held_cpu = held_mem = 0.0  # sequential over jobs, as numpy's sum along axis 0
    for i in range(held.size):
        held_cpu += job_table[held[i], DEMAND_CPU]
        held_mem += job_table[held[i], DEMAND_MEM]
    wait_cpu = wait_mem = wait_gpus = 0.0
    for i in range(waiting.size):
        j = waiting[i]
        wait_cpu += job_table[j, DEMAND_CPU]
        wait_mem += job_table[j, DEMAND_MEM]
        wait_gpus += job_table[j, DEMAND_GPUS]
    buf[base] = held_cpu / (held_cpu + 1.0)
    buf[base + 1] = held_mem / (held_mem + 1.0)
    buf[base + 2] = wait_cpu / (wait_cpu + 1.0)
    buf[base + 3] = wait_mem / (wait_mem + 1.0)
    buf[base + 4] = wait_gpus / (wait_gpus + 1.0)


@kernel
def _queue_rest(buf, base, waiting, fits, k, progress, job_table, total_gpus):
    """``queue_rest``: waiting jobs that fit beyond the ``k`` slots (count, work), and those that do not fit."""
    n_fit = 0
    for i in range(waiting.size):
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
                    terms[m] = (progress[j, TOTAL] - progress[j, EXECUTED]) * job_table[j, FAIR_GPU_H]
                    m += 1
                seen += 1
        work = pairwise_sum(terms)
    buf[base] = n_beyond / (n_beyond + total_gpus)
    buf[base + 1] = work / (work + TIME_SCALE_H)
    buf[base + 2] = n_out / (n_out + total_gpus)
