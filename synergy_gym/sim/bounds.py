"""Lower bounds on job completion times, to measure how much room a scheduler has.

The *no-waiting bound* gives every job its best-case demand from the round
boundary at or after its arrival, as if it had the cluster to itself, under the
simulator's round timing: a job credited ``floor(round_s / (iter_time /
throughput))`` iterations a round at its demand's throughput needs
``ceil(total_iters / that)`` rounds. No scheduler that gives a job at most its
demand (fair, greedy, Tune, OPT, the environment) finishes it earlier, so the
bound's mean JCT is below every policy's on the same workload.
"""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.validation import check_positive
from synergy_gym.sim.workload import Workload


def no_wait_jct_s(workload: Workload, cluster: ClusterSpec, round_s: float = 300.0) -> np.ndarray:
    """Per job (in the workload's order): its JCT in seconds with its demand and no waiting."""
    round_s = check_positive("round_s", round_s, unit="seconds")
    jobs = JobTable(cluster, workload)
    start = np.ceil(jobs.arrival_s / round_s) * round_s
    start = np.where(start < jobs.arrival_s, start + round_s, start)  # guard against t / r rounding down
    per_round = np.floor(round_s / (jobs.iter_time_s / jobs.tput_target))
    rounds = np.ceil(jobs.total_iters / per_round)
    return start + rounds * round_s - jobs.arrival_s
