"""The episode summary: JCT statistics over all arrived jobs and over the workload's measured window."""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.metrics import JctStats, summarise_jcts
from synergy_gym.sim.simulator import Simulator


def episode_summary(sim: Simulator) -> dict[str, float]:
    """JCT statistics of the episode so far: all arrived jobs, and the workload's measured window.

    A job still unfinished (a truncated episode) counts with its time in the system so far –
    a lower bound on its JCT – so starving jobs until the episode is cut off does not look good;
    so does the makespan, which then runs to the episode's end (a lower bound too).
    """
    jobs = sim.jobs
    done = ~np.isnan(jobs.finish_s)
    arrived = jobs.arrival_s <= sim.now
    unfinished = int(np.count_nonzero(arrived & ~done))
    if unfinished:
        last = float(sim.now)
    elif done.any():
        last = float(np.nanmax(jobs.finish_s))
    else:
        last = float(jobs.arrival_s[0])

    def stats(selected: np.ndarray, prefix: str) -> dict[str, float]:
        s: JctStats = summarise_jcts(jobs.arrival_s, jobs.finish_s, selected, now=sim.now)
        return {f"{prefix}mean_jct_h": s.mean_h, f"{prefix}median_jct_h": s.median_h, f"{prefix}p99_jct_h": s.p99_h}

    return {
        **stats(arrived, ""),
        **stats(arrived & jobs.measured, "window_"),
        "makespan_h": (last - float(jobs.arrival_s[0])) / 3600.0,
        "jobs_finished": int(done.sum()),
        "jobs_unfinished": unfinished,
        "jobs_total": int(jobs.n),
        "episode_rounds": sim.rounds_elapsed,
    }
