"""The GPU-count mix of real jobs, from the Microsoft Philly trace.

Counts of jobs by requested GPUs in the Philly-derived job trace
(Microsoft Philly, August–December 2017, CC BY 4.0, as prepared in the Sia
artifact; 82,247 jobs). The synthetic generator draws multi-GPU workloads from
this mix.
"""

from __future__ import annotations

import numpy as np

from synergy_gym.errors import WorkloadError

PHILLY_GPU_COUNTS: dict[int, int] = {
    1: 76627,
    2: 1818,
    4: 1870,
    8: 1643,
    12: 7,
    16: 199,
    24: 7,
    32: 67,
    64: 6,
    128: 3,
}


def gpu_mix(max_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """GPU counts up to ``max_gpus`` and their probabilities (renormalised)."""
    counts = np.array([g for g in PHILLY_GPU_COUNTS if g <= max_gpus], dtype=np.int64)
    if counts.size == 0:
        raise WorkloadError(f"max_gpus={max_gpus} admits no GPU count of the Philly mix")
    weights = np.array([PHILLY_GPU_COUNTS[int(g)] for g in counts], dtype=float)
    return counts, weights / weights.sum()
