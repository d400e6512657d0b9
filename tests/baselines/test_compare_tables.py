"""``compare`` builds its tables and figures without pandas, with pandas' numbers (``baselines/compare.py``, ``plots.py``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synergy_gym.baselines.compare import JSON_FIELDS, format_table, job_rows
from synergy_gym.baselines.compare_runs import CompareSpec, run_compare
from synergy_gym.baselines.plots import describe_runs, group_stats, make_avg_jct_figure
from synergy_gym.cli.csv_text import csv_text
from synergy_gym.cli.plots import pyplot
from synergy_gym.sim.cluster import load_cluster


@pytest.fixture(scope="module")
def outcome():
    spec = CompareSpec(policies=("fifo+fair", "fifo+tune"), loads=(2.0, 3.0), seeds=(1, 2), num_jobs=40,
                       cluster=load_cluster("small"))
    return run_compare(spec, show_progress=False)


def test_group_stats_are_pandas_groupby_mean_std_and_count_bit_for_bit():
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 6, 500).astype(float)
    values = rng.standard_normal(500) * 1e3 + 5e3
    values[::9] = np.nan
    groups = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0]  # 7.0: a group without rows
    mean, std, count = group_stats(keys.tolist(), values.tolist(), groups)
    grouped = pd.Series(values).groupby(keys)
    assert mean.tobytes() == grouped.mean().reindex(groups).to_numpy().tobytes()
    assert std.tobytes() == grouped.std().reindex(groups).to_numpy().tobytes()
    assert count.tolist() == grouped.count().reindex(groups, fill_value=0).tolist()


def test_results_rows_are_those_of_their_dataframe(outcome):
    frame = pd.DataFrame(outcome.results)
    assert frame[["case", *JSON_FIELDS]].to_csv(index=False) == csv_text(
        {c: [r[c] for r in outcome.results] for c in ("case", *JSON_FIELDS)})
    assert frame[list(JSON_FIELDS)].to_dict("records") == [{k: r[k] for k in JSON_FIELDS} for r in outcome.results]
    assert describe_runs(frame, "w") == describe_runs(outcome.results, "w")
    assert "loads 2, 3 jobs/h" in describe_runs(outcome.results)


def test_jobs_csv_is_the_runs_job_frames_one_after_another(outcome):
    frames = []
    for run in outcome.runs:
        jobs = run.result.jobs.copy()
        jobs.insert(0, "case", run.case.label)
        jobs.insert(0, "sensitivity", run.result.summary.sensitivity)
        jobs.insert(0, "policy", run.policy)
        frames.append(jobs)
    assert csv_text(job_rows(outcome.runs)) == pd.concat(frames, ignore_index=True).to_csv(index=False)


def test_measured_jcts_are_those_of_the_job_frame(outcome):
    for run in outcome.runs:
        jobs = run.result.jobs
        expected = (jobs[jobs["measured"]]["jct_s"] / 3600.0).to_numpy()
        assert run.result.measured_jct_h().tobytes() == expected.tobytes()


@pytest.mark.parametrize("loads", [(2.0, 3.0), (3.0,)])
def test_the_average_jct_figure_is_the_same_from_rows_and_from_a_dataframe(outcome, loads):
    rows = [r for r in outcome.results if r["load"] in loads]
    figures = [make_avg_jct_figure(rows), make_avg_jct_figure(pd.DataFrame(rows))]
    drawn = []
    for fig in figures:
        ax = fig.axes[0]
        drawn.append(([line.get_xydata().tolist() for line in ax.lines], [p.get_height() for p in ax.patches],
                      [t.get_text() for t in ax.texts], ax.get_title()))
        pyplot().close(fig)
    assert drawn[0] == drawn[1]
    assert drawn[0][0] or drawn[0][1]  # something was drawn


def test_the_table_keeps_wide_numbers_apart_and_ordinary_rows_as_they_were(outcome):
    expected = [f"{r['policy']:<14}{r['load']:>6g}{r['seed']:>6}{r['mean_jct_h']:>12.2f}{r['median_jct_h']:>10.2f}"
                f"{r['p99_jct_h']:>10.2f}{r['makespan_h']:>12.1f}{r['speedup_vs_fair']:>8.2f}×" for r in outcome.results]
    assert format_table(outcome.results).splitlines()[2:] == expected  # the columns of old, where the numbers fit
    wide = {**outcome.results[0], "policy": "ftf_ref+opt_lp", "load": 9.0000001, "p99_jct_h": 88.52,
            "makespan_h": 31997769061.3, "mean_jct_h": 1e12}
    assert format_table([wide]).splitlines()[2].split()[:7] == [
        "ftf_ref+opt_lp", "9.0000001", "1", "1000000000000.00", f"{wide['median_jct_h']:.2f}", "88.52", "31997769061.3"]


def test_each_seed_draws_its_own_profiling_noise():
    # Every case used the profiler's seed 0: job k had the same noise under every seed, so seeds did not replicate it.
    from dataclasses import replace

    from synergy_gym import SimulationConfig, Simulator
    from synergy_gym.baselines.registry import make_policy
    from synergy_gym.sim.profiling import ProfilerConfig

    cluster = load_cluster("small")
    spec = CompareSpec(policies=("fifo+tune",), loads=(3.0,), seeds=(1, 2), num_jobs=40, cluster=cluster,
                       sensitivities=("profiled",), profile_noise=0.3)
    cases = spec.cases()
    got = [run.result.summary.mean_jct_h for run in run_compare(spec, show_progress=False, cases=cases).runs]
    config = SimulationConfig(sensitivity="profiled")

    def alone(case, seed):
        workload, more = case.make()
        sim_config = replace(config, profiler=ProfilerConfig(noise=0.3, seed=seed))
        return Simulator(cluster, workload, make_policy("fifo+tune"), sim_config, more_jobs=more).run().summary.mean_jct_h

    assert got == [alone(cases[0], 1), alone(cases[1], 2)]
    assert got[0] != alone(cases[0], 0)  # (what it was)
