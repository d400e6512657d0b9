"""The makespan by value: from the first arrival to the last finish (docs/model.md, docs/environment.md).

Checked where it is computed – the simulator's summary, the environment's final ``info`` of a terminated
episode, ``evaluate``'s per-seed rows – always on workloads whose first job arrives after t = 0, so that a
makespan measured from t = 0 differs; and ``evaluate``'s summary row, the mean of its per-seed rows.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from synergy_gym import FIFO, ClusterSpec, SchedulingPolicy, Simulator, SyntheticWorkload, Tune
from synergy_gym.baselines.env_heuristics import env_heuristics
from synergy_gym.cli import main
from synergy_gym.env import SynergyEnv
from synergy_gym.sim.cluster import load_cluster

ONE_GPU = ClusterSpec(num_servers=1, gpus_per_server=1, cpus_per_server=3, mem_gb_per_server=62.5)
FIFO_TUNE = SchedulingPolicy(FIFO(), Tune())


def test_a_simulator_run_s_makespan_starts_at_the_first_arrival_not_at_zero(make_workload):
    # One GPU, three one-round (300 s) gnmt jobs: 7200–7500, 7500–7800 and 9000–9300.
    w = make_workload(["gnmt"] * 3, arrivals=[7200, 7500, 9000], iters=[2500] * 3)
    result = Simulator(ONE_GPU, w, FIFO_TUNE).run()
    assert result.jobs["finish_s"].tolist() == [7500.0, 7800.0, 9300.0]
    assert result.summary.makespan_h == pytest.approx((9300 - 7200) / 3600, rel=1e-12)


def test_a_synthetic_run_s_makespan_is_its_last_finish_less_its_first_arrival():
    w = SyntheticWorkload(num_jobs=30, jobs_per_hour=20, seed=3).build()
    result = Simulator(load_cluster("small"), w, FIFO_TUNE).run()
    jobs = result.jobs
    assert jobs["finish_s"].notna().all() and jobs["arrival_s"].min() > 0
    expected = (jobs["finish_s"].max() - jobs["arrival_s"].min()) / 3600
    assert result.summary.makespan_h == pytest.approx(expected, rel=1e-12)


def test_a_terminated_episode_s_makespan_is_its_last_finish_less_its_first_arrival():
    env = SynergyEnv(cluster="small", num_jobs=30, jobs_per_hour=2.25, max_rounds=4000)
    policy = env_heuristics(0)["fifo+tune"]
    obs, _ = env.reset(seed=3)
    terminated = truncated = False
    while not (terminated or truncated):
        action, _ = policy.predict(obs, action_masks=env.action_masks())
        obs, _, terminated, truncated, info = env.step(int(action))
    assert terminated and info["jobs_finished"] == 30 and info["jobs_unfinished"] == 0
    finish, arrival = np.asarray(env.sim.jobs.finish_s), np.asarray(env.sim.jobs.arrival_s)
    assert not np.isnan(finish).any() and arrival.min() > 0
    assert finish.min() < finish.max()  # an earlier finish is not the last
    assert info["makespan_h"] == pytest.approx((finish.max() - arrival.min()) / 3600, rel=1e-12)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("evaluate_makespan")
    args = ["evaluate", "--env", "Synergy-small-v0", "--env-kwargs", "num_jobs=30", "--baselines",
            "env:fifo+tune,env:srtf+tune,sim:fifo+tune", "--seeds", "3..5", "--jobs-csv", str(folder / "jobs.csv"),
            "--out", str(folder / "e"), "--quiet"]
    assert main(args) == 0
    per_seed = pd.read_csv(folder / "e" / "results.csv")
    jobs = pd.read_csv(folder / "jobs.csv")
    summary = {(r["policy"], r["source"]): r for r in json.loads((folder / "e" / "results.json").read_text())["results"]}
    return per_seed, jobs, summary


def test_evaluate_s_per_seed_makespan_is_the_last_finish_less_the_first_arrival(evaluated):
    per_seed, jobs, _ = evaluated
    assert len(per_seed) == 9 and per_seed["terminated"].all()
    for row in per_seed.itertuples(index=False):
        episode = jobs[(jobs["policy"] == row.policy) & (jobs["source"] == row.source) & (jobs["seed"] == row.seed)]
        assert len(episode) == 30 and episode["finish_h"].notna().all() and episode["arrival_h"].min() > 0
        expected = episode["finish_h"].max() - episode["arrival_h"].min()
        assert row.makespan_h == pytest.approx(expected, rel=1e-9), (row.policy, row.source, row.seed)


def test_evaluate_s_summary_row_is_the_mean_of_its_per_seed_rows(evaluated):
    per_seed, _, summary = evaluated
    assert set(summary) == {("fifo+tune", "env"), ("srtf+tune", "env"), ("fifo+tune", "sim")}
    for (policy, source), row in summary.items():
        seeds = per_seed[(per_seed["policy"] == policy) & (per_seed["source"] == source)]
        assert len(seeds) == row["episodes"] == 3
        makespans = seeds["makespan_h"].tolist()
        assert max(makespans) - min(makespans) > 1.0  # the mean differs from the largest or smallest
        for column in ("makespan_h", "mean_jct_h", "p99_jct_h"):
            assert row[column] == pytest.approx(sum(seeds[column]) / 3, rel=1e-12), (policy, source, column)
        assert row["per_seed"] == {str(s): v for s, v in zip(seeds["seed"], seeds["mean_jct_h"])}
