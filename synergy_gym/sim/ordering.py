"""Ordering policies: which runnable jobs are served first each round.

An ordering returns the runnable jobs sorted by its key, ascending, with ties
broken by arrival. Orderings with a starvation guard first serve any job that
has not run for ``starvation_s`` (1,000 hours by default, as in the paper's
simulator); once bumped, a job keeps its priority.

``fifo``  arrival time.
``srtf``  remaining run time: remaining iterations × iteration time, divided
          by the throughput the mechanism grants the job at best when it gives
          targets (greedy, tune, opt: :meth:`JobTable.planned`) and by its fair-share
          throughput otherwise.
``las``   least attained service: seconds of service received × GPUs.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from synergy_gym.sim.job_table import JobTable


class Ordering(Protocol):
    name: str
    #: True if the relative order of runnable jobs changes only when jobs arrive
    #: or finish (the simulator then skips rounds in which nothing changes).
    static: bool
    #: True if jobs not run for the starvation limit are served first.
    starvation_guard: bool

    def order(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        """``runnable`` (indices in arrival order) sorted by this policy."""


class FIFO:
    name = "fifo"
    static = True
    starvation_guard = False

    def order(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        return runnable


class KeyOrdering:
    """Base for orderings by a per-job key, with the starvation guard."""

    name = "key"
    static = False
    starvation_guard = True

    def key(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        raise NotImplementedError

    def order(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        key = self.key(jobs, runnable, now, uses_targets)
        # lexsort is stable and ``runnable`` is in arrival order: ties keep it.
        return runnable[np.lexsort((key, ~jobs.priority[runnable]))]


class SRTF(KeyOrdering):
    name = "srtf"

    def key(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        tput = jobs.planned(runnable)[2] if uses_targets else jobs.tput_fair[runnable]
        remaining = jobs.total_iters[runnable] - jobs.executed[runnable]
        return remaining * jobs.iter_time_s[runnable] / tput


class LAS(KeyOrdering):
    name = "las"

    def key(self, jobs: JobTable, runnable: np.ndarray, now: float, uses_targets: bool) -> np.ndarray:
        return jobs.attained_s[runnable] * jobs.gpus[runnable]


ORDERINGS: dict[str, type] = {"fifo": FIFO, "srtf": SRTF, "las": LAS}
