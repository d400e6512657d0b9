"""Workload.build refuses columns that are not what they claim, in one line naming the job and the column."""

import copy
import pickle
import re

import numpy as np
import pytest

from synergy_gym import Workload, WorkloadError

COLUMNS = {"job_id": [0, 1, 2], "model": [0, 5, 8], "gpus": [1, 2, 1], "arrival_s": [0, 100, 200],
           "total_iters": [1000, 2000, 3000]}


def build(zoo, **kwargs):
    return Workload.build(zoo, **{**COLUMNS, **kwargs})


@pytest.mark.parametrize("measured, shown", [
    (["0", "1", "0"], "job 0: measured='0'"),  # every string used to count as True
    ([True, "no", False], "job 1: measured='no'"),
    ([0, 2, 0], "job 1: measured=2"),
    ([0, 1, 0.5], "job 2: measured=0.5"),
    ([False, None, True], "job 1: measured=None"),
])
def test_measured_must_be_bools_or_zero_and_one(zoo, measured, shown):
    with pytest.raises(WorkloadError, match=f"^workload: {re.escape(shown)} must be True/False \\(or 1/0\\)$"):
        build(zoo, measured=measured)


@pytest.mark.parametrize("field, values, shown", [
    ("gpus", ["1", "2", "1"], "job 0: gpus='1' must be a number"),
    ("total_iters", ["1000", "2000", "3000"], "job 0: total_iters='1000' must be a number"),
    ("arrival_s", [0, "100", 200], "job 1: arrival_s='100' must be a number"),  # the job that holds the text
    ("gpus", [1, "2", 1], "job 1: gpus='2' must be a number"),
    ("cpu_demand_per_gpu", [None, "4", None], "job 1: cpu_demand_per_gpu='4' must be a number"),
    ("gpus", [True, True, True], "job 0: gpus=True must be a number"),
    ("cpu_demand_per_gpu", [np.inf, 1, 1], "job 0: cpu_demand=inf must be finite and > 0"),  # was capped silently
    ("mem_demand_per_gpu", [1, 1, np.inf], "job 2: mem_demand_gb=inf must be finite and > 0"),
    ("gpus", [[1], [1], [1]], "column gpus must be 1-D (one value per job), got shape (3, 1)"),
    ("gpus", 2, "column gpus must be 1-D (one value per job), got the single value 2"),
    ("model", 0, "column model must be 1-D (one model index per job), got the single value 0"),
])
def test_columns_that_are_not_numbers_or_not_one_per_job(zoo, field, values, shown):
    with pytest.raises(WorkloadError, match=f"^workload: {re.escape(shown)}$"):
        build(zoo, **{field: values})


def test_what_build_still_takes_and_the_zoo_and_extension_checks(zoo):
    assert build(zoo, measured=[False, True, False]).measured.tolist() == [False, True, False]
    assert build(zoo, measured=[0, 1, 1.0]).measured.tolist() == [False, True, True]
    assert build(zoo, measured=np.array([1, 0, 0], dtype=np.uint8)).measured.dtype == bool
    w = build(zoo, cpu_demand_per_gpu=[None, 4.0, None])  # None still means the model's demand
    assert np.isnan(w.cpu_demand_per_gpu[0]) and w.cpu_demand_per_gpu[1] == 4.0
    with pytest.raises(WorkloadError, match="^workload: zoo must be a ModelZoo .*got NoneType$"):
        Workload.build(None, **COLUMNS)
    with pytest.raises(WorkloadError, match="^a workload extension must be a Workload, got list$"):
        w.concat([1, 2])


def test_columns_are_read_only_after_build_and_concat(zoo):
    w = build(zoo)
    joined = w.concat(Workload.build(zoo, job_id=[7], model=[0], gpus=[1], arrival_s=[300], total_iters=[5]))
    for workload in (w, joined, pickle.loads(pickle.dumps(w)), copy.deepcopy(joined)):  # copies stay read-only
        for name in ("job_id", "model", "gpus", "arrival_s", "iter_time_s", "total_iters",
                     "cpu_demand_per_gpu", "mem_demand_per_gpu", "measured"):
            with pytest.raises(ValueError, match="read-only"):
                getattr(workload, name)[0] = 0  # would skip every check (gpus=0 failed later in the planner)
