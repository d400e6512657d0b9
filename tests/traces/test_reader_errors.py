"""Issue 24: every reader of workload and trace files turns a decoding or format error into one line.

The line starts with the file's path and names the row (and job and column) where it is known;
workload files follow one rule for numbers (``traces/workload_columns.py``).
"""

import bz2
import gzip
import json
import lzma
import warnings
import zipfile

import numpy as np
import pytest

from synergy_gym.cli import main
from synergy_gym.errors import SynergyGymError, WorkloadError
from synergy_gym.traces.loader import FORMATS, load_trace
from synergy_gym.traces.replay import read_workload_csv
from synergy_gym.traces.trace_jobs import TraceWarning

HEADER = ("job_id,model,task,gpus,arrival_s,iter_time_s,total_iters,fair_duration_s,cpu_demand,mem_demand_gb,"
          "speedup_at_demand,in_measured_window\n")
GOOD = "0,gnmt,language,1,951,0.12,34181,4101.72,1,20,1,1\n"
CELLS = dict(zip(HEADER.strip().split(","), "1,gnmt,language,1,960,0.12,34181,4101.72,1,20,1,0".split(",")))
PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n" + "".join(
    f"2017-10-09 0{h}:00:00,{3600 * (h + 1)}.0,{2 ** (h % 3)},1.0,a\n" for h in range(6))


def _write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _row(**changes):
    """The second job's row with some cells changed."""
    return ",".join(changes.get(k, v) for k, v in CELLS.items()) + "\n"


def _error(read, path):
    with pytest.raises(SynergyGymError) as e:
        read(path)
    message = str(e.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    return message


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


# -- 1. bytes: compression, encoding, emptiness, row shape --------------------------------------------------------


BAD_FILES = [
    ("trunc.csv.gz", lambda: gzip.compress((HEADER + GOOD * 50).encode())[:60],
     "the gzip data is truncated (the file ends before its end-of-stream marker)"),
    ("plain.csv.gz", lambda: HEADER + GOOD, "not valid gzip data, though its name ends in .gz"),
    ("trunc.csv.bz2", lambda: bz2.compress((HEADER + GOOD * 50).encode())[:60], "the bzip2 data is truncated"),
    ("trunc.csv.xz", lambda: lzma.compress((HEADER + GOOD * 50).encode())[:60], "the xz data is truncated"),
    ("plain.csv.xz", lambda: HEADER + GOOD, "not valid xz data, though its name ends in .xz"),
    ("plain.csv.zip", lambda: HEADER + GOOD, "not valid zip data, though its name ends in .zip"),
    ("binary.csv", lambda: bytes(range(128, 256)) * 4, "line 1: not UTF-8 text (byte 0x80); is it a binary file?"),
    ("nul.csv", lambda: bytes(range(256)), "line 1: not a text file (it holds a NUL byte; is it binary or UTF-16?)"),
    ("latin1.csv", lambda: (HEADER + GOOD + _row(model="gnmt")).replace("language", "langüage").encode("latin-1"),
     "line 2: not UTF-8 text (byte 0xfc)"),
    ("utf16.csv", lambda: (HEADER + GOOD).encode("utf-16-le"), "line 1: not a text file (it holds a NUL byte"),
    ("empty.csv", lambda: b"", "not a readable CSV: the file is empty (expected a header row: job_id, model"),
    ("blank.csv", lambda: "\n\n  \n", "not a readable CSV: the file is empty"),
    ("header.csv", lambda: HEADER, "no jobs (the file has only its header row)"),
    ("long.csv", lambda: HEADER + GOOD + _row().rstrip() + ",7\n", "row 3 has 13 cells, but the header names 12 columns"),
    ("short.csv", lambda: HEADER + GOOD + "1,gnmt,language,1\n", "row 3 has 4 cells, but the header names 12 columns"),
    ("commas.csv", lambda: HEADER + GOOD.rstrip() + ",\n", "row 2 has 13 cells, but the header names 12 columns"),
]


@pytest.mark.parametrize("name, content, message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_malformed_workload_file_gets_one_line_naming_it(tmp_path, name, content, message):
    assert message in _error(read_workload_csv, _write(tmp_path / name, content()))


def test_a_zip_must_hold_one_file(tmp_path):
    path = _zip(tmp_path / "two.zip", {"a.csv": HEADER + GOOD, "b.csv": HEADER + GOOD})
    assert "a .zip file must hold exactly one file; it holds 2" in _error(read_workload_csv, path)


def test_compressed_workloads_read_as_the_plain_file(tmp_path):
    text = HEADER + GOOD + _row()
    plain = read_workload_csv(_write(tmp_path / "w.csv", "\ufeff" + text))  # a byte-order mark is dropped
    for path in (_write(tmp_path / "w.csv.gz", gzip.compress(text.encode())),
                 _write(tmp_path / "w.csv.bz2", bz2.compress(text.encode())),
                 _write(tmp_path / "w.csv.xz", lzma.compress(text.encode())),
                 _zip(tmp_path / "w.zip", {"w.csv": text})):
        w = read_workload_csv(path)
        assert np.array_equal(w.job_id, plain.job_id) and np.array_equal(w.total_iters, plain.total_iters)


# -- 2. one rule for numbers ---------------------------------------------------------------------------------------


RULES = [
    (dict(fair_duration_s="inf"), "row 3: job 1: fair_duration_s=inf must be finite"),
    (dict(fair_duration_s="1e300"), "row 3: job 1: fair_duration_s=1e+300 must be at most 1e+12 s"),
    (dict(fair_duration_s="5000"), "row 3: job 1: fair_duration_s=5000.0 is not iter_time_s × total_iters = 4101.72 s"),
    (dict(fair_duration_s="0"), "row 3: job 1: fair_duration_s=0.0 must be > 0"),
    (dict(fair_duration_s="nan"), "row 3 (job 1): column fair_duration_s is not a number: 'nan'"),
    (dict(arrival_s="-1"), "row 3: job 1: arrival_s=-1.0 must be ≥ 0"),
    (dict(arrival_s="1e400"), "row 3: job 1: arrival_s=inf must be finite"),
    (dict(arrival_s="1e300"), "row 3: job 1: arrival_s=1e+300 must be at most 1e+12 s (about 31,700 years)"),
    (dict(arrival_s="soon"), "row 3: column arrival_s is not a number: 'soon'"),
    (dict(iter_time_s="-inf"), "row 3: job 1: iter_time_s=-inf must be finite"),
    (dict(iter_time_s="", fair_duration_s="4101.72"), "row 3: column iter_time_s is empty"),
    (dict(iter_time_s="100", total_iters="9e10", fair_duration_s="9e12"), "fair_duration_s=9000000000000.0 must be at"),
    (dict(iter_time_s="100", total_iters="9e10", fair_duration_s="1"), "iter_time_s × total_iters = 9e+12 s must be at"),
    (dict(gpus="0"), "row 3: job 1: gpus=0 must be a positive integer"),
    (dict(gpus="1.5"), "row 3: job 1: gpus=1.5 must be a positive integer"),
    (dict(gpus="1e300"), "row 3: job 1: gpus=1e+300 must be at most 2^53 = 9007199254740992"),
    (dict(total_iters="inf"), "row 3: job 1: total_iters=inf must be a positive integer"),
    (dict(total_iters="-10"), "row 3: job 1: total_iters=-10 must be a positive integer"),
    (dict(job_id="-1"), "row 3: job_id=-1 must be a non-negative integer"),
    # integers beyond 2^53 (beyond 64 bits, even beyond any float) are checked as written, on their own row
    (dict(total_iters="100000000000000000000"),
     "row 3: job 1: total_iters=100000000000000000000 must be at most 2^53 = 9007199254740992"),
    (dict(total_iters="9" * 400), "row 3: job 1: total_iters=1e+400 must be at most 2^53 = 9007199254740992"),
    (dict(arrival_s="9" * 400), "row 3: job 1: arrival_s=inf must be finite"),
    (dict(job_id="9007199254740993"), "row 3: job_id=9007199254740993 must be at most 2^53 = 9007199254740992"),
    (dict(job_id="18446744073709551616"), "row 3: job_id=18446744073709551616 must be at most 2^53"),
    (dict(job_id="1234567890123456", gpus="0"), "row 3: job 1234567890123456: gpus=0 must be a positive integer"),
    (dict(job_id="1234567890123456", speedup_at_demand="nan"),
     "row 3 (job 1234567890123456): column speedup_at_demand is not a number: 'nan'"),
    (dict(job_id="0"), "row 3: job_id=0 appears more than once (also row 2)"),
    (dict(job_id=""), "row 3: column job_id is empty"),
    (dict(cpu_demand="inf"), "row 3: job 1: cpu_demand=inf must be finite"),
    (dict(mem_demand_gb="1e300"), "row 3: job 1: mem_demand_gb=1e+300 must be at most 1e+06"),
    (dict(speedup_at_demand="2e6"), "row 3: job 1: speedup_at_demand=2000000.0 must be at most 1e+06"),
    (dict(mem_demand_gb="0"), "row 3: job 1: mem_demand_gb=0.0 must be > 0"),
    (dict(mem_demand_gb=""), "row 3: column mem_demand_gb is empty"),
    (dict(speedup_at_demand="nan"), "row 3 (job 1): column speedup_at_demand is not a number: 'nan'"),
    (dict(speedup_at_demand="-2"), "row 3: job 1: speedup_at_demand=-2.0 must be > 0"),
    (dict(in_measured_window="7"), "row 3: job 1: in_measured_window='7' must be 0, 1, true or false"),
    (dict(in_measured_window="1.0"), "row 3: job 1: in_measured_window='1.0' must be 0, 1, true or false"),
    (dict(in_measured_window="yes"), "row 3: job 1: in_measured_window='yes' must be 0, 1, true or false"),
    (dict(in_measured_window=""), "row 3: column in_measured_window is empty"),
    (dict(task="quantum"), "row 3: job 1: unknown task 'quantum'; valid: vision, language, speech"),
    (dict(task="vision"), "row 3: job 1: task='vision', but model gnmt is a language model"),
    (dict(task=""), "row 3: column task is empty"),
    (dict(model="bert"), "row 3: job 1: unknown model 'bert'; valid: alexnet,"),
    (dict(model=""), "row 3: column model is empty"),
]


@pytest.mark.parametrize("changes, message", RULES, ids=[",".join(f"{k}={v[:24]}" for k, v in c.items()) for c, _ in RULES])
def test_every_cell_follows_the_rule_for_numbers(tmp_path, changes, message):
    path = _write(tmp_path / "w.csv", HEADER + GOOD + _row(**changes))
    assert message in _error(read_workload_csv, path)


def test_job_ids_2_to_the_53_and_one_more_are_not_duplicates(tmp_path):
    path = _write(tmp_path / "w.csv", HEADER + _row(job_id="9007199254740992") + _row(job_id="9007199254740993"))
    assert "row 3: job_id=9007199254740993 must be at most 2^53 = 9007199254740992" in _error(read_workload_csv, path)


def test_what_the_rule_accepts(tmp_path):
    rows = [_row(job_id="1", in_measured_window="TRUE"), _row(job_id="2", in_measured_window=" false "),
            _row(job_id="3", fair_duration_s="4101.7")]  # fair_duration_s rounded: within 0.01 %
    w = read_workload_csv(_write(tmp_path / "w.csv", HEADER + GOOD + "".join(rows)))
    assert w.measured.tolist() == [True, True, False, False]
    minimal = "job_id,model,gpus,arrival_s,total_iters,in_measured_window\n0,gnmt,1,0,100,1\n"
    assert read_workload_csv(_write(tmp_path / "m.csv", minimal)).iter_time_s[0] == 0.12  # the model's default


def test_row_numbers_are_line_numbers(tmp_path):
    path = _write(tmp_path / "w.csv", "\n" + HEADER + GOOD + "\n\n" + _row(in_measured_window="2"))
    assert "row 6: job 1: in_measured_window='2'" in _error(read_workload_csv, path)


@pytest.mark.parametrize(
    "header, message",
    [
        ("job_id,model,gpus,arrival_s,total_iters,in_measured_window,notes",
         "unknown column(s) 'notes'; valid: job_id, model, task, gpus, arrival_s"),
        ("job_id,model,gpus,arival_s,total_iters,in_measured_window,iter_time",
         "missing column(s) arrival_s; unknown column(s) 'arival_s', 'iter_time'"),
        ("job_id,model,gpus,gpus,arrival_s,total_iters,in_measured_window", "row 1: column gpus appears twice in the header"),
        ("job_id,model,,arrival_s,total_iters,in_measured_window", "row 1: column 3 of the header has no name"),
    ],
)
def test_unknown_duplicate_and_unnamed_columns_are_refused(tmp_path, header, message):
    cells = ",".join(["0", "gnmt", "1", "0", "100", "1", "1"][: header.count(",") + 1])
    assert message in _error(read_workload_csv, _write(tmp_path / "w.csv", f"{header}\n{cells}\n"))


# -- 3. traces of every format ------------------------------------------------------------------------------------


WRONG_FORMAT = [
    ("philly-csv", "not a Philly CSV trace: missing column(s) timestamp, duration, num_gpus"),
    ("helios", "not a Helios trace: missing column(s) submit_time, gpu_num, cpu_num"),
    ("alibaba", "not an Alibaba PAI job table: no header naming job_name, inst_id, user, status, start_time, end_time, "
                "and its first row (job_id, model, task, gpus, arrival_s, iter_time_s, …) is not a headerless row"),
    ("philly-json", "line 1, column 1: not a Philly JSON trace: not valid JSON (Expecting value)"),
    ("auto", "a workload file (the replay format: job_id, model, gpus, arrival_s, total_iters, …), not a trace"),
]


@pytest.mark.parametrize("fmt, message", WRONG_FORMAT)
def test_a_file_of_another_format_is_said_not_to_be_a_trace_of_that_format(tmp_path, fmt, message):
    path = _write(tmp_path / "w.csv", HEADER + GOOD)
    err = _error(lambda p: load_trace(p, fmt), path)
    assert message in err and "does not exist" not in err


def test_alibaba_on_a_philly_csv_is_not_said_to_miss_a_task_table(tmp_path):
    err = _error(lambda p: load_trace(p, "alibaba"), _write(tmp_path / "philly.csv", PHILLY))
    assert "not an Alibaba PAI job table" in err and "(timestamp, duration, num_gpus, gpu_time, cluster)" in err
    jobs = _write(tmp_path / "pai_job_table.csv", "j1,1,u,Terminated,1000,8200\n")  # headerless, as released
    assert f"its Alibaba PAI task table '{tmp_path / 'pai_task_table.csv'}' does not exist" in _error(
        lambda p: load_trace(p, "alibaba"), jobs)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "name, content, message",
    [
        ("t.csv.gz", lambda: gzip.compress(PHILLY.encode())[:40], "the gzip data is truncated"),
        ("t.csv.gz", lambda: PHILLY, "not valid gzip data, though its name ends in .gz"),
        ("t.csv", lambda: bytes(range(128, 256)), "line 1: not UTF-8 text (byte 0x80)"),
        ("t.csv", lambda: PHILLY.replace("a\n", "\xe9\n").encode("latin-1"), "line 2: not UTF-8 text (byte 0xe9)"),
        ("t.csv", lambda: PHILLY.encode("utf-16-le"), "line 1: not a text file (it holds a NUL byte"),
        ("t.csv", lambda: PHILLY.encode("utf-16"), "line 1: UTF-16 text (it starts with a UTF-16 byte-order mark)"),
    ],
)
def test_an_undecodable_trace_gets_one_line_naming_it(tmp_path, fmt, name, content, message):
    if fmt == "alibaba":
        name = "pai_job_table" + name[1:]
    assert message in _error(lambda p: load_trace(p, fmt), _write(tmp_path / name, content()))


@pytest.mark.parametrize("fmt", ["philly-csv", "helios", "alibaba"])
@pytest.mark.parametrize("content, message", [("", "the file is empty"), ("a,b\n1,2,3\n", "not")])
def test_an_empty_or_ragged_trace_gets_one_line(tmp_path, fmt, content, message):
    assert message in _error(lambda p: load_trace(p, fmt), _write(tmp_path / "t.csv", content))


def test_a_json_trace_that_is_not_a_list_of_jobs(tmp_path):
    read = lambda p: load_trace(p, "philly-json")  # noqa: E731
    assert "not a Philly JSON trace: expected a JSON list of jobs" in _error(read, _write(tmp_path / "a.json", "{}"))
    assert "line 2, column 1: not a Philly JSON trace: not valid JSON" in _error(read, _write(tmp_path / "b.json", "[\n}"))
    assert "not a Philly JSON trace: nested too deeply" in _error(read, _write(tmp_path / "c.json", "[" * 100_000))
    assert "no job with a usable attempt (1 job not an object)" in _error(read, _write(tmp_path / "d.json", "[1]"))


def test_compressed_traces_are_detected_and_read(tmp_path):
    plain = load_trace(_write(tmp_path / "p.csv", PHILLY), philly_duration_filter=False)
    packed = load_trace(_write(tmp_path / "p.csv.gz", gzip.compress(PHILLY.encode())), philly_duration_filter=False)
    assert packed.duration_s.tolist() == plain.duration_s.tolist() and packed.gpus.tolist() == plain.gpus.tolist()
    log = [{"submitted_time": "2017-10-01 00:00:00", "attempts": [
        {"start_time": "2017-10-01 00:10:00", "end_time": "2017-10-01 02:10:00", "detail": [{"gpus": ["g0"]}]}]}]
    js = load_trace(_write(tmp_path / "log.json.xz", lzma.compress(json.dumps(log).encode())))
    assert js.duration_s.tolist() == [7200.0]


def test_trace_rows_stay_skipped_and_counted(tmp_path):
    with pytest.warns(TraceWarning, match="1 missing or non-numeric num_gpus"):
        trace = load_trace(_write(tmp_path / "p.csv", PHILLY + "2017-10-09 09:00:00,7200.0\n"),
                           philly_duration_filter=False)
    assert len(trace) == 6


# -- 4. end to end: one line, exit status 2, nothing written --------------------------------------------------------


@pytest.mark.parametrize(
    "command, make, message",
    [
        (["compare", "--quiet", "--workload", "{f}"], ("w.csv.gz", gzip.compress((HEADER + GOOD).encode())[:30]),
         "the gzip data is truncated"),
        (["compare", "--quiet", "--workload", "{f}"], ("w.csv", HEADER + GOOD + _row(in_measured_window="7")),
         "row 3: job 1: in_measured_window='7' must be 0, 1, true or false"),
        (["compare", "--quiet", "--workload", "{f}"], ("w.csv", HEADER + GOOD + _row(fair_duration_s="inf")),
         "row 3: job 1: fair_duration_s=inf must be finite"),
        (["compare", "--quiet", "--trace", "{f}", "--trace-format", "alibaba"], ("p.csv", PHILLY),
         "not an Alibaba PAI job table"),
        (["trace-stats", "{f}", "--format", "alibaba"], ("p.csv", PHILLY), "not an Alibaba PAI job table"),
        (["trace-stats", "{f}"], ("p.csv", bytes(range(128, 256))), "line 1: not UTF-8 text"),
        (["trace-stats", "{f}", "--format", "helios"], ("p.csv.gz", PHILLY), "not valid gzip data"),
    ],
)
def test_the_commands_print_one_line_and_write_nothing(tmp_path, capsys, command, make, message):
    path = _write(tmp_path / make[0], make[1])
    out = tmp_path / "out"
    assert main([*(a.format(f=path) for a in command), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    assert captured.err.startswith(f"synergy-gym {command[0]}: error: {path}: ") and message in captured.err
    assert not out.exists()


def test_workload_errors_are_workload_errors(tmp_path):
    with pytest.raises(WorkloadError):
        read_workload_csv(_write(tmp_path / "w.csv", HEADER + GOOD + _row(task="quantum")))


def test_a_trace_with_no_usable_row_is_one_error_without_a_warning_before_it(tmp_path):
    rows = "".join(f"2017-10-09 0{h}:00:00,3600.0,-0,1.0,a\n" for h in range(3))
    path = _write(tmp_path / "p.csv", PHILLY.splitlines(keepends=True)[0] + rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        message = _error(lambda p: load_trace(p, "philly-csv"), path)
    assert "no usable job (skipped 3 malformed row(s): 3 num_gpus not a positive integer)" in message


@pytest.mark.parametrize("name, text", [
    ("p.csv", "timestamp,duration,num_gpus,duration\n0,3000,1,99999\n"),
    ("cluster_log.csv", "job_id,gpu_num,cpu_num,submit_time,duration,gpu_num\n1,1,4,2020-04-01 00:00:00,7200,8\n"),
])
def test_a_trace_header_naming_a_column_twice_is_refused_not_read_by_its_first(tmp_path, name, text):
    # pandas renames the second to "duration.1": the reader used the first and the other value was lost unseen
    message = _error(load_trace, _write(tmp_path / name, text))
    assert message.endswith("appears twice in the header") and ("'duration'" in message or "'gpu_num'" in message)


def test_a_long_row_after_a_quoted_cell_spanning_lines_is_named_by_its_own_line(tmp_path):
    path = _write(tmp_path / "p.csv", 'timestamp,duration,num_gpus\n0,3000,1\n"1\n00",3000,1\n200,3000,1,9\n')
    assert _error(load_trace, path).endswith("row 5 has 4 cells, but the header names 3 columns")


def test_a_philly_json_job_listed_twice_runs_once_and_the_copy_is_counted(tmp_path):
    attempt = {"start_time": "2017-10-09 01:00:00", "end_time": "2017-10-09 03:00:00", "detail": [{"gpus": ["g0"]}]}
    jobs = [{"jobid": f"app_{i}", "submitted_time": f"2017-10-09 0{i}:00:00", "attempts": [attempt]} for i in range(2)]
    path = _write(tmp_path / "log.json", json.dumps([*jobs, jobs[0]]))
    with pytest.warns(TraceWarning, match=r"skipped 1 malformed row\(s\): 1 jobid repeated \(a later copy\)"):
        trace = load_trace(path)
    assert trace.submit_s.tolist() == [0.0, 3600.0]
