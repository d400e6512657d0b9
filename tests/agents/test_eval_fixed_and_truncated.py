"""``evaluate`` says what its numbers are of: no made-up load for jobs from a file, truncation counted per seed.

A fixed workload (env kwarg ``workload=`` or ``trace=``) has no load of the generator's, so ``load`` is
missing (empty in ``results.csv``), as ``compare`` leaves it. The models' mean row counts the seeds on
which any model was truncated (never more than its episodes). ``jct_cdf.png`` is of the finished jobs
where episodes were truncated, marks the truncated policies and names one that finished no job.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import synergy_gym.agents.eval_outputs as eval_outputs
import synergy_gym.agents.evaluate as evaluate
from synergy_gym import SyntheticWorkload
from synergy_gym.agents.eval_outputs import cdf_curves
from synergy_gym.agents.eval_summary import format_summary, summarise, summary_records
from synergy_gym.traces.replay import write_workload_csv
from tests.support.cli_runs import run_cli

SMALL = "Synergy-small-v0"


@pytest.fixture
def workload_csv(tmp_path):
    w = SyntheticWorkload(jobs_per_hour=6.0, seed=3, num_jobs=12, max_gpus=32).build()
    return write_workload_csv(w, tmp_path / "w.csv")


def _philly(path):
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                    + "".join(f"{1000 + 600 * i},{4000 + 100 * i},1,{4000 + 100 * i},vc1\n" for i in range(12)))
    return path


def test_jobs_from_a_file_have_no_load_and_generated_ones_their_rate(workload_csv, tmp_path):
    fixed, _ = evaluate.run_policies(SMALL, {"workload": str(workload_csv)}, [1], ("fifo+tune",), ("no-wait-bound",))
    assert len(fixed) == 2 and fixed["load"].isna().all()  # not the scenario's 2.25 jobs/h
    generated, _ = evaluate.run_policies(SMALL, {"num_jobs": 12}, [1], ("fifo+tune",))
    assert generated["load"].tolist() == [2.25]
    assert math.isnan(evaluate.workload_load(SMALL, {"trace": str(_philly(tmp_path / "philly.csv")), "num_jobs": 10}))
    assert evaluate.workload_load(SMALL, {}) == 2.25 and evaluate.workload_load(SMALL, {"jobs_per_hour": 4}) == 4.0


def test_the_command_leaves_a_fixed_workload_s_load_empty(workload_csv, tmp_path, capsys, monkeypatch):
    drawn = []
    monkeypatch.setattr(eval_outputs, "jct_cdf_png", lambda cdf, title, jobs: drawn.append(cdf) or b"")
    code, _, err = run_cli(["evaluate", "--env", SMALL, "--env-kwargs", f"workload={workload_csv}", "--seeds", "1",
                            "--baselines", "env:fifo+tune", "--sim-policies", "none", "--quiet",
                            "--out", str(tmp_path / "e")], capsys)
    assert code == 0, err
    table = pd.read_csv(tmp_path / "e" / "results.csv")
    assert table["load"].isna().all() and table["mean_jct_h"].notna().all()
    assert [panel for _, panel in drawn[0]] == ["fixed workload"]  # not "load nan jobs/h"


def _episodes(truncated: dict[str, set[int]], seeds=(1, 2, 3)) -> pd.DataFrame:
    return pd.DataFrame([{"policy": p, "source": "agent" if p != "fifo+tune" else "env", "seed": s, "mean_jct_h": 10.0 + s,
                          "p99_jct_h": 20.0, "makespan_h": 30.0, "terminated": s not in cut, "wall_s": 1.0}
                         for p, cut in truncated.items() for s in seeds])


@pytest.mark.parametrize(("cut", "expected"), [({"a": {1, 2}, "b": {2, 3}}, 3), ({"a": {1}, "b": {1}}, 1),
                                               ({"a": set(), "b": {3}}, 1), ({"a": set(), "b": set()}, 0)])
def test_the_models_mean_row_counts_the_seeds_any_model_truncated(cut, expected):
    summary = summarise(_episodes({**cut, "fifo+tune": {1, 2, 3}}))
    rows = {r["policy"]: r for r in summary_records(summary)}
    assert rows["agent"]["episodes"] == 3 and rows["agent"]["truncated"] == expected <= rows["agent"]["episodes"]
    assert (rows["a"]["truncated"], rows["b"]["truncated"], rows["fifo+tune"]["truncated"]) == \
        (len(cut["a"]), len(cut["b"]), 3)  # a single policy's: its episodes
    line = next(x for x in format_summary(summary, [1, 2, 3], SMALL).splitlines() if x.startswith("agent "))
    assert line.endswith(f"({expected} truncated)") if expected else "truncated" not in line


def test_cdf_labels_mark_truncated_policies_and_keep_one_without_finished_jobs():
    summary = pd.DataFrame({"policy": ["a", "fifo+tune", "srtf+tune", "no-wait-bound", "contention-bound"],
                            "source": ["agent", "env", "env", "bound", "bound"], "mean_jct_h": [1.0, 2.0, 3.0, 0.5, 0.6],
                            "truncated": [2, 0, 3, 0, 0]})
    jcts = {("a", "agent"): np.ones(4), ("fifo+tune", "env"): np.ones(5), ("srtf+tune", "env"): np.array([]),
            ("no-wait-bound", "bound"): np.ones(6), ("contention-bound", "bound"): np.array([])}
    curves = cdf_curves(jcts, summary, plot_all=True)
    assert list(curves) == ["a (agent, 2 truncated)", "fifo+tune (env, best heuristic)", "srtf+tune (env, 3 truncated)",
                            "no-wait-bound (bound)"]  # the contention bound has no per-job JCTs at all
    title, jobs, cdf = eval_outputs.cdf_figure(jcts, summary, 2.25, plot_all=True)
    assert [label for label, _ in cdf] == ["a (agent, 2 truncated)", "fifo+tune (env, best heuristic)",
                                          "no-wait-bound (bound)"]
    assert "the finished jobs" in title and "every job" not in title and jobs == "finished jobs of the episodes"
    assert title.endswith("no finished job, no curve: srtf+tune (env, 3 truncated)") and "4 policies" in title
    untruncated = summary.assign(truncated=0)
    title, jobs, _ = eval_outputs.cdf_figure({k: v for k, v in jcts.items() if v.size}, untruncated, 2.25)
    assert "every job of the evaluation episodes" in title and jobs == "jobs of the episodes"
    assert "no finished job" not in title


def test_the_command_names_a_policy_that_finished_no_job(tmp_path, capsys, monkeypatch):
    drawn = []
    monkeypatch.setattr(eval_outputs, "jct_cdf_png", lambda cdf, title, jobs: drawn.append((cdf, title, jobs)) or b"")
    code, out, err = run_cli(["evaluate", "--env", SMALL, "--env-kwargs", "num_jobs=12", "max_rounds=2", "--seeds", "1",
                              "--baselines", "env:fifo+tune,sim:no-wait-bound", "--quiet",
                              "--out", str(tmp_path / "e")], capsys)
    assert code == 0, err
    assert "(1 truncated)" in out  # the env heuristic's episode stops after two rounds, before any job finishes
    (cdf, title, jobs), = drawn
    assert [label for label, _ in cdf] == ["no-wait-bound (bound)"]
    assert title.endswith("no finished job, no curve: fifo+tune (env, best heuristic, 1 truncated)")
    assert "the finished jobs" in title and jobs == "finished jobs of the episodes"


@pytest.mark.parametrize("env_jobs, expected", [
    (np.array([]), ["fifo+tune (env, best heuristic, 1 truncated)", "fifo+tune (sim)"]),  # the sim's drawn too
    (np.ones(3), ["fifo+tune (env, best heuristic, 1 truncated)"]),
])
def test_the_default_curves_fall_back_on_the_simulators_fifo_tune_when_the_env_s_finished_none(env_jobs, expected):
    summary = pd.DataFrame({"policy": ["fifo+tune", "fifo+tune"], "source": ["env", "sim"], "mean_jct_h": [2.0, 1.0],
                            "truncated": [1, 0]})
    jcts = {("fifo+tune", "env"): env_jobs, ("fifo+tune", "sim"): np.ones(4)}
    assert list(cdf_curves(jcts, summary)) == expected


def test_evaluate_warns_of_episodes_cut_off_at_max_rounds_naming_the_seeds_and_not_of_finished_ones():
    # A policy that leaves jobs waiting until max_rounds got a mean JCT that looked good and said nothing in Python
    # (the command's table marks it "(N truncated)").
    from synergy_gym import TruncatedEpisodesWarning, evaluate
    from synergy_gym.baselines.env_heuristics import env_heuristics

    fifo = env_heuristics()["fifo+tune"]
    with pytest.warns(TruncatedEpisodesWarning) as caught:
        frame = evaluate(fifo, SMALL, seeds=[0, 1], num_jobs=12, max_rounds=2)
    assert frame["terminated"].tolist() == [False, False]
    message = str(caught[0].message)
    assert message.startswith("evaluate(): 2 of 2 episodes of fifo+tune cut off at max_rounds (seeds 0, 1) with jobs")
    assert caught[0].filename == __file__  # pointed at the caller
    with pytest.warns(TruncatedEpisodesWarning, match=r"^evaluate\(\): 1 of 1 episode of fifo\+tune cut off at max_rounds "
                      r"\(seed 7\)"):
        evaluate(fifo, SMALL, seeds=[7], num_jobs=12, max_rounds=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedEpisodesWarning)
        frame = evaluate(fifo, SMALL, seeds=[0], num_jobs=12)  # finished: no warning
    assert frame["terminated"].tolist() == [True]
