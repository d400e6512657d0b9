"""The reward: job time in the system between decisions, so that an episode's return is −ΣJCT / scale."""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from synergy_gym.sim import kernels
from synergy_gym.sim.job_table import JobTable


class SystemTimeMeter:
    """Sum over jobs of the time they spent in the system (arrived, not finished) up to any instant.

    Finished jobs count with their JCT; the rest with ``t − arrival``. The reward of a step
    is minus what the sum grew by since the last step, divided by ``scale``.
    """

    def __init__(self, jobs: JobTable, scale: float) -> None:
        self.jobs = jobs
        self.scale = scale
        self._arrival_prefix = np.concatenate([[0.0], np.cumsum(jobs.arrival_s)])
        self._jct_sum = 0.0
        self._arrival_sum = 0.0
        self.finished = 0
        self._charged = 0.0

    def record_finished(self, finished: np.ndarray) -> None:
        jobs = self.jobs
        self.finished += int(finished.size)
        jct, arrival_sum = kernels.finished_sums(jobs.finish_s, jobs.arrival_s, finished)
        self._jct_sum += jct
        self._arrival_sum += arrival_sum

    def charged_until(self, t: float) -> float:
        """Job-seconds in the system up to ``t``."""
        arrived = bisect_right(self.jobs.arrival_l, t)  # the arrival times as a list: no numpy call per step
        in_system = arrived - self.finished
        return self._jct_sum + in_system * t - (self._arrival_prefix[arrived] - self._arrival_sum)

    def reward_until(self, t: float) -> float:
        """Minus the job time charged since the last call, divided by ``scale``."""
        charged = self.charged_until(t)
        reward = -(charged - self._charged) / self.scale
        self._charged = charged
        return reward
