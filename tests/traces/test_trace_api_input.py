"""Bad input to the traces' Python entry points is one line naming the argument; NumPy's numbers count as Python's.

``TraceJobs.build`` refuses (the readers skip) a GPU count that is not a whole number ≥ 1; ``to_workload`` and
``sample_workload`` check their arguments with ``SyntheticWorkload``'s validators; ``load_trace``,
``read_workload_csv`` and ``write_workload_csv`` refuse a path, flag, zoo, cluster or workload of the wrong type.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from synergy_gym import ClusterSpec, SyntheticWorkload, cluster_preset
from synergy_gym.errors import ConfigError, PathError, SynergyGymError, WorkloadError
from synergy_gym.traces.loader import load_trace, trace_workload
from synergy_gym.traces.replay import read_workload_csv, write_workload_csv
from synergy_gym.traces.trace_jobs import TraceJobs, sample_workload, to_workload

NAN, INF = float("nan"), float("inf")


def _one_line(exc: pytest.ExceptionInfo, *words: str) -> None:
    message = str(exc.value)
    assert isinstance(exc.value, SynergyGymError) and "\n" not in message, message
    for word in words:
        assert word in message, (word, message)


def _build(**over):
    columns = {"submit_s": [0, 60], "duration_s": [3600, 3600], "gpus": [1, 2], **over}
    return TraceJobs.build("mine", **columns)


@pytest.fixture(scope="module")
def trace() -> TraceJobs:
    return TraceJobs.build("mine", submit_s=[0, 60, 120, 180, 240, 300], duration_s=[3600] * 6, gpus=[1, 2, 1, 4, 1, 1])


# -- TraceJobs.build -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("gpus", "shown"), [([2.5, 1], "gpus=2.5"), ([0, 1], "gpus=0"), ([-1, 1], "gpus=-1"),
                                             ([NAN, 1], "gpus=nan")])
def test_a_gpu_count_that_is_not_a_whole_number_of_at_least_one_is_refused(gpus, shown):
    with pytest.raises(WorkloadError) as e:
        _build(gpus=gpus)  # 2.5 was truncated to 2 GPUs, silently
    _one_line(e, "mine: job 0:", shown, "must be a whole number ≥ 1")


def test_whole_gpu_counts_given_as_floats_or_numpy_numbers_are_taken():
    assert _build(gpus=[2.0, np.int64(4)]).gpus.tolist() == [2, 4]
    assert _build(gpus=np.array([3, 1], dtype=np.uint8)).gpus.tolist() == [3, 1]


@pytest.mark.parametrize(("over", "words"), [
    ({"submit_s": [0, 1, 2]}, ["column duration_s has 2 values for 3 jobs"]),
    ({"gpus": [1, 1, 1]}, ["column gpus has 3 values for 2 jobs"]),
    ({"cpu_per_gpu": [4.0]}, ["column cpu_per_gpu has 1 values for 2 jobs"]),
    ({"submit_s": 0, "duration_s": 3600, "gpus": 1}, ["column submit_s must be 1-D", "a single value"]),
    ({"gpus": [[1], [2]]}, ["column gpus must be 1-D", "shape (2, 1)"]),
    ({"submit_s": ["a", "b"]}, ["job 0: submit_s='a' must be a number"]),
    ({"gpus": [True, True]}, ["job 0: gpus=True must be a number"]),
    ({"submit_s": [NAN, 0]}, ["job 0: submit_s=nan"]),
    ({"duration_s": [3600, NAN]}, ["job 1: duration_s=nan must be a positive number"]),  # was: "over 1e+12 s"
    ({"duration_s": [-1, 3600]}, ["job 0: duration_s=-1 must be a positive number"]),  # was: named total_iters
    ({"duration_range": (10,)}, ["duration_range must be two numbers of seconds", "(10,)"]),
    ({"duration_range": "10:20"}, ["duration_range must be two numbers"]),
    ({"duration_range": (5, 1)}, ["duration_range (5, 1) must give the shortest duration first"]),  # was: no job kept
])
def test_malformed_columns_and_duration_ranges_are_one_line(over, words):
    with pytest.raises(WorkloadError) as e:
        _build(**over)
    _one_line(e, "mine: ", *words)


def test_the_readers_rows_beyond_the_limits_are_still_skipped_and_counted():
    with pytest.warns(UserWarning, match="1 GPU count over 2\\^53"):
        trace = _build(gpus=[INF, 2])
    assert trace.gpus.tolist() == [2]


# -- to_workload and sample_workload -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"max_jobs": 2.5}, ["max_jobs must be a positive integer, got 2.5"]),
    ({"max_jobs": True}, ["max_jobs must be a positive integer, got True"]),  # was 1 job
    ({"max_jobs": "3"}, ["max_jobs must be a positive integer, got '3'"]),
    ({"max_jobs": NAN}, ["max_jobs must be a positive integer, got nan"]),
    ({"arrival_scale": "2"}, ["arrival_scale must be a finite number > 0, got '2'"]),
    ({"arrival_scale": True}, ["arrival_scale must be a finite number > 0, got True"]),
    ({"window": (0.5, 2)}, ["window (0.5, 2) must be two whole job positions"]),  # measured job 1 only
    ({"window": (True, 3)}, ["window (True, 3) must be two whole job positions"]),
    ({"window": (1, 2, 3)}, ["window (1, 2, 3) must be two whole job positions"]),
    ({"zoo": "default"}, ["zoo must be a ModelZoo", "got str"]),
])
def test_to_workload_checks_its_arguments(trace, kwargs, words):
    with pytest.raises(WorkloadError) as e:
        to_workload(trace, **kwargs)
    _one_line(e, *words)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"jobs_per_hour": INF}, ["jobs_per_hour must be a positive number, got inf"]),  # every arrival was 0.0
    ({"jobs_per_hour": "9"}, ["jobs_per_hour must be a positive number, got '9'"]),
    ({"jobs_per_hour": True}, ["jobs_per_hour must be a positive number, got True"]),
    ({"jobs_per_hour": 1e-9}, ["jobs_per_hour 1e-09 is below the minimum of 1e-06 jobs an hour"]),
    ({"num_jobs": 2.5}, ["num_jobs must be a positive integer, got 2.5"]),
    ({"num_jobs": True}, ["num_jobs must be a positive integer, got True"]),
    ({"num_jobs": "3"}, ["num_jobs must be a positive integer, got '3'"]),
    ({"num_jobs": 10**12}, ["num_jobs 1000000000000 exceeds the maximum of 1,000,000"]),
    ({"seed": -1}, ["seed must be a non-negative integer, got -1"]),
    ({"seed": 1.5}, ["seed must be a non-negative integer, got 1.5"]),
    ({"seed": True}, ["seed must be a non-negative integer, got True"]),
    ({"window": (0.5, 2)}, ["window (0.5, 2) must be two whole job positions"]),
])
def test_sample_workload_checks_its_arguments_as_the_synthetic_generator_does(trace, kwargs, words):
    with pytest.raises(WorkloadError) as e:
        sample_workload(trace, **{"num_jobs": 4, "jobs_per_hour": 9, **kwargs})
    _one_line(e, *words)


def test_numpy_numbers_give_what_python_numbers_give(trace):
    a = sample_workload(trace, num_jobs=np.int64(5), jobs_per_hour=np.float64(9), seed=np.int64(3), window=(1, 3))
    b = sample_workload(trace, num_jobs=5, jobs_per_hour=9.0, seed=3, window=np.array([1, 3]))
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.gpus, b.gpus)
    assert a.measured.tolist() == [False, True, True, False, False]
    assert len(to_workload(trace, max_jobs=np.int64(3), arrival_scale=np.float32(2.0))) == 3
    assert len(to_workload(trace, max_jobs=3.0)) == 3


def test_trace_workload_checks_max_jobs_before_reading_the_file():
    with pytest.raises(WorkloadError) as e:
        trace_workload("/no/such/trace.csv", max_jobs=2.5)
    _one_line(e, "max_jobs must be a positive integer, got 2.5")


# -- load_trace, read_workload_csv, write_workload_csv -------------------------------------------------------------------

PHILLY = "timestamp,duration,num_gpus\n0,60,1\n100,3600,2\n"


@pytest.mark.parametrize("flag", ["false", "no", 0, None])
def test_load_traces_duration_filter_must_be_a_bool(tmp_path, flag):
    path = tmp_path / "p.csv"
    path.write_text(PHILLY)
    with pytest.raises(WorkloadError) as e:
        load_trace(path, philly_duration_filter=flag)  # "false" applied the filter
    _one_line(e, f"philly_duration_filter must be True or False, got {flag!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(load_trace(path, philly_duration_filter=np.False_)) == 2
        assert len(load_trace(path, philly_duration_filter=True)) == 1


@pytest.mark.parametrize("path", [None, 3, ""])
def test_a_path_that_is_not_a_path_is_one_line(path):
    from synergy_gym.traces.alibaba import read_alibaba
    from synergy_gym.traces.helios import read_helios
    from synergy_gym.traces.philly import read_philly_csv, read_philly_json

    # the per-format readers too (was: TypeError: expected str, bytes or os.PathLike object)
    for call in (lambda: load_trace(path), lambda: read_workload_csv(path), lambda: read_philly_csv(path),
                 lambda: read_philly_json(path), lambda: read_helios(path), lambda: read_alibaba(path)):
        with pytest.raises(WorkloadError) as e:
            call()
        _one_line(e, "must be a file's path", repr(path))
    with pytest.raises(PathError) as e:
        write_workload_csv(SyntheticWorkload(num_jobs=3).build(), path)
    _one_line(e, "write_workload_csv(): path must be a file's path")


@pytest.fixture
def written(tmp_path) -> tuple[object, Path]:
    workload = SyntheticWorkload(num_jobs=6, seed=1).build()
    return workload, write_workload_csv(workload, tmp_path / "w.csv")


def test_read_alibaba_of_a_folder_without_a_name_is_one_line():
    from synergy_gym.traces.alibaba import read_alibaba

    with pytest.raises(WorkloadError) as e:
        read_alibaba(".")  # was: ValueError: PosixPath('.') has an empty name
    _one_line(e, "read_alibaba(): job_table '.' names a folder, not the job table's file")


def test_read_workload_csv_refuses_a_zoo_that_is_not_a_model_zoo(written):
    with pytest.raises(WorkloadError) as e:
        read_workload_csv(written[1], zoo="default")
    _one_line(e, "zoo must be a ModelZoo", "got str")
    assert len(read_workload_csv(str(written[1]).encode())) == 6  # bytes are a path too


def test_write_workload_csv_refuses_a_preset_name_for_the_cluster_as_the_simulator_does(written, tmp_path):
    workload, _ = written
    with pytest.raises(ConfigError) as e:
        write_workload_csv(workload, tmp_path / "x.csv", cluster="small")
    _one_line(e, "cluster must be a ClusterSpec, got 'small'", "cluster_preset('small')")
    with pytest.raises(ConfigError) as e:
        write_workload_csv(workload, tmp_path / "x.csv", cluster={"num_servers": 4})
    _one_line(e, "cluster must be a ClusterSpec, got a dict")
    assert not (tmp_path / "x.csv").exists()
    write_workload_csv(workload, tmp_path / "x.csv", cluster=cluster_preset("small"))
    write_workload_csv(workload, tmp_path / "y.csv", cluster=ClusterSpec())


def test_write_workload_csv_refuses_an_unbuilt_spec_and_a_folder(tmp_path):
    with pytest.raises(WorkloadError) as e:
        write_workload_csv(SyntheticWorkload(num_jobs=3), tmp_path / "w.csv")
    _one_line(e, "workload must be a Workload, got a SyntheticWorkload", "call its .build()")
    with pytest.raises(PathError) as e:
        write_workload_csv(SyntheticWorkload(num_jobs=3).build(), tmp_path)
    _one_line(e, "is a folder")
