"""JCT statistics over a selection of jobs: finished only, or with unfinished jobs' time so far."""

import math

import numpy as np

from synergy_gym.sim.metrics import JctStats, summarise_jcts

ARRIVAL = np.array([0.0, 3600.0, 7200.0, 10800.0])
FINISH = np.array([7200.0, 18000.0, np.nan, np.nan])  # JCTs 2 h and 4 h; two jobs unfinished


def test_finished_jobs_only_without_now():
    s = summarise_jcts(ARRIVAL, FINISH, np.array([True, True, True, False]))
    assert s == JctStats(mean_h=3.0, median_h=3.0, p99_h=float(np.percentile([2.0, 4.0], 99)), count=2)


def test_unfinished_jobs_count_with_their_time_so_far_when_now_is_given():
    s = summarise_jcts(ARRIVAL, FINISH, np.array([True, True, True, True]), now=21600.0)
    x = np.array([2.0, 4.0, 4.0, 3.0])  # the last two: 6 h − 2 h and 6 h − 3 h
    assert (s.mean_h, s.median_h, s.p99_h, s.count) == (x.mean(), np.median(x), np.percentile(x, 99), 4)


def test_no_selected_job_gives_nan_and_zero_count():
    s = summarise_jcts(ARRIVAL, FINISH, np.array([False, False, True, True]))
    assert math.isnan(s.mean_h) and math.isnan(s.median_h) and math.isnan(s.p99_h) and s.count == 0
