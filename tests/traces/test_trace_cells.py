"""Malformed cells of a real trace are refused or skipped and counted, never read into other jobs.

A first row with an extra cell once shifted every column (pandas made the first column the index), a
missing ``inst_num`` silently dropped a task's GPUs, an ``attempts`` number raised a TypeError, a header
in quotes was not recognised, and a tiny GPU fraction became a 0-GPU job.
"""

import json
import warnings

import pytest

from synergy_gym.traces.alibaba import read_alibaba
from synergy_gym.traces.loader import load_trace, trace_workload
from synergy_gym.traces.trace_jobs import TraceWarning
from tests.traces.test_reader_errors import _error

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"
PHILLY_ROWS = ["2017-10-01 00:00:00,7200,1,7200,a", "2017-10-01 01:00:00,3600,2,7200,b"]
HELIOS = "job_id,gpu_num,cpu_num,submit_time,duration\n"
HELIOS_ROWS = ["1,8,64,2020-04-01 00:00:00,7200", "2,2,16,2020-04-01 01:00:00,3600"]
JOBS = "job_name,inst_id,user,status,start_time,end_time\n"
JOB_ROWS = ["j1,1,u,T,1000,8200", "j2,2,u,T,2000,12800"]
TASKS = "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
TASK_ROWS = ["j1,worker,2,T,1000,8200,600,30,100,V100", "j2,worker,1,T,2000,12800,800,60,100,T4"]


def _write(path, text):
    path.write_text(text)
    return path


def _alibaba(tmp_path, jobs=None, tasks=None):
    _write(tmp_path / "pai_task_table.csv", tasks or TASKS + "\n".join(TASK_ROWS) + "\n")
    return _write(tmp_path / "pai_job_table.csv", jobs or JOBS + "\n".join(JOB_ROWS) + "\n")


def _extra(rows, which):
    """``rows`` with one more cell on the first row only, or on every row."""
    return [r + ",x" if which == "every" or i == 0 else r for i, r in enumerate(rows)]


@pytest.mark.parametrize("which", ["first", "every"])
@pytest.mark.parametrize("fmt, header, rows, cells", [
    ("philly-csv", PHILLY, PHILLY_ROWS, 6),
    ("helios", HELIOS, HELIOS_ROWS, 6),
    ("alibaba", JOBS, JOB_ROWS, 7),
])
def test_a_row_with_an_extra_cell_is_refused_not_read_shifted(tmp_path, which, fmt, header, rows, cells):
    path = tmp_path / ("pai_job_table.csv" if fmt == "alibaba" else "t.csv")
    if fmt == "alibaba":
        _alibaba(tmp_path)
    _write(path, header + "\n".join(_extra(rows, which)) + "\n")
    message = _error(lambda p: load_trace(p, fmt), path)
    assert message.endswith(f"row 2 has {cells} cells, but the header names {cells - 1} columns")


@pytest.mark.parametrize("which", ["first", "every"])
def test_an_alibaba_task_row_with_an_extra_cell_is_refused(tmp_path, which):
    jobs = _alibaba(tmp_path, tasks=TASKS + "\n".join(_extra(TASK_ROWS, which)) + "\n")
    message = _error(lambda _: read_alibaba(jobs), tmp_path / "pai_task_table.csv")
    assert message.endswith("row 2 has 11 cells, but the header names 10 columns")


@pytest.mark.parametrize("task, reason", [
    ("j2,ps,,T,2000,12800,400,10,100,", "missing or non-numeric inst_num"),
    ("j2,ps,two,T,2000,12800,400,10,100,", "missing or non-numeric inst_num"),
    ("j2,ps,,T,2000,12800,400,10,,", "missing or non-numeric inst_num"),  # even a CPU task's
    ("j2,ps,1,T,2000,12800,400,10,all,", "non-numeric plan_cpu, plan_mem or plan_gpu"),
    ("j2,ps,1,T,2000,12800,4 cores,10,,", "non-numeric plan_cpu, plan_mem or plan_gpu"),
])
def test_an_alibaba_job_with_a_bad_task_is_skipped_not_kept_with_fewer_gpus(tmp_path, task, reason):
    jobs = _alibaba(tmp_path, tasks=TASKS + "\n".join([*TASK_ROWS, task]) + "\n")
    with pytest.warns(TraceWarning, match=f"skipped 1 malformed row\\(s\\): 1 {reason}$"):
        trace = read_alibaba(jobs)
    assert trace.gpus.tolist() == [2]


@pytest.mark.parametrize("plan_gpu", ["0.00000001", "1e-12"])
def test_any_fraction_of_a_gpu_is_one(tmp_path, plan_gpu):
    jobs = _alibaba(tmp_path, tasks=TASKS + f"j1,worker,1,T,1000,8200,600,30,{plan_gpu},V100\n"
                    f"j2,worker,1,T,2000,12800,800,60,{plan_gpu},T4\n")
    trace = read_alibaba(jobs)
    assert trace.gpus.tolist() == [1, 1] and trace.cpu_per_gpu.tolist() == [6.0, 8.0]
    assert trace_workload(jobs).gpus.tolist() == [1, 1]


def test_numeric_alibaba_job_names_join_their_tasks(tmp_path):
    jobs = _alibaba(tmp_path, jobs="1,1,u,T,1000,8200\n2,2,u,T,2000,12800\n",
                    tasks="1,worker,4,T,1000,8200,600,30,100,V100\nj2,w,1,T,0,0,600,30,100,V100\n"
                          "2,worker,1,T,2000,12800,600,30,100,V100\n")
    assert read_alibaba(jobs).gpus.tolist() == [4, 1]


GOOD_JOB = {"jobid": "a", "submitted_time": "2017-10-01 00:00:00", "attempts": [
    {"start_time": "2017-10-01 00:00:00", "end_time": "2017-10-01 02:00:00", "detail": [{"ip": "m", "gpus": ["g0"]}]}]}


GPUS_AS_TEXT = [{"start_time": "2017-10-01 00:00:00", "end_time": "2017-10-01 01:00:00",
                 "detail": [{"ip": "m", "gpus": "g0,g1"}]}]  # not 5 GPUs (its length)


@pytest.mark.parametrize("attempts", [5, True, 2.5, GPUS_AS_TEXT], ids=["int", "bool", "float", "gpus-text"])
def test_a_philly_job_with_malformed_attempts_has_no_usable_attempt(tmp_path, attempts):
    bad = {"jobid": "b", "submitted_time": "2017-10-01 00:10:00", "attempts": attempts}
    path = _write(tmp_path / "log.json", json.dumps([GOOD_JOB, bad]))
    with pytest.warns(TraceWarning, match="skipped 1 malformed row\\(s\\): 1 no usable attempt$"):
        trace = load_trace(path)
    assert trace.gpus.tolist() == [1] and trace.duration_s.tolist() == [7200.0]
    with pytest.warns(TraceWarning, match="1 no usable attempt"):
        assert trace_workload(path).gpus.tolist() == [1]  # the environment's trace= reader


@pytest.mark.parametrize("header", ['"timestamp","duration","num_gpus"', '\n\n  \ntimestamp,duration,"num_gpus"'])
def test_a_header_is_read_as_csv_to_detect_the_format(tmp_path, header):
    path = _write(tmp_path / "t.csv", header + "\n2017-10-01 00:00:00,7200,1\n2017-10-01 01:00:00,3600,2\n")
    assert load_trace(path).gpus.tolist() == [1, 2]


def test_a_header_with_spaces_is_not_taken_for_a_format_it_then_fails(tmp_path):
    path = _write(tmp_path / "t.csv", "timestamp, duration, num_gpus\n2017-10-01 00:00:00,7200,1\n")
    message = _error(load_trace, path)
    assert "cannot tell the trace format" in message and "' duration' has spaces around it" in message
    assert "missing column(s) duration, num_gpus (the header has ' duration', ' num_gpus': names are matched " \
           "exactly)" in _error(lambda p: load_trace(p, "philly-csv"), path)


def test_cannot_tell_the_format_says_how_to_name_it(tmp_path):
    message = _error(load_trace, _write(tmp_path / "t.csv", "a,b\n1,2\n"))
    assert message.endswith("name the format – one of philly-csv, philly-json, alibaba, helios – with compare "
                            "--trace-format, trace-stats --format or load_trace(path, fmt=...) (for the environment: "
                            "workload=to_workload(load_trace(path, fmt=...)))")


def test_a_longer_first_row_is_named_by_the_line_it_starts_on(tmp_path):
    path = tmp_path / "t.csv"
    _write(path, PHILLY + '2017-10-01 00:00:00,7200,1,7200,"a\nb",extra\n' + PHILLY_ROWS[1] + "\n")
    assert _error(lambda p: load_trace(p, "philly-csv"), path).endswith(
        "row 2 has 6 cells, but the header names 5 columns")


def test_a_huge_cell_in_the_first_row_is_read_as_pandas_reads_it(tmp_path):
    # Python's csv module refuses cells over 131,072 characters; the check of the first row must not.
    path = tmp_path / "t.csv"
    _write(path, PHILLY + f"2017-10-01 00:00:00,7200,1,7200,{'x' * 200_000}\n" + PHILLY_ROWS[1] + "\n")
    assert load_trace(path, "philly-csv", philly_duration_filter=False).gpus.tolist() == [1, 2]


def test_an_alibaba_jobs_duration_starts_at_its_first_tasks_launch_not_its_submission(tmp_path):
    """The job table's start_time is the submission: the wait before the first task started is not run time."""
    tasks = TASKS + "j1,worker,2,T,3000,8200,600,30,100,V100\nj1,ps,1,T,2500,8200,400,10,,\n" + TASK_ROWS[1] + "\n"
    trace = read_alibaba(_alibaba(tmp_path, tasks=tasks))
    assert trace.submit_s.tolist() == [0.0, 1000.0]  # still the submissions
    assert trace.duration_s.tolist() == [5700.0, 10800.0]  # j1 waited 1,500 s, then ran 8,200 − 2,500


def test_an_alibaba_job_name_in_the_job_table_twice_is_skipped_not_given_both_rows_tasks(tmp_path):
    jobs = _alibaba(tmp_path, jobs=JOBS + "\n".join([*JOB_ROWS, "j1,3,u,T,4000,9000"]) + "\n")
    with pytest.warns(TraceWarning, match="skipped 2 malformed row\\(s\\): 2 job_name repeated$"):
        trace = read_alibaba(jobs)
    assert trace.gpus.tolist() == [1] and trace.duration_s.tolist() == [10800.0]  # j2 alone


def test_compare_counts_the_jobs_the_duration_filter_leaves_out_and_refuses_more_jobs_than_kept(tmp_path, capsys):
    from synergy_gym.cli import main

    trace = _write(tmp_path / "t.csv", "timestamp,duration,num_gpus\n0,600,1\n60,3600,1\n120,7200,1\n180,900000,1\n")
    args = ["compare", "--trace", str(trace), "--policies", "fifo+fair", "--quiet"]
    with warnings.catch_warnings():
        warnings.simplefilter("always", TraceWarning)  # the command prints it in one line
        assert main([*args, "--out", str(tmp_path / "a")]) == 0
        err = capsys.readouterr().err
        assert "left out 2 of 4 job(s) lasting outside the paper's range of 31.6 min to 6.9 days" in err
        assert main([*args, "--jobs", "3", "--out", str(tmp_path / "b")]) == 2
        assert capsys.readouterr().err.strip().endswith(
            f"--jobs 3: {trace} has 2 usable job(s) (2 more outside the paper's duration range: --all-durations keeps them)")
        assert main([*args, "--jobs", "4", "--all-durations", "--out", str(tmp_path / "c")]) == 0
        assert "left out" not in capsys.readouterr().err and (tmp_path / "c" / "results.csv").is_file()


def test_a_workload_file_given_as_a_trace_and_a_trace_given_as_a_workload_say_which_to_use(tmp_path):
    from synergy_gym.traces.replay import read_workload_csv

    workload = _write(tmp_path / "w.csv", "job_id,model,gpus,arrival_s,total_iters,in_measured_window\n0,alexnet,1,0,10,1\n")
    assert _error(load_trace, workload).endswith(
        "not a trace: replay it with compare --workload, or the environment's workload=")
    trace = _write(tmp_path / "t.csv", PHILLY + "\n".join(PHILLY_ROWS) + "\n")
    assert _error(read_workload_csv, trace).endswith(
        "these are the columns of a philly-csv trace: read it with compare --trace, or the environment's trace=")


def test_an_alibaba_task_start_time_that_is_text_skips_its_job_not_times_it_from_another_task(tmp_path):
    tasks = TASKS + "j1,worker,2,T,soon,8200,600,30,100,V100\nj1,ps,1,T,1000,8200,400,10,,\n" + TASK_ROWS[1] + "\n"
    with pytest.warns(TraceWarning, match="skipped 1 malformed row\\(s\\): 1 bad or missing time$"):
        trace = read_alibaba(_alibaba(tmp_path, tasks=tasks))
    assert trace.duration_s.tolist() == [10800.0]  # j2 alone


def test_a_trace_warning_is_shown_once_a_command_and_is_one_line_when_warnings_are_errors(tmp_path, capsys):
    from synergy_gym.cli import main

    trace = _write(tmp_path / "t.csv", "timestamp,duration,num_gpus\n0,600,1\n60,3600,1\n120,7200,1\n180,900000,1\n")
    args = ["evaluate", "--env", "Synergy-small-v0", "--env-kwargs", f"trace={trace}", "num_jobs=2", "--seeds", "0",
            "--baselines", "env:fifo+tune,env:srtf+tune,sim:fifo+tune", "--quiet"]
    with warnings.catch_warnings():
        warnings.simplefilter("always", TraceWarning)  # every environment built reads the trace, and warns
        assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert capsys.readouterr().err.count("left out 2 of 4 job(s)") == 1
    # python -W error (as pytest runs here): the warning raised is the command's one-line error, not a traceback
    assert main(["compare", "--trace", str(trace), "--quiet", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("synergy-gym compare: error: ") and "left out 2 of 4" in err and err.count("\n") == 1
