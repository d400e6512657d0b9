"""The observation's parts that only ``preemptive=True, redecide="changes"`` has, compiled.

:func:`fill_running_rows` writes ``running_slots`` and ``running_mask`` (the running rows: each
job's slot features but ``was_running``, the run time left at its grant, its level, and what
preempting it frees) and :func:`fill_slot_fits` writes ``slot_fits`` (per slot and level,
whether the servers have room for the job there now), into the observation's buffer at the
offsets :class:`~synergy_gym.env.observation.ObservationBuilder` gives. Values are computed in
float64 and rounded to float32 once. Without numba they run as plain Python, with the same results.
"""

from __future__ import annotations

import math

from synergy_gym.env.observe_kernel import ARRIVAL_H, DEMAND_H, FAIR_H, GPUS, INV_FAIR_TPUT, ITER_H, TIME_SCALE_H
from synergy_gym.sim.compiled import kernel
from synergy_gym.sim.job_table import ATTAINED, EXECUTED, TOTAL

#: Columns of a running row (:data:`synergy_gym.env.observation.RUNNING_SLOT_FEATURES`).
ROW_WIDTH = 16


@kernel
def _squash(h):
    return h / (h + TIME_SCALE_H)


@kernel
def fill_running_rows(buf, rows_base, mask_base, running, fresh_rows, job_table, progress, now_h, ledger_jobs,
                      ledger_cpu, ledger_mem, ledger_tput, levels, level, total_cpus, total_mem):
    """``running_slots`` (at ``rows_base``) and ``running_mask`` (at ``mask_base``) of the jobs ``running``.

    ``ledger_jobs``, ``ledger_cpu``, ``ledger_mem``, ``ledger_tput``: the ledger's grants (a job
    without one – placed provisionally later in the event – runs at its fair-share throughput
    and frees nothing); ``levels``: per job and level the level features; ``level``: per job its level.
    """
    for r in range(running.size):
        j = running[r]
        row = rows_base + r * ROW_WIDTH
        for c in range(5):  # gpu_share, log_gpus, task one-hot
            buf[row + c] = fresh_rows[j, c]
        total = progress[j, TOTAL]
        left = total - progress[j, EXECUTED]
        buf[row + 5] = left / total
        buf[row + 6] = _squash(left * job_table[j, FAIR_H])
        buf[row + 7] = _squash(left * job_table[j, DEMAND_H])
        buf[row + 8] = _squash(now_h - job_table[j, ARRIVAL_H])
        buf[row + 9] = _squash(progress[j, ATTAINED] / 3600.0)
        g = -1
        for k in range(ledger_jobs.size):
            if ledger_jobs[k] == j:
                g = k
                break
        tput = ledger_tput[g] if g >= 0 else 1.0 / job_table[j, INV_FAIR_TPUT]
        buf[row + 10] = _squash(left * job_table[j, ITER_H] / tput)
        lv = max(level[j], 0)
        for c in range(3):
            buf[row + 11 + c] = levels[j, lv, c]
        if g >= 0:
            buf[row + 14] = job_table[j, GPUS] * ledger_cpu[g] / total_cpus
            buf[row + 15] = job_table[j, GPUS] * ledger_mem[g] / total_mem
        buf[mask_base + r] = 1.0


@kernel
def fill_slot_fits(buf, base, slots, slot_fit, level_cpu, level_mem, gpus, free_gpu, free_cpu, free_mem):
    """``slot_fits`` at ``base``: per slot and level, whether the slot's job's GPUs fit (``slot_fit[q]``, per
    slot) and the servers, summed, could host all its GPUs at the level – each as many as it has free
    GPUs, and free CPUs and GB for, at the level's CPUs and GB per GPU – so that nothing is taken from a
    running job."""
    n_levels = level_cpu.shape[1]
    eps = 1e-9
    for q in range(slots.size):
        if not slot_fit[q]:
            continue
        j = slots[q]
        for lv in range(n_levels):
            c = max(level_cpu[j, lv], eps)
            m = max(level_mem[j, lv], eps)
            room = 0.0
            for s in range(free_gpu.size):
                room += min(float(free_gpu[s]), min(math.floor((free_cpu[s] + eps) / c), math.floor((free_mem[s] + eps) / m)))
            if room >= gpus[j]:
                buf[base + q * n_levels + lv] = 1.0
