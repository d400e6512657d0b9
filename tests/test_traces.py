"""Workload generation, replay files and Philly-style traces."""

import numpy as np
import pandas as pd
import pytest

from baselines import make_policy
from synergy_gym import ClusterSpec, Simulator, WorkloadError
from traces.model_mix import ModelAssigner, parse_split
from traces.philly import read_philly_csv
from traces.philly_gpu_mix import PHILLY_GPU_COUNTS, gpu_mix
from traces.replay import read_workload_csv, write_workload_csv
from traces.synthetic import DEFAULT_WINDOW, SyntheticWorkload, middle_half


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
    assert middle_half(1) == (0, 1) and middle_half(3) == (0, 2)
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
2017-10-09 07:01:55,600.0,1,600.0,a
2017-10-09 06:00:00,3600.0,8,28800.0,b
2017-10-09 06:30:00,120.0,2,240.0,a
2017-10-10 06:00:00,7200.0,1,7200.0,c
"""


def test_philly_trace_keeps_submit_times_durations_and_gpus(tmp_path, zoo):
    w = read_philly_csv(_write(tmp_path, PHILLY, "p.csv"))
    assert w.arrival_s.tolist() == [0.0, 1800.0, 3715.0, 86400.0]
    assert w.gpus.tolist() == [8, 2, 1, 1]
    durations = np.array([3600.0, 120.0, 600.0, 7200.0])
    assert np.array_equal(w.total_iters, np.ceil(durations / w.iter_time_s))
    assert w.run_until == "all" and w.measured.tolist() == [False, True, True, False]
    assert len(read_philly_csv(_write(tmp_path, PHILLY, "p.csv"), max_jobs=2)) == 2


@pytest.mark.parametrize(
    "row, message",
    [
        ("yesterday,600,1,600,a", "line 2: bad or missing timestamp"),
        ("2017-10-09 07:01:55,-600,1,600,a", "line 2: duration must be > 0"),
        ("2017-10-09 07:01:55,600,0,600,a", "line 2: num_gpus must be a positive integer"),
        ("2017-10-09 07:01:55,,1,600,a", "line 2: missing or non-numeric duration"),
    ],
)
def test_bad_philly_rows_are_rejected(tmp_path, row, message):
    with pytest.raises(WorkloadError, match=message):
        read_philly_csv(_write(tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n" + row + "\n"))


def test_the_real_philly_trace_runs(shared_dir):
    w = read_philly_csv(shared_dir / "traces" / "philly_jobs.csv", max_jobs=400)
    assert len(w) == 400 and np.all(np.diff(w.arrival_s) >= 0)
    result = Simulator(ClusterSpec(), w, make_policy("fifo+tune")).run()
    assert result.jobs["finish_s"].notna().all()
