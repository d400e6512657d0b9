"""Lower bounds on job completion times, to measure how much room a scheduler has.

The *no-waiting bound* gives every job its best-case demand as if it had the cluster to itself,
under the simulator's timing (:class:`~synergy_gym.sim.config.SimulationConfig`):

* ``timing="round"``: from the round boundary at or after its arrival, a job credited
  ``floor(round_s / (iter_time / throughput))`` iterations a round at its demand's throughput
  needs ``ceil(total_iters / that)`` rounds;
* ``timing="exact"``: from its arrival (the simulator may start it at the first completion after
  it, before the next boundary), it runs ``total_iters · iter_time / throughput`` seconds.

Where a job's demand is its fastest point – true of the model zoo's demands – no scheduler finishes
it earlier, so the bound's mean JCT is below every policy's on the same workload. A job's own demand
that is not its fastest point within one server (a trace's CPU or memory column) is not a bound: where it is slower than
the fair share, Tune falls back to the fair share, and OPT and the fair share give it more than its
demand; where it is between the two, OPT may grant more than the demand.
"""

from __future__ import annotations

import numpy as np

from synergy_gym.errors import ConfigError, UnknownNameError, WorkloadError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import BOUNDARY_TOLERANCE, TIMINGS
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.validation import check_positive
from synergy_gym.sim.workload import Workload


def round_release_s(arrival_s: np.ndarray, round_s: float) -> np.ndarray:
    """The earliest time the simulator may first run each job under ``timing="round"``: the round boundary at or
    after its arrival, never later than any clock value at which the simulator could admit it.

    As the simulator jumps to an arrival (:meth:`~synergy_gym.sim.simulator.Simulator.run`): boundary ``k`` with
    ``k = ceil(arrival / round_s − BOUNDARY_TOLERANCE)`` (``3 * 123.4`` is ``370.20000000000005``, and that over
    ``123.4`` a hair above 3), or the next one where the arrival lies after ``k · round_s``'s value. With a whole-number
    ``round_s`` every clock value is exactly ``k · round_s``, so that is the simulator's start. With another, the
    clock stepping round by round is a running sum, which may drift off ``k · round_s`` either way: an arrival within
    :data:`~synergy_gym.sim.config.BOUNDARY_TOLERANCE` rounds of a boundary is released at the earlier of the two (a
    hair early keeps the bounds below it; a job arriving that close after a boundary's value may then be credited a
    round early).
    """
    round_s = check_positive("round_s", round_s, unit="seconds")
    arrival_s = np.asarray(arrival_s, dtype=float)
    boundary = np.ceil(arrival_s / round_s - BOUNDARY_TOLERANCE) * round_s
    release = np.where(boundary >= arrival_s, boundary, boundary + round_s)
    if float(round_s).is_integer():
        return release
    near = np.abs(boundary - arrival_s) <= BOUNDARY_TOLERANCE * round_s
    return np.where(near, np.minimum(boundary, arrival_s), release)


def no_wait_start_s(arrival_s: np.ndarray, round_s: float = 300.0, timing: str = "round") -> np.ndarray:
    """When the no-waiting bound starts each job: the round boundary at or after its arrival (``"round"``, as
    :func:`round_release_s`), or its arrival."""
    if timing not in TIMINGS:
        raise UnknownNameError("timing", timing, TIMINGS)
    try:
        arrival_s = np.asarray(arrival_s, dtype=float)
    except (TypeError, ValueError):
        raise WorkloadError(f"no_wait_start_s(): arrival_s must be arrival times in seconds, got {arrival_s!r}") from None
    bad = np.flatnonzero(~(np.isfinite(arrival_s) & (arrival_s >= 0)))
    if bad.size:
        i = int(bad[0])
        raise WorkloadError(f"no_wait_start_s(): arrival_s[{i}]={float(arrival_s.flat[i])!r} must be a finite time ≥ 0 s")
    if timing != "round":
        return arrival_s.copy()
    return round_release_s(arrival_s, round_s)


def no_wait_jct_s(workload: Workload, cluster: ClusterSpec, round_s: float = 300.0, timing: str = "round") -> np.ndarray:
    """Per job (in the workload's order): its JCT in seconds with its demand and no waiting, under ``timing``.

    Raises :class:`~synergy_gym.errors.WorkloadError` for a job that cannot finish an iteration in
    a round at its demand (``"round"``), as the simulator does.
    """
    round_s = check_positive("round_s", round_s, unit="seconds")
    if timing not in TIMINGS:
        raise UnknownNameError("timing", timing, TIMINGS)
    if not isinstance(workload, Workload):
        raise WorkloadError(f"no_wait_jct_s(): workload must be a Workload, got {type(workload).__name__}")
    if not isinstance(cluster, ClusterSpec):
        raise ConfigError(f"no_wait_jct_s(): cluster must be a ClusterSpec (cluster_preset(...)), got {cluster!r}")
    jobs = JobTable(cluster, workload)
    if timing != "round":  # from arrival, continuous progress at the demand's rate (as the simulator computes it)
        return jobs.total_iters / (jobs.tput_target / jobs.iter_time_s)
    per_round = np.floor(round_s / (jobs.iter_time_s / jobs.tput_target))
    stuck = np.flatnonzero(per_round < 1)
    if stuck.size:
        j = int(stuck[0])
        raise WorkloadError(f"job {jobs.job_id[j]}: iter_time_s={jobs.iter_time_s[j]:g} is too long to finish an "
                            f"iteration in a {round_s:g} s round at its demand; use timing='exact' or a longer round_s")
    rounds = np.ceil(jobs.total_iters / per_round)
    return no_wait_start_s(jobs.arrival_s, round_s) + rounds * round_s - jobs.arrival_s
