"""Workload generation, replay files and Philly-style traces."""

import numpy as np
import pandas as pd
import pytest

from synergy_gym import ClusterSpec, Simulator, WorkloadError
from synergy_gym.baselines import make_policy
from synergy_gym.sim.generator import DEFAULT_WINDOW, SyntheticWorkload
from synergy_gym.sim.model_mix import ModelAssigner, parse_split
from synergy_gym.sim.philly_gpu_mix import PHILLY_GPU_COUNTS, gpu_mix
from synergy_gym.sim.workload import middle_half_window
from synergy_gym.traces.alibaba import read_alibaba
from synergy_gym.traces.loader import load_trace
from synergy_gym.traces.philly import read_philly_csv, read_philly_json
from synergy_gym.traces.replay import read_workload_csv, write_workload_csv
from synergy_gym.traces.trace_jobs import TraceWarning, sample_workload, to_workload


def test_synthetic_durations_arrivals_and_split(zoo):
    w = SyntheticWorkload(jobs_per_hour=9, seed=1, num_jobs=20000).build()
    duration = w.fair_duration_s
    assert duration.min() >= 60 * 10**1.5 - 1 and duration.max() <= 60 * 10**4
    short = duration < 60 * 10**3
    assert short.mean() == pytest.approx(0.8, abs=0.01)
    gaps = np.diff(w.arrival_s)
    assert np.all(gaps == np.round(gaps)) and gaps.min() >= 0
    assert gaps.mean() == pytest.approx(3600 / 9 + 0.5, rel=0.03)  # ceil adds half a second on average
    tasks = np.array([zoo[m].task for m in w.model])
    assert [(tasks == t).sum() for t in ("vision", "language", "speech")] == [4000, 14000, 2000]
    assert np.all(w.gpus == 1)


def test_models_take_turns_within_a_task(zoo):
    models = ModelAssigner(zoo).assign(10)
    assert [zoo[m].name for m in models] == [
        "alexnet", "gnmt", "transformer", "m5", "lstm", "gnmt", "res18", "transformer", "lstm", "gnmt",
    ]


def test_model_mix_matches_the_reference_workload(zoo, shared_dir):
    frame = pd.read_csv(shared_dir / "synergy" / "reference_workloads" / "workload_single_gpu_load9.csv")
    models = ModelAssigner(zoo).assign(len(frame))
    assert (np.asarray(zoo.names)[models] == frame["model"].to_numpy()).all()


def test_class_split_validation(zoo):
    assert parse_split("30/60/10") == (30, 60, 10)
    with pytest.raises(WorkloadError, match="three numbers"):
        parse_split("50/50")
    with pytest.raises(WorkloadError, match="non-negative weights"):
        ModelAssigner(zoo, (-1, 50, 51))
    only_language = ModelAssigner(zoo, (0, 100, 0)).assign(30)
    assert {zoo[m].task for m in only_language} == {"language"}


def test_windows_and_run_ends():
    open_ended, more = SyntheticWorkload(seed=3).stream()
    assert len(open_ended) == DEFAULT_WINDOW[1] and open_ended.run_until == "window"
    assert np.flatnonzero(open_ended.measured).tolist() == list(range(4000, 5000))
    extra = next(more)
    assert extra.job_id[0] == 5000 and not extra.measured.any() and extra.arrival_s[0] >= open_ended.arrival_s[-1]
    fixed = SyntheticWorkload(seed=3, num_jobs=100).build()
    assert fixed.run_until == "all" and np.flatnonzero(fixed.measured).tolist() == list(range(25, 75))
    assert middle_half_window(1) == (0, 1) and middle_half_window(3) == (0, 2)
    custom = SyntheticWorkload(seed=3, num_jobs=100, window=(10, 20)).build()
    assert np.flatnonzero(custom.measured).tolist() == list(range(10, 20))
    with pytest.raises(WorkloadError, match="window 90:120 must satisfy 0 ≤ A < B ≤ 100"):
        SyntheticWorkload(num_jobs=100, window=(90, 120))


def test_chunking_does_not_change_the_jobs():
    first, more = SyntheticWorkload(seed=11, window=(0, 100), multigpu=True).stream()
    streamed = first.concat(next(more))
    whole = SyntheticWorkload(seed=11, num_jobs=len(streamed), window=(0, 100), multigpu=True).build()
    for name in ("arrival_s", "model", "gpus", "total_iters"):
        assert np.array_equal(getattr(streamed, name), getattr(whole, name))


def test_multigpu_draws_from_the_philly_mix():
    w = SyntheticWorkload(seed=5, num_jobs=20000, multigpu=True, max_gpus=128).build()
    counts, probs = gpu_mix(128)
    assert set(np.unique(w.gpus)) <= set(counts.tolist())
    assert (w.gpus == 1).mean() == pytest.approx(probs[0], abs=0.01)
    assert (w.gpus > 1).any()
    small = SyntheticWorkload(seed=5, num_jobs=2000, multigpu=True, max_gpus=8).build()
    assert small.gpus.max() <= 8
    assert sum(PHILLY_GPU_COUNTS.values()) == 82247


def test_workload_csv_round_trip_replays_identically(tmp_path, zoo):
    w = SyntheticWorkload(seed=8, num_jobs=200, multigpu=True, max_gpus=32).build()
    path = write_workload_csv(w, tmp_path / "w.csv")
    back = read_workload_csv(path, run_until="all")
    for name in ("job_id", "model", "gpus", "arrival_s", "total_iters", "iter_time_s", "measured"):
        assert np.array_equal(getattr(back, name), getattr(w, name)), name
    cluster = ClusterSpec(num_servers=4)
    a = Simulator(cluster, w, make_policy("fifo+tune")).run()
    b = Simulator(cluster, back, make_policy("fifo+tune")).run()
    assert a.jobs["finish_s"].equals(b.jobs["finish_s"])


def test_replay_reads_the_reference_multigpu_workload(shared_dir):
    w = read_workload_csv(shared_dir / "synergy" / "reference_workloads" / "workload_multigpu_SUBSTITUTE_load3.csv")
    assert set(np.unique(w.gpus)) == {1, 2, 4, 8}
    cpu, mem = w.demand_per_gpu(ClusterSpec())
    alex4 = (w.model == 0) & (w.gpus == 4)
    assert np.all(cpu[alex4] == 6) and np.all(mem[alex4] == 125)  # 24 CPUs and 500 GB over 4 GPUs


def _write(tmp_path, text, name="w.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


HEADER = "job_id,model,gpus,arrival_s,total_iters,in_measured_window\n"


@pytest.mark.parametrize(
    "body, message",
    [
        ("job_id,model,gpus,total_iters,in_measured_window\n0,gnmt,1,10,1\n", "missing column(s) arrival_s"),
        (HEADER + "0,gnmt,1,0,-10,1\n", "job 0: total_iters=-10 must be a positive integer"),
        (HEADER + "0,resnet9000,1,0,10,1\n", "job 0: unknown model 'resnet9000'"),
        (HEADER + "0,gnmt,1,soon,10,1\n", "row 2: column arrival_s is not a number: 'soon'"),
        (HEADER + "0,gnmt,1,,10,1\n", "row 2: column arrival_s is empty"),
        ("job_id,model,gpus,arrival_s,total_iters,fair_duration_s,in_measured_window\n0,gnmt,1,0,10,-5,1\n",
         "job 0: fair_duration_s=-5.0 must be > 0"),
        ("", "not a readable CSV"),
    ],
)
def test_bad_workload_files_give_one_line_errors(tmp_path, body, message):
    with pytest.raises(WorkloadError) as e:
        read_workload_csv(_write(tmp_path, body))
    assert message in str(e.value) and "\n" not in str(e.value)


PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,6000.0,1,6000.0,a
2017-10-09 06:00:00,3600.0,8,28800.0,b
2017-10-09 06:30:00,12000.0,2,24000.0,a
2017-10-10 06:00:00,7200.0,1,7200.0,c
2017-10-10 07:00:00,60.0,1,60.0,c
"""


LEFT_OUT = "left out 1 of 5 job\\(s\\) lasting outside the paper's range of 31.6 min to 6.9 days"


def test_philly_csv_keeps_submit_times_durations_and_gpus(tmp_path, zoo):
    with pytest.warns(TraceWarning, match=LEFT_OUT):  # the filtered job is counted, not dropped silently
        trace = read_philly_csv(_write(tmp_path, PHILLY, "p.csv"))
    assert trace.filtered == 1  # the 60 s job is below the paper's 31.6-minute cut
    assert trace.submit_s.tolist() == [0.0, 1800.0, 3715.0, 86400.0]
    assert trace.gpus.tolist() == [8, 2, 1, 1]
    w = to_workload(trace)
    durations = np.array([3600.0, 12000.0, 6000.0, 7200.0])
    assert np.array_equal(w.total_iters, np.ceil(durations / w.iter_time_s))
    assert w.run_until == "all" and w.measured.tolist() == [False, True, True, False]
    assert len(to_workload(trace, max_jobs=2)) == 2
    assert to_workload(trace, arrival_scale=0.5).arrival_s.tolist() == [0.0, 900.0, 1857.5, 43200.0]
    assert len(read_philly_csv(_write(tmp_path, PHILLY, "p.csv"), duration_range=None)) == 5


@pytest.mark.parametrize(
    "row, reason",
    [
        ("yesterday,6000,1,600,a", "1 bad or missing timestamp"),
        ("2017-10-09 07:01:55,-600,1,600,a", "1 duration ≤ 0"),
        ("2017-10-09 07:01:55,6000,0,600,a", "1 num_gpus not a positive integer"),
        ("2017-10-09 07:01:55,,1,600,a", "1 missing or non-numeric duration"),
    ],
)
def test_malformed_philly_rows_are_skipped_and_counted(tmp_path, row, reason):
    text = PHILLY + row + "\n"
    with pytest.warns(TraceWarning, match=LEFT_OUT), \
            pytest.warns(TraceWarning, match=f"skipped 1 malformed row\\(s\\): {reason}"):
        trace = read_philly_csv(_write(tmp_path, text))
    assert len(trace) == 4 and sum(trace.skipped.values()) == 1


def test_philly_files_that_are_not_traces_are_rejected(tmp_path):
    with pytest.raises(WorkloadError, match="missing column\\(s\\) num_gpus"):
        read_philly_csv(_write(tmp_path, "timestamp,duration\n2017-10-09 07:01:55,6000\n"))
    with pytest.raises(WorkloadError, match="no usable job"):
        read_philly_csv(_write(tmp_path, "timestamp,duration,num_gpus\n2017-10-09 07:01:55,60,1\n"))


PHILLY_LOG = [
    {"jobid": "a", "user": "u1", "vc": "v", "status": "Pass", "submitted_time": "2017-10-01 00:00:00",
     "attempts": [{"start_time": "2017-10-01 00:10:00", "end_time": "2017-10-01 01:10:00",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}, {"ip": "m2", "gpus": ["gpu0", "gpu1"]}]},
                  {"start_time": "2017-10-01 02:00:00", "end_time": "2017-10-01 03:00:00",
                   "detail": [{"ip": "m3", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]}]}]},
    {"jobid": "b", "user": "u2", "vc": "v", "status": "Killed", "submitted_time": "2017-10-01 00:30:00",
     "attempts": [{"start_time": "None", "end_time": "None", "detail": []},
                  {"start_time": "2017-10-01 00:40:00", "end_time": "2017-10-01 01:40:00",
                   "detail": [{"ip": "m1", "gpus": ["gpu3"]}]}]},
    {"jobid": "c", "user": "u3", "vc": "v", "status": "Failed", "submitted_time": "2017-10-01 00:45:00", "attempts": []},
    {"jobid": "d", "user": "u3", "vc": "v", "status": "Pass", "submitted_time": "not a time",
     "attempts": [{"start_time": "2017-10-01 00:40:00", "end_time": "2017-10-01 03:40:00",
                   "detail": [{"ip": "m", "gpus": ["g"]}]}]},
    {"jobid": "e", "user": "u3", "vc": "v", "status": "Pass", "submitted_time": "2017-10-01 00:50:00",
     "attempts": [{"start_time": "2017-10-01 01:00:00", "end_time": "2017-10-01 01:05:00",
                   "detail": [{"ip": "m", "gpus": ["g"]}]}]},
]


def test_philly_job_log_sums_attempts_and_applies_the_papers_filters(tmp_path):
    import json

    path = _write(tmp_path, json.dumps(PHILLY_LOG), "cluster_job_log")
    with pytest.warns(TraceWarning, match="left out 1 of 3 job"), \
            pytest.warns(TraceWarning, match="1 bad or missing submitted_time, 1 no usable attempt"):
        trace = read_philly_json(path)
    assert trace.submit_s.tolist() == [0.0, 1800.0]  # a and b; e (5 min) is filtered out
    assert trace.duration_s.tolist() == [7200.0, 3600.0]  # a: two one-hour attempts
    assert trace.gpus.tolist() == [4, 1]  # a: its last attempt's GPUs
    assert trace.filtered == 1
    with pytest.raises(WorkloadError, match="not valid JSON"):
        read_philly_json(_write(tmp_path, "{oops", "bad.json"))


ALIBABA_JOBS = """job_name,inst_id,user,status,start_time,end_time
j1,1,u,Terminated,1000,8200
j2,2,u,Terminated,2000,12800
j3,3,u,Terminated,3000,2000
j4,4,u,Terminated,4000,9000
j5,5,u,Failed,,9000
"""
ALIBABA_TASKS = """job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type
j1,worker,2,Terminated,1000,8200,600,30,100,V100
j1,ps,1,Terminated,1000,8200,400,10,,
j2,tensorflow,1,Terminated,2000,12800,800,60,50,T4
j3,worker,1,Terminated,3000,2000,600,30,100,V100
j4,worker,1,Terminated,4000,9000,600,30,,
j5,worker,1,Terminated,4000,9000,600,30,100,V100
"""


def test_alibaba_jobs_get_their_requested_share(tmp_path):
    jobs = _write(tmp_path, ALIBABA_JOBS, "pai_job_table.csv")
    _write(tmp_path, ALIBABA_TASKS, "pai_task_table.csv")
    with pytest.warns(TraceWarning, match="1 bad or missing time, 1 duration ≤ 0, 1 no GPU"):
        trace = read_alibaba(jobs)
    assert trace.gpus.tolist() == [2, 1]  # j1: 2 workers × 1 GPU; j2: half a GPU → 1
    assert trace.cpu_per_gpu.tolist() == [8.0, 8.0]  # j1: (2·6 + 4) CPUs over 2 GPUs
    assert trace.mem_per_gpu.tolist() == [35.0, 60.0]
    assert trace.duration_s.tolist() == [7200.0, 10800.0] and trace.submit_s.tolist() == [0.0, 1000.0]
    w = to_workload(trace)
    assert w.cpu_demand_per_gpu.tolist() == [8.0, 8.0]
    # The released files have no header row: columns in the documented order.
    headless = tmp_path / "raw"
    headless.mkdir()
    _write(headless, ALIBABA_JOBS.split("\n", 1)[1], "pai_job_table.csv")
    _write(headless, ALIBABA_TASKS.split("\n", 1)[1], "pai_task_table.csv")
    with pytest.warns(TraceWarning):
        assert len(load_trace(headless)) == 2  # the folder, format detected

    # A folder of compressed tables, as a compressed job table named directly is read: it was "a folder without
    # pai_job_table.csv".
    import gzip

    packed = tmp_path / "packed"
    packed.mkdir()
    for name in ("pai_job_table.csv", "pai_task_table.csv"):
        (packed / f"{name}.gz").write_bytes(gzip.compress((headless / name).read_bytes()))
    with pytest.warns(TraceWarning):
        assert load_trace(packed).gpus.tolist() == load_trace(headless).gpus.tolist()
    (packed / "pai_job_table.csv").write_bytes((headless / "pai_job_table.csv").read_bytes())
    with pytest.raises(WorkloadError, match="holds pai_job_table.csv and pai_job_table.csv.gz: name the file"):
        load_trace(packed)


HELIOS = """job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1,u,v,8,64,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:01:00,2020-04-01 02:01:00,7200,60
2,u,v,0,4,1,COMPLETED,2020-04-01 00:05:00,2020-04-01 00:05:00,2020-04-01 00:10:00,300,0
3,u,v,2,,1,FAILED,2020-04-01 00:10:00,2020-04-01 00:20:00,2020-04-01 01:20:00,3600,600
4,u,v,1,6,1,COMPLETED,bad,2020-04-01 00:20:00,2020-04-01 01:20:00,3600,600
"""


def test_helios_jobs_and_cpu_requests(tmp_path):
    path = _write(tmp_path, HELIOS, "cluster_log.csv")
    with pytest.warns(TraceWarning, match="1 bad or missing submit_time \\(YYYY-MM-DD HH:MM:SS\\), 1 no GPU"):
        trace = load_trace(path)
    assert trace.gpus.tolist() == [8, 2] and trace.duration_s.tolist() == [7200.0, 3600.0]
    assert trace.cpu_per_gpu[0] == 8.0 and np.isnan(trace.cpu_per_gpu[1])  # no cpu_num: the model's demand


def test_sampled_workload_draws_from_the_joint_distribution(tmp_path):
    with pytest.warns(TraceWarning, match=LEFT_OUT):
        trace = read_philly_csv(_write(tmp_path, PHILLY, "p.csv"))
    w = sample_workload(trace, num_jobs=400, jobs_per_hour=5, seed=1)
    pairs = set(zip(trace.gpus.tolist(), trace.duration_s.tolist()))
    fair = w.total_iters * w.iter_time_s
    assert all(any(g == pg and abs(f - d) < 1 for pg, d in pairs) for g, f in zip(w.gpus.tolist(), fair.tolist()))
    assert np.mean(np.diff(w.arrival_s)) == pytest.approx(720.5, rel=0.15)
    assert np.array_equal(sample_workload(trace, 50, 5, seed=2).arrival_s, sample_workload(trace, 50, 5, seed=2).arrival_s)


def test_trace_stats_command(tmp_path, capsys):
    from synergy_gym.cli import main

    assert main(["trace-stats", str(_write(tmp_path, PHILLY, "p.csv")), "--out", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    assert "jobs: 4" in out and "GPU-count mix: 1: 2 (50.0%), 2: 1 (25.0%), 8: 1 (25.0%)" in out
    assert "filtered (duration outside the paper's range): 1" in out and (tmp_path / "o" / "trace_stats.png").is_file()
    assert "left out" not in err  # no warning line: the summary counts them


def test_the_real_philly_trace_runs(shared_dir):
    with pytest.warns(TraceWarning, match="left out 50,522 of 82,247 job"):
        trace = read_philly_csv(shared_dir / "traces" / "philly_jobs.csv")
    assert np.all((trace.duration_s > 60 * 10**1.5) & (trace.duration_s < 60 * 10**4))
    w = to_workload(trace, max_jobs=400)
    assert len(w) == 400 and np.all(np.diff(w.arrival_s) >= 0)
    result = Simulator(ClusterSpec(), w, make_policy("fifo+tune")).run()
    assert result.jobs["finish_s"].notna().all()


def test_philly_job_log_times_do_not_depend_on_the_time_zone(tmp_path, monkeypatch):
    import json
    import time

    times = (
        ("a", "2017-11-04 12:00:00", "2017-11-04 14:00:00"),
        ("b", "2017-11-06 12:00:00", "2017-11-06 14:00:00"),
    )
    log = [
        {"jobid": k, "submitted_time": t,
         "attempts": [{"start_time": t, "end_time": e, "detail": [{"ip": "m", "gpus": ["g"]}]}]}
        for k, t, e in times
    ]
    path = _write(tmp_path, json.dumps(log), "log.json")
    monkeypatch.setenv("TZ", "America/Los_Angeles")  # a daylight-saving switch between the two jobs
    time.tzset()
    try:
        assert read_philly_json(path).submit_s.tolist() == [0.0, 2 * 86400.0]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_bad_row_in_a_seconds_timestamp_philly_csv_is_skipped(tmp_path):
    text = "timestamp,duration,num_gpus\n0,6000,1\n100,6000,1\nabc,6000,1\n"
    with pytest.warns(TraceWarning, match="1 bad or missing timestamp"):
        assert read_philly_csv(_write(tmp_path, text)).submit_s.tolist() == [0.0, 100.0]


def test_helios_without_durations_is_rejected_in_one_line(tmp_path):
    with pytest.raises(WorkloadError, match="missing column\\(s\\) duration \\(or start_time and end_time\\)"):
        load_trace(_write(tmp_path, "submit_time,gpu_num,cpu_num\n2020-04-01 00:00:00,1,8\n", "cluster_log.csv"))


@pytest.mark.parametrize("split", [(20, 70, 10), (60, 20, 20), (0, 100, 0), (33, 0, 67)])
def test_assign_in_one_loop_is_next_model_job_by_job(zoo, split):
    # ``assign`` is the generator's fast path; it must hand out what ``next_model`` would, and leave
    # the assigner where ``next_model`` would (a second batch continues the same stream).
    one_loop, job_by_job = ModelAssigner(zoo, split), ModelAssigner(zoo, split)
    first = one_loop.assign(257)
    second = one_loop.assign(31)
    expected = [job_by_job.next_model() for _ in range(257 + 31)]
    assert np.concatenate([first, second]).tolist() == expected
    assert one_loop.assign(0).shape == (0,)
