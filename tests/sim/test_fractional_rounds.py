"""A fractional ``round_s``: arrivals on a float round boundary are admitted in that round by every ordering, and the
bounds release them no later than the simulator does."""

from __future__ import annotations

import re

import numpy as np
import pytest

from synergy_gym import ClusterSpec, SimulationConfig, Simulator
from synergy_gym.baselines import make_policy, policy_names
from synergy_gym.errors import SynergyGymError
from synergy_gym.sim.bounds import no_wait_jct_s, no_wait_start_s, round_release_s
from synergy_gym.sim.contention_bound import contention_bound, release_s

ROUND = 123.4
ON_BOUNDARY = 3 * ROUND  # 370.20000000000005, and ON_BOUNDARY / ROUND a hair above 3: the clock reaches it in 3 rounds
CLUSTER = ClusterSpec(num_servers=4)
REL = 1e-9


@pytest.fixture
def two_jobs(make_workload):
    # A long job keeps the cluster busy (so LAS and SRTF step round by round); the short one arrives on a boundary.
    return make_workload(["lstm", "lstm"], arrivals=[0.0, ON_BOUNDARY], iters=[200_000, 100])


def _run(workload, policy: str) -> Simulator:
    sim = Simulator(CLUSTER, workload, make_policy(policy), SimulationConfig(round_s=ROUND, record_rounds=False))
    sim.run()
    assert not np.isnan(sim.jobs.finish_s).any()
    return sim


def test_every_ordering_starts_a_job_arriving_on_a_float_boundary_in_that_round(two_jobs):
    assert ON_BOUNDARY / ROUND > 3.0  # the case: the division rounds above the boundary's index
    starts = {p: float(_run(two_jobs, p).jobs.start_s[1]) for p in ("fifo+tune", "las+tune", "srtf+tune")}
    assert set(starts.values()) == {ON_BOUNDARY}, starts  # FIFO jumped to the next round (493.6) before


def test_the_bounds_release_a_job_on_a_float_boundary_in_that_round(two_jobs):
    arrival = np.asarray(two_jobs.arrival_s, dtype=float)
    assert release_s(arrival, ROUND, "round").tolist() == [0.0, ON_BOUNDARY]
    assert no_wait_start_s(arrival, ROUND).tolist() == [0.0, ON_BOUNDARY]
    # A hair below or above a boundary (a running sum of rounds): never a round later, never after the arrival.
    near = np.array([ON_BOUNDARY * (1 - 1e-15), ON_BOUNDARY * (1 + 1e-15), 0.1, ON_BOUNDARY + 1.0])
    release = release_s(near, ROUND, "round")
    assert np.all(release[:2] <= near[:2])
    assert np.all(np.abs(release[:2] - ON_BOUNDARY) < 1e-9)
    assert release[2:].tolist() == [ROUND, 4 * ROUND]


def test_no_simulator_policy_beats_the_bounds_with_a_fractional_round(two_jobs):
    bound = contention_bound(two_jobs, CLUSTER, round_s=ROUND).mean_jct_s
    no_wait = float(no_wait_jct_s(two_jobs, CLUSTER, round_s=ROUND).mean())
    for policy in policy_names():
        sim = _run(two_jobs, policy)
        mean = float(np.mean(sim.jobs.finish_s - sim.jobs.arrival_s))
        assert mean >= bound * (1 - REL) and mean >= no_wait * (1 - REL), (policy, mean, bound, no_wait)


def test_with_a_whole_number_round_the_bounds_start_a_job_when_the_simulator_does(make_workload):
    """An arrival a hair after a boundary's exact value (3000 * 1.1 = 3300.0000000000005) waits for the next round
    in the simulator, whose clock is exactly k * 300: the bounds release it there too (not a round early: an idle
    cluster reaches them)."""
    arrival = 3000 * 1.1
    assert arrival > 3300.0
    w = make_workload(["lstm"], arrivals=[arrival], iters=[100])
    sim = Simulator(CLUSTER, w, make_policy("fifo+tune"), SimulationConfig(record_rounds=False))
    sim.run()
    assert float(sim.jobs.start_s[0]) == 3600.0 == float(no_wait_start_s(np.array([arrival]))[0])
    jct = float(sim.jobs.finish_s[0] - arrival)
    assert float(no_wait_jct_s(w, CLUSTER)[0]) == pytest.approx(jct, rel=REL)
    assert contention_bound(w, CLUSTER).mean_jct_s == pytest.approx(jct, rel=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda: no_wait_start_s([0.0, 10.0], timing="bogus"), "unknown timing 'bogus'; valid: round, exact"),
    (lambda: no_wait_start_s([0.0, 10.0], round_s=0), "round_s must be a positive number of seconds, got 0"),
    (lambda: round_release_s([0.0, 10.0], -300.0), "round_s must be a positive number of seconds, got -300"),
])
def test_release_times_refuse_a_bad_round_or_timing_in_one_line(call, message):
    with pytest.raises(SynergyGymError, match=re.escape(message)):
        call()
