"""The paper's other orderings: DRF, Tetris and FTF (Themis finish-time fairness).

They implement the core's :class:`synergy_gym.sim.ordering.Ordering` protocol, so
any of them combines with any allocation mechanism (``drf+greedy``,
``tetris+tune``, ``ftf+opt``, …). All sort ascending by their key with ties by
arrival, after the starvation guard (a job not run for 1,000 hours goes
first), as in the paper's simulator. A job's *demand* is its target (its
best-case CPUs and memory per GPU) times its GPUs; its remaining duration is
remaining iterations × iteration time, divided by the throughput at its target
when the mechanism gives targets (greedy, tune, opt) and at the fair share
otherwise. Under tune and opt, which never run a job below its fallback, a
target slower than the fallback (a trace's request below the fair share) counts
as the fallback, demand and throughput (:meth:`JobTable.planned`).

``drf``      Dominant Resource Fairness: the largest of the job's GPU, CPU and
             memory demand as shares of the cluster.
``tetris``   remaining duration × (GPU + CPU + memory demand as shares of the
             cluster), smallest first.
``ftf``      Themis finish-time fairness ρ = (now − arrival + remaining
             duration) / duration of the whole job at the fair share: the job
             that is furthest behind (highest ρ) goes first, as Themis serves
             it. The paper's simulator sorts ρ ascending instead – it serves
             the job *least* behind first; that order is kept as ``ftf_ref``
             for comparison with its published numbers.
"""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.ordering import KeyOrdering


def _ranked_at(jobs: JobTable, runnable: np.ndarray, uses_targets: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(CPUs, GB per GPU, throughput) the jobs are ranked at: :meth:`JobTable.planned`, with the fair share's
    throughput where the mechanism gives no targets."""
    cpu, mem, tput = jobs.planned(runnable)
    return cpu, mem, tput if uses_targets else jobs.tput_fair[runnable]


def _remaining_s(jobs: JobTable, runnable: np.ndarray, tput: np.ndarray) -> np.ndarray:
    return (jobs.total_iters[runnable] - jobs.executed[runnable]) * jobs.iter_time_s[runnable] / tput


def _demand_shares(
    jobs: JobTable, runnable: np.ndarray, cpu: np.ndarray, mem: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = jobs.cluster
    g = jobs.gpus[runnable].astype(float)
    return g / c.total_gpus, g * cpu / c.total_cpus, g * mem / c.total_mem_gb


class DRF(KeyOrdering):
    name = "drf"

    def key(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        cpu, mem, _ = jobs.planned(runnable)
        gpu_share, cpu_share, mem_share = _demand_shares(jobs, runnable, cpu, mem)
        return np.maximum(np.maximum(gpu_share, cpu_share), mem_share)


class Tetris(KeyOrdering):
    name = "tetris"

    def key(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        cpu, mem, tput = _ranked_at(jobs, runnable, uses_targets)
        gpu_share, cpu_share, mem_share = _demand_shares(jobs, runnable, cpu, mem)
        return _remaining_s(jobs, runnable, tput) * (gpu_share + cpu_share + mem_share)


def finish_time_fairness(jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
    """Themis's ρ: shared-cluster finish time over isolated (fair-share) run time."""
    ideal = jobs.total_iters[runnable] * jobs.iter_time_s[runnable] / jobs.tput_fair[runnable]
    remaining = _remaining_s(jobs, runnable, _ranked_at(jobs, runnable, uses_targets)[2])
    return (now - jobs.arrival_s[runnable] + remaining) / ideal


class FTF(KeyOrdering):
    """Highest finish-time fairness ratio first (Themis)."""

    name = "ftf"

    def key(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        return -finish_time_fairness(jobs, runnable, now, uses_targets)


class FTFReference(KeyOrdering):
    """Lowest ratio first, as the paper's simulator sorts it."""

    name = "ftf_ref"

    def key(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        return finish_time_fairness(jobs, runnable, now, uses_targets)


EXTRA_ORDERINGS: dict[str, type[KeyOrdering]] = {"drf": DRF, "tetris": Tetris, "ftf": FTF, "ftf_ref": FTFReference}
