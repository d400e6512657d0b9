"""Traces keep to the limits of a workload file: times at most 10^12 s, GPU counts at most 2^53.

A row beyond them is malformed – skipped and counted like the loaders' other bad rows – and a job whose
(scaled) arrival or run time is beyond them is refused in one line naming the file, the job and the value,
instead of overflowing later (a 1e300 s job once ran as a 300 s one; a 1e30-GPU job as -2^63 GPUs).
"""

import warnings
from dataclasses import replace

import numpy as np
import pytest

from synergy_gym.cli import main
from synergy_gym.errors import WorkloadError
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.workload import MAX_INTEGER
from synergy_gym.traces.alibaba import read_alibaba
from synergy_gym.traces.loader import load_trace
from synergy_gym.traces.philly import read_philly_csv
from synergy_gym.traces.trace_jobs import TraceJobs, TraceWarning, sample_workload, to_workload
from synergy_gym.traces.workload_columns import MAX_SECONDS

PHILLY_HEADER = "timestamp,duration,num_gpus\n"
GOOD = "0,6000,1\n100,7200,2\n"
HELIOS_HEADER = "job_id,gpu_num,cpu_num,submit_time,duration\n"
HELIOS_GOOD = "1,8,64,2020-04-01 00:00:00,7200\n"


def _write(path, text):
    path.write_text(text)
    return path


def _philly(tmp_path, rows, name="p.csv"):
    return _write(tmp_path / name, PHILLY_HEADER + GOOD + rows)


def _skipped(read, path, reason):
    with pytest.warns(TraceWarning, match=f"skipped 1 malformed row\\(s\\): 1 {reason}"):
        return read(path)


@pytest.mark.parametrize(
    "row, reason",
    [
        ("1e300,6000,1\n", "submit time beyond ±1e\\+12 s"),
        ("-1e300,6000,1\n", "submit time beyond ±1e\\+12 s"),  # else every other job would arrive 1e300 s late
        ("200,1e300,1\n", "duration over 1e\\+12 s"),
        ("200,1e13,1\n", "duration over 1e\\+12 s"),
        ("200,6000,1e30\n", "GPU count over 2\\^53"),
        (f"200,6000,{MAX_INTEGER + 2}\n", "GPU count over 2\\^53"),
    ],
)
def test_philly_rows_beyond_the_limits_are_skipped_and_counted(tmp_path, row, reason):
    trace = _skipped(lambda p: read_philly_csv(p, duration_range=None), _philly(tmp_path, row), reason)
    assert trace.submit_s.tolist() == [0.0, 100.0] and trace.gpus.tolist() == [1, 2]
    assert trace.duration_s.tolist() == [6000.0, 7200.0]


def test_the_limits_themselves_are_accepted(tmp_path):
    rows = f"{MAX_SECONDS:.0f},{MAX_SECONDS:.0f},{MAX_INTEGER}\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = read_philly_csv(_philly(tmp_path, rows), duration_range=None)
    assert trace.submit_s[-1] == MAX_SECONDS and trace.duration_s[-1] == MAX_SECONDS
    assert trace.gpus[-1] == MAX_INTEGER and trace.gpus.dtype == np.int64


def test_a_duration_over_the_limit_is_filtered_as_malformed_not_by_the_papers_range(tmp_path):
    trace = _skipped(read_philly_csv, _philly(tmp_path, "200,1e300,1\n"), "duration over 1e\\+12 s")
    assert trace.filtered == 0 and len(trace) == 2


def test_submit_times_spanning_more_than_the_limit_are_refused_without_a_warning(tmp_path):
    path = _philly(tmp_path, "-6e11,6000,1\n6e11,6000,1\n")  # each within ±10^12 s, 1.2·10^12 s apart
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(WorkloadError) as e:
            read_philly_csv(path, duration_range=None)
    assert str(e.value) == (f"{path}: the submit times span 1.2e+12 s (from -6e+11 to 6e+11), "
                            "more than 1e+12 s (about 31,700 years): a timestamp is wrong")


def test_helios_durations_and_gpu_counts_beyond_the_limits_are_skipped(tmp_path):
    for row, reason in (("2,1,4,2020-04-01 00:10:00,1e300\n", "duration over 1e\\+12 s"),
                        ("2,1e30,4,2020-04-01 00:10:00,3600\n", "GPU count over 2\\^53")):
        path = _write(tmp_path / "cluster_log.csv", HELIOS_HEADER + HELIOS_GOOD + row)
        trace = _skipped(load_trace, path, reason)
        assert trace.duration_s.tolist() == [7200.0] and trace.gpus.tolist() == [8]


@pytest.mark.parametrize(
    "cpu, reason",
    [("-4", "cpu_num < 0"), ("-0.5", "cpu_num < 0"), ("four", "non-numeric or infinite cpu_num"),
     ("inf", "non-numeric or infinite cpu_num")],
)
def test_a_bad_helios_cpu_request_is_malformed_not_no_request(tmp_path, cpu, reason):
    path = _write(tmp_path / "cluster_log.csv", HELIOS_HEADER + HELIOS_GOOD + f"2,2,{cpu},2020-04-01 00:10:00,3600\n")
    trace = _skipped(load_trace, path, reason)
    assert trace.gpus.tolist() == [8] and trace.cpu_per_gpu.tolist() == [8.0]


def test_an_empty_or_zero_helios_cpu_request_is_still_no_request(tmp_path):
    rows = "2,2,,2020-04-01 00:10:00,3600\n3,4,0,2020-04-01 00:20:00,3600\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = load_trace(_write(tmp_path / "cluster_log.csv", HELIOS_HEADER + HELIOS_GOOD + rows))
    assert trace.cpu_per_gpu[0] == 8.0 and np.isnan(trace.cpu_per_gpu[1:]).all()


ALIBABA_JOBS = "job_name,inst_id,user,status,start_time,end_time\nj1,1,u,T,1000,8200\nj2,2,u,T,2000,12800\n"
ALIBABA_TASKS = ("job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
                 "j1,worker,2,T,1000,8200,600,30,100,V100\n")


@pytest.mark.parametrize("task", ["j2,w,1,T,0,0,-600,30,100,V100", "j2,w,1,T,0,0,600,-30,100,V100",
                                  "j2,w,-1,T,0,0,600,30,100,V100", "j2,w,2,T,0,0,600,30,-50,V100"])
def test_alibaba_negative_requests_are_malformed(tmp_path, task):
    jobs = _write(tmp_path / "pai_job_table.csv", ALIBABA_JOBS)
    _write(tmp_path / "pai_task_table.csv", ALIBABA_TASKS + "j2,ok,1,T,0,0,600,30,100,V100\n" + task + "\n")
    trace = _skipped(read_alibaba, jobs, "negative inst_num, plan_cpu, plan_mem or plan_gpu")
    assert trace.gpus.tolist() == [2] and trace.cpu_per_gpu.tolist() == [6.0]


def test_alibaba_durations_and_gpu_counts_beyond_the_limits_are_skipped(tmp_path):
    jobs = _write(tmp_path / "pai_job_table.csv", ALIBABA_JOBS + "j3,3,u,T,-1e300,1e300\nj4,4,u,T,3000,9000\n")
    _write(tmp_path / "pai_task_table.csv", ALIBABA_TASKS + "j2,w,1,T,0,0,600,30,100,V100\n"
           "j3,w,1,T,0,0,600,30,100,V100\nj4,w,1e300,T,0,0,600,30,100,V100\n")
    with pytest.warns(TraceWarning, match="skipped 2 malformed row\\(s\\): 1 GPU count over 2\\^53, "
                      "1 submit time beyond ±1e\\+12 s"):
        trace = read_alibaba(jobs)
    assert trace.gpus.tolist() == [2, 1] and trace.duration_s.tolist() == [7200.0, 10800.0]


@pytest.mark.parametrize("cpu, reason", [("1e300", "CPU request over 1e\\+06 per GPU"),
                                         ("3e6", "CPU request over 1e\\+06 per GPU")])
def test_a_helios_cpu_request_beyond_any_machine_is_skipped_not_clamped_to_a_server(tmp_path, cpu, reason):
    # 1e300 CPUs ran as a request capped at one server, and trace-stats printed a 300-digit p90
    path = _write(tmp_path / "cluster_log.csv", HELIOS_HEADER + HELIOS_GOOD + f"2,2,{cpu},2020-04-01 00:10:00,3600\n")
    trace = _skipped(load_trace, path, reason)
    assert trace.gpus.tolist() == [8] and trace.cpu_per_gpu.tolist() == [8.0]


@pytest.mark.parametrize("gpus, reason", [("1.5", "gpu_num not a positive integer"),
                                          ("-2", "gpu_num not a positive integer"),
                                          ("0", "no GPU \\(CPU-only job\\)")])
def test_a_malformed_helios_gpu_count_is_not_called_a_cpu_only_job(tmp_path, gpus, reason):
    path = _write(tmp_path / "cluster_log.csv", HELIOS_HEADER + HELIOS_GOOD + f"2,{gpus},4,2020-04-01 00:10:00,3600\n")
    assert _skipped(load_trace, path, reason).gpus.tolist() == [8]


@pytest.mark.parametrize("task, reason", [
    ("j2,w,1,T,0,0,inf,30,100,V100", "CPU request over 1e\\+06 per GPU"),
    ("j2,w,1,T,0,0,600,1e300,100,V100", "memory request over 1e\\+06 GB per GPU"),
    ("j1,worker,2,T,1000,8200,600,30,100,V100", "task_name repeated within the job"),  # j1's GPUs counted twice
])
def test_alibaba_requests_beyond_any_machine_and_repeated_tasks_are_skipped(tmp_path, task, reason):
    jobs = _write(tmp_path / "pai_job_table.csv", ALIBABA_JOBS)
    _write(tmp_path / "pai_task_table.csv", ALIBABA_TASKS + "j2,ok,1,T,0,0,600,30,100,V100\n" + task + "\n")
    kept = _skipped(read_alibaba, jobs, reason)
    assert len(kept.gpus) == 1 and kept.gpus.tolist() == ([2] if task.startswith("j2") else [1])


def _trace(submit, duration, gpus=1):
    return TraceJobs.build("t.csv", submit, duration, np.full(len(submit), gpus))


def test_scaled_arrivals_beyond_the_limit_are_refused_naming_the_job():
    trace = _trace([0.0, 1e9, 1e11], [3600.0] * 3)
    assert to_workload(trace, arrival_scale=10.0).arrival_s[-1] == MAX_SECONDS  # the limit itself
    with pytest.raises(WorkloadError) as e:
        to_workload(trace, arrival_scale=1e300)
    assert str(e.value) == ("t.csv: job 1: submit time 1e+09 s × arrival_scale 1e+300 = 1e+309 s "
                            "must be at most 1e+12 s (about 31,700 years)".replace("1e+309", "inf"))
    assert len(to_workload(trace, max_jobs=1, arrival_scale=1e300)) == 1  # only the jobs taken count
    for scale in (float("inf"), float("nan"), 0.0, -1.0):
        with pytest.raises(WorkloadError, match=f"arrival_scale must be a finite number > 0, got {scale!r}"):
            to_workload(trace, arrival_scale=scale)


def test_a_run_time_rounded_up_past_the_limit_is_refused_naming_the_job():
    trace = _trace([0.0, 10.0], [MAX_SECONDS, 3600.0])  # job 0: whole iterations of 0.6 s add 0.2 s
    with pytest.raises(WorkloadError) as e:
        to_workload(trace, class_split=(100, 0, 0))  # vision models: alexnet first, 0.6 s an iteration
    assert str(e.value).startswith("t.csv: job 0: run time 1000000000000.2 s (duration 1e+12 s in whole iterations "
                                   "of 0.6 s) must be at most 1e+12 s")
    w = to_workload(_trace([0.0], [MAX_SECONDS - 1]), class_split=(100, 0, 0))
    assert w.total_iters.tolist() == [1666666666665] and w.total_iters.dtype == np.int64


def test_too_many_iterations_for_an_exact_count_are_refused(zoo):
    fast = ModelZoo(tuple(replace(m, iter_time_s=1e-5) for m in zoo.models))  # 10^12 s is 10^17 iterations
    with pytest.raises(WorkloadError, match="^t.csv: job 0: total_iters=1e\\+17 \\(duration 1e\\+12 s / iter_time_s "
                       "1e-05\\) must be at most 2\\^53 = 9007199254740992$"):
        to_workload(_trace([0.0], [MAX_SECONDS]), zoo=fast)
    assert to_workload(_trace([0.0], [1e10]), zoo=fast).total_iters.tolist() == [10**15]


def test_sampled_arrivals_beyond_the_limit_are_refused():
    trace = _trace([0.0, 10.0], [3600.0, 7200.0])
    with pytest.raises(WorkloadError, match="^t.csv \\(sampled\\): job \\d+: arrival_s=.* must be at most 1e\\+12 s"):
        sample_workload(trace, num_jobs=1000, jobs_per_hour=1e-6)  # the lowest rate: about 3.6e12 s for 1,000 jobs


def _run(argv, tmp_path, capsys):
    code = main([*argv, "--cluster", "small", "--policies", "fifo+tune", "--quiet", "--out", str(tmp_path / "out")])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "name, text, extra, message",
    [
        ("cluster_log.csv", HELIOS_HEADER + "1,1,4,2020-04-01 00:00:00,1e300\n", [],
         "no usable job (skipped 1 malformed row(s): 1 duration over 1e+12 s)"),
        ("p.csv", PHILLY_HEADER + "0,60,1\n1e300,6000,1\n", [],
         "no usable job (skipped 1 malformed row(s): 1 submit time beyond ±1e+12 s; 1 outside the duration filter)"),
        ("p.csv", PHILLY_HEADER + "0,6000,1\n100,6000,1\n", ["--arrival-scale", "1e300"],
         "job 1: submit time 100 s × arrival_scale 1e+300 = 1e+302 s must be at most 1e+12 s (about 31,700 years)"),
        ("p.csv", PHILLY_HEADER + "0,6000,1e30\n", [],
         "no usable job (skipped 1 malformed row(s): 1 GPU count over 2^53)"),
    ],
)
def test_compare_refuses_a_trace_beyond_the_limits_in_one_line(tmp_path, capsys, name, text, extra, message):
    path = _write(tmp_path / name, text)
    code, err = _run(["compare", "--trace", str(path), *extra], tmp_path, capsys)
    assert code == 2 and "Traceback" not in err and not (tmp_path / "out").exists()
    assert err.strip().splitlines()[-1] == f"synergy-gym compare: error: {path}: {message}"


def test_compare_and_trace_stats_run_the_valid_rows_of_a_trace_with_a_huge_gpu_count(tmp_path, capsys):
    path = _write(tmp_path / "p.csv", PHILLY_HEADER + "0,6000,1\n10,7200,2\n20,6000,1e30\n")
    warning = f"synergy-gym: warning: {path}: skipped 1 malformed row(s): 1 GPU count over 2^53\n"
    with warnings.catch_warnings():
        warnings.simplefilter("always", TraceWarning)  # the command prints it in one line
        assert main(["trace-stats", str(path), "--out", str(tmp_path / "stats")]) == 0
        captured = capsys.readouterr()
        assert "GPU-count mix: 1: 1 (50.0%), 2: 1 (50.0%)" in captured.out and captured.err == warning
        code, err = _run(["compare", "--trace", str(path)], tmp_path, capsys)
    assert code == 0 and err == warning, err
    jobs = (tmp_path / "out" / "jobs.csv").read_text().splitlines()
    assert len(jobs) == 3  # the header and the two valid jobs
