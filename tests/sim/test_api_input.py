"""Bad input to the simulator's Python API is refused in one line naming the value, before anything runs.

Each case here used to give wrong numbers silently or a raw NumPy/Python error: a model profile with
NaN or negative figures, a reversed grid or a task typo; a GPU count or job id past int64 that wrapped
around; ``per_round`` with a round length of zero, text or a microsecond; a zoo that is not a
:class:`ModelZoo`; a cluster of 10^20 servers.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from synergy_gym import (
    ClusterSpec,
    ConfigError,
    ModelZoo,
    Simulator,
    SyntheticWorkload,
    Workload,
    WorkloadError,
    cluster_preset,
)
from synergy_gym.baselines import make_policy
from synergy_gym.sim.cluster import MAX_GPUS, MAX_SERVERS
from synergy_gym.sim.metrics import MAX_PER_ROUND_ROWS

NAN, INF = float("nan"), float("inf")
ZOO = ModelZoo.default()
M0 = ZOO[0]


def _one_line(error: pytest.ExceptionInfo, start: str) -> str:
    text = str(error.value)
    assert "\n" not in text and text.startswith(start), text
    return text


# -- 1. model profiles -------------------------------------------------------------------------


def _with_cell(value: float) -> np.ndarray:
    tput = M0.tput.copy()
    tput[1, 0] = value
    return tput


@pytest.mark.parametrize("change, message", [
    ({"task": "nlp"}, "model 'alexnet': task must be one of vision, language, speech, got 'nlp'"),
    ({"task": "Vision"}, "model 'alexnet': task must be one of vision, language, speech, got 'Vision'"),
    ({"name": 5}, "a model's name must be a non-empty string, got 5"),
    ({"iter_time_s": -0.6}, "model 'alexnet': iter_time_s must be a positive number, got -0.6"),
    ({"iter_time_s": 0.0}, "model 'alexnet': iter_time_s must be a positive number, got 0.0"),
    ({"iter_time_s": NAN}, "model 'alexnet': iter_time_s must be a positive number, got nan"),
    ({"iter_time_s": "0.6"}, "model 'alexnet': iter_time_s must be a positive number, got '0.6'"),
    ({"demand_cpus_per_gpu": -3.0}, "model 'alexnet': demand_cpus_per_gpu must be a positive number, got -3.0"),
    ({"demand_cpus_per_gpu": "12"}, "model 'alexnet': demand_cpus_per_gpu must be a positive number, got '12'"),
    ({"demand_mem_gb_per_gpu": NAN}, "model 'alexnet': demand_mem_gb_per_gpu must be a positive number, got nan"),
    ({"dataset_gb_per_gpu": -1.0}, "model 'alexnet': dataset_gb_per_gpu must be a positive number, got -1.0"),
    ({"tput": _with_cell(NAN)}, "model 'alexnet': tput[1, 0] is nan; a throughput must be finite and ≥ 0"),
    ({"tput": _with_cell(-0.1)}, "model 'alexnet': tput[1, 0] is -0.1; a throughput must be finite and ≥ 0"),
    ({"tput": _with_cell(INF)}, "model 'alexnet': tput[1, 0] is inf; a throughput must be finite and ≥ 0"),
    ({"tput": np.ones(45)}, "model 'alexnet': tput must be a 2-D array (cpu levels × memory levels), got shape (45,)"),
    ({"tput": [[1, "a"]]}, "model 'alexnet': tput must be an array of numbers, got [[1, 'a']]"),
    ({"tput": [[1.0]]}, "model 'alexnet': tput has shape (1, 1), expected (9, 5) (cpu levels × memory levels of its grids)"),
    ({"cpu_grid": M0.cpu_grid[::-1].copy()},
     "model 'alexnet': cpu_grid must be finite, positive and strictly increasing levels (a 1-D array), "
     "got [24.0, 12.0, 9.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]"),
    ({"mem_grid": np.array([20.83, 62.5, 62.5, 187.5, 250.0])},
     "model 'alexnet': mem_grid must be finite, positive and strictly increasing levels (a 1-D array), "
     "got [20.83, 62.5, 62.5, 187.5, 250.0]"),
    ({"cpu_grid": np.array([0.0, 2, 3, 4, 5, 6, 9, 12, 24])},
     "model 'alexnet': cpu_grid must be finite, positive and strictly increasing levels (a 1-D array), "
     "got [0.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.0, 12.0, 24.0]"),
    ({"cpu_grid": [True, False]}, "model 'alexnet': cpu_grid must be an array of numbers, got [True, False]"),
])
def test_a_bad_model_profile_is_refused_in_one_line(change, message):
    # Each was accepted and then ran on nonsense: a NaN cell silently, a reversed grid, a task typo
    # (the model got no jobs), a negative iteration time (a raw ZeroDivisionError or a confusing later error).
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        dataclasses.replace(M0, **change)


def test_a_model_zoo_needs_model_profiles():
    with pytest.raises(ConfigError, match=r"^a model zoo's models must be ModelProfile objects, got 'x' at position 0$"):
        ModelZoo(("x",))  # was: AttributeError: 'str' object has no attribute 'name'
    with pytest.raises(ConfigError, match=r"^a model zoo's models must be a tuple of ModelProfile, got 5$"):
        ModelZoo(5)
    assert ModelZoo(list(ZOO.models)).models == ZOO.models  # a list is taken, as a tuple


def test_the_default_zoo_and_accepted_profiles_are_unchanged():
    again = ModelZoo(ZOO.models)
    assert all(a.tput is b.tput and a.cpu_grid is b.cpu_grid for a, b in zip(again.models, ZOO.models))
    assert np.array_equal(again.tput_tensor(), ZOO.tput_tensor())
    # Zero throughputs are data (the simulator names the model that can never finish), lists and
    # NumPy scalars are numbers: all stay accepted, the arrays made read-only float64.
    zero = dataclasses.replace(M0, name="z", tput=np.zeros_like(M0.tput))
    listed = dataclasses.replace(M0, tput=M0.tput.tolist(), iter_time_s=np.float32(0.5), demand_cpus_per_gpu=np.int64(12))
    assert listed.tput.dtype == np.float64 and not listed.tput.flags.writeable
    assert listed.iter_time_s == 0.5 and type(listed.demand_cpus_per_gpu) is float
    assert np.array_equal(listed.tput, M0.tput) and ModelZoo((zero,)).names == ("z",)


def test_a_profile_keeps_no_writable_view_of_the_callers_array():
    tput = M0.tput.copy()
    model = dataclasses.replace(M0, tput=tput)
    tput[0, 0] = -5.0  # after the check: the profile must not see it
    assert model.tput[0, 0] == M0.tput[0, 0]


# -- 2. workload columns past int64 or float64's exact seconds, or bools -------------------------------------


BASE = dict(job_id=[0, 1, 2], model=[0, 1, 2], gpus=[1, 1, 1], arrival_s=[0, 10, 20], total_iters=[100, 200, 300])


@pytest.mark.parametrize("change, message", [
    # was: gpus int64 min (-9223372036854775808) with only a NumPy warning
    ({"gpus": [1e19, 1, 1]}, "workload: job 0: gpus=1e+19 must be at most 2**53"),
    ({"gpus": np.array([2**64 - 1, 1, 1], dtype=np.uint64)}, "workload: job 0: gpus=1.84467e+19 must be at most 2**53"),
    # was: job id -1, although the message promises "below 2**63"
    ({"job_id": np.array([2**64 - 1, 0, 1], dtype=np.uint64)},
     "workload: job_id must be a whole number below 2**63, got 18446744073709551615"),
    ({"model": np.array([2**64 - 1, 0, 1], dtype=np.uint64)},
     "workload: job 0: model index must be a whole number below 2**63, got 18446744073709551615"),
    # was: accepted, and the simulator gave a JCT of 0 s (times past float64's exact seconds)
    ({"arrival_s": [0, 10, 1e300]}, "workload: job 2: arrival_s=1e+300 must be at most 2**52 s"),
    ({"total_iters": [100, 200, 2**53]}, "workload: job 2: run time iter_time_s × total_iters=7.02562e+15 must be at "
                                          "most 2**52 s"),
    # was: read as 1 (NumPy makes [True, 1] a column of ints)
    ({"gpus": [True, 1, 1]}, "workload: job 0: gpus=True must be a number"),
    ({"arrival_s": (0, True, 20)}, "workload: job 1: arrival_s=True must be a number"),
    ({"model": [True, 1, 2]}, "workload: job 0: model index must be a whole number below 2**63, got True"),
])
def test_workload_numbers_out_of_range_or_not_numbers_are_refused(change, message):
    with pytest.raises(WorkloadError, match=f"^{re.escape(message)}$"):
        Workload.build(ZOO, **{**BASE, **change})


def test_unsigned_columns_within_range_still_build():
    w = Workload.build(ZOO, **{**BASE, "job_id": np.array([2**63 - 1, 0, 1], dtype=np.uint64),
                               "gpus": np.array([2, 1, 1], dtype=np.uint8)})
    assert w.job_id.tolist() == [2**63 - 1, 0, 1] and w.gpus.tolist() == [2, 1, 1] and w.gpus.dtype == np.int64


# -- 3. per_round ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def result():
    w = SyntheticWorkload(num_jobs=20, seed=1).build()
    return Simulator(cluster_preset("small"), w, make_policy("fifo+tune")).run()


@pytest.mark.parametrize("round_s", [0, -300, NAN, INF, "300", True, None])
def test_per_round_refuses_a_round_that_is_not_a_positive_number(result, round_s):
    if round_s is None:  # the run's own round: accepted
        assert len(result.per_round()) == len(result.per_round(300.0)) > 0
        return
    # was: -300 an empty table, 0 and NaN a NumPy error, '300' a UFuncTypeError
    with pytest.raises(ConfigError, match=f"^per_round\\(\\) round_s must be a positive number of seconds, "
                                          f"got {re.escape(repr(round_s))}$"):
        result.per_round(round_s)


def test_per_round_refuses_a_round_that_would_make_too_many_rows(result):
    with pytest.raises(ConfigError) as caught:  # was: a MemoryError (3 × 10^11 rows)
        result.per_round(1e-6)
    text = _one_line(caught, "per_round() round_s=1e-06 would make ")
    assert f"the most is {MAX_PER_ROUND_ROWS:,}" in text and text.endswith("choose a longer round_s")
    assert result.per_round(np.int64(300)).equals(result.per_round(300))


# -- 7. a zoo that is not a ModelZoo -----------------------------------------------------------


@pytest.mark.parametrize("zoo, shown", [("x", "'x'"), (5, "5"), (ZOO.models, "a tuple")])
def test_synthetic_workload_refuses_a_zoo_that_is_not_a_model_zoo(zoo, shown):
    # was: AttributeError: 'str' object has no attribute 'models_of_task'
    with pytest.raises(WorkloadError, match=f"^zoo must be a ModelZoo \\(e.g. ModelZoo.default\\(\\)\\), got {shown}$"):
        SyntheticWorkload(num_jobs=5).build(zoo=zoo)


# -- 8. cluster size ---------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, start", [
    ({"num_servers": 10**20}, "num_servers must be at most 100,000,000, got 100,000,000,000,000,000,000 ("),
    ({"num_servers": 2**40}, "num_servers must be at most 100,000,000, got 1,099,511,627,776 ("),
    ({"num_servers": 10**8, "gpus_per_server": 16},
     "the cluster may have at most 1,000,000,000 GPUs, got 100,000,000 servers × 16 GPUs = 1,600,000,000 ("),
    ({"gpus_per_server": 10**20}, "the cluster may have at most 1,000,000,000 GPUs, got 16 servers × "),
])
def test_a_cluster_past_the_size_limit_is_refused(kwargs, start):
    # was: accepted, then an OverflowError (10^20) or a MemoryError (2^40) in the simulator
    with pytest.raises(ConfigError) as caught:
        ClusterSpec(**kwargs)
    assert "8,192" in _one_line(caught, start)


def test_the_size_limit_leaves_every_documented_cluster():
    assert ClusterSpec(num_servers=MAX_SERVERS).total_gpus == 800_000_000  # the size guards' 10^8 servers
    assert ClusterSpec(num_servers=1, gpus_per_server=MAX_GPUS).total_gpus == MAX_GPUS
    assert ClusterSpec(num_servers=np.int64(1024)).total_gpus == 8192  # the largest scale benchmark
