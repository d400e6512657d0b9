"""Readable figures: titles, JCT axes from 0, labelled log ticks, the sweep's CI, the env's rgb_array render."""

import pickle

import numpy as np
import pandas as pd
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.cli.plots import label_log_axis, make_jct_cdf_figure, pyplot
from synergy_gym.env import SynergyEnv
from synergy_gym.env.levels import DEMAND_LEVEL
from synergy_gym.experiments.statistics import ci95_half_width

SMALL = {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 60, "max_rounds": 4000}


def _tick_texts(fig, axis) -> list[str]:
    fig.canvas.draw()
    lo, hi = sorted(axis.get_view_interval())
    along = axis.axis_name == "y"  # index of the tick's position along the axis
    return [t.get_text() for t in axis.get_majorticklabels() if t.get_text() and lo <= t.get_position()[along] <= hi]


def _close(fig):
    pyplot().close(fig)


def _table(seeds=(1, 2, 3), loads=(9.0,), policies=("fifo+fair", "fifo+tune")):
    rng = np.random.default_rng(0)
    rows = [{"policy": p, "load": load, "seed": s, "mean_jct_h": 15 + 3 * i + rng.normal(0, 4), "jobs_measured": 150}
            for load in loads for s in seeds for i, p in enumerate(policies)]
    return pd.DataFrame(rows)


# -- log axes --------------------------------------------------------------------------------


@pytest.mark.parametrize("lo, hi", [(17.0, 250.0), (17.0, 90.0), (0.3, 170.0), (0.01, 500.0), (20.0, 24.0)])
def test_log_axes_get_several_labelled_ticks(lo, hi):
    fig, ax = pyplot().subplots()
    ax.plot([lo, hi], [0, 1])
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    label_log_axis(ax.xaxis, lo, hi)
    labels = _tick_texts(fig, ax.xaxis)
    _close(fig)
    assert len(labels) >= (3 if hi / lo > 1.5 else 2), labels
    assert all(float(x) > 0 for x in labels)


def test_jct_cdf_figure_has_titles_and_labelled_log_axis():
    rng = np.random.default_rng(1)
    jcts = {("fifo+fair", 9.0): rng.uniform(17, 250, 200), ("fifo+tune", 9.0): rng.uniform(17, 240, 200)}
    fig = make_jct_cdf_figure(jcts, title="CDF of JCTs: 2 policies, load 9, seed 42")
    (ax,) = fig.axes
    assert fig._suptitle is not None and "2 policies" in fig._suptitle.get_text()
    assert ax.get_title() and ax.get_xscale() == "log"
    labels = _tick_texts(fig, ax.xaxis)
    assert len(labels) > 1 and {"20", "50", "100", "200"} <= set(labels), labels
    assert ax.get_ylim()[0] == 0
    _close(fig)


def test_jct_cdf_figure_without_a_title_still_says_what_it_shows():
    fig = make_jct_cdf_figure({("fifo+fair", "trace.csv"): np.array([1.0, 2.0, 3.0])})
    assert "CDF" in fig._suptitle.get_text()
    _close(fig)


# -- compare ---------------------------------------------------------------------------------


@pytest.mark.parametrize("loads", [(9.0,), (5.0, 9.0)])
def test_compare_avg_jct_figure_starts_at_zero_with_a_title(loads):
    from synergy_gym.baselines.plots import make_avg_jct_figure

    results = _table(loads=loads)
    fig = make_avg_jct_figure(results, window="measured window: jobs 75:225 (150 jobs)")
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0
    assert "Average JCT" in ax.get_title() and "seeds 1, 2, 3" in ax.get_title() and "75:225" in ax.get_title()
    legend = ax.get_legend()
    texts = [t.get_text() for t in legend.get_texts()] + [legend.get_title().get_text()]
    assert any("95 % CI over seeds" in t for t in texts), texts
    _close(fig)


def test_compare_writes_titled_pngs(tmp_path, monkeypatch):
    import synergy_gym.baselines.compare as compare
    from synergy_gym.cli import main

    figures = []
    real = compare.avg_jct_png

    def spy(results, window=None):
        figures.append(window)
        return real(results, window)

    monkeypatch.setattr(compare, "avg_jct_png", spy)
    out = tmp_path / "c"
    assert main(["compare", "--quiet", "--jobs", "60", "--cluster", "small", "--load", "2", "--out", str(out),
                 "--plots"]) == 0
    assert figures == ["measured window: jobs 15:45 (30 jobs)"]
    for name in ("avg_jct.png", "jct_cdf.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- sweep -----------------------------------------------------------------------------------


def test_ci95_is_the_t_interval_and_absent_for_one_seed():
    from scipy import stats

    values = np.array([10.0, 12.0, 17.0])
    half = ci95_half_width(values.std(ddof=1), 3)
    assert half == pytest.approx(stats.t.ppf(0.975, 2) * values.std(ddof=1) / np.sqrt(3))
    assert np.isnan(ci95_half_width(0.0, 1))


def test_sweep_table_and_figure_state_the_same_ci():
    from synergy_gym.baselines.sweep import format_seed_summary, make_avg_jct_vs_load_figure, seed_summary

    table = _table()
    summary = seed_summary(table)
    text = format_seed_summary(summary)
    assert "95 % confidence interval" in text and "± CI95" in text
    for r in summary.itertuples():
        assert f"± {r.ci95_h:.2f}" in text
    fig = make_avg_jct_vs_load_figure(table)
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0 and ax.get_title()
    assert any("95 % CI over seeds" in t.get_text() for t in ax.get_legend().get_texts())
    # The error bars are the table's intervals.
    caps = np.sort(np.concatenate([line.get_ydata() for line in ax.lines if line.get_marker() == "_"]))
    ends = np.sort(np.concatenate([summary["mean_jct_h"] - summary["ci95_h"], summary["mean_jct_h"] + summary["ci95_h"]]))
    np.testing.assert_allclose(caps, ends)
    _close(fig)


def test_sweep_figure_over_loads_has_a_ci_band_and_starts_at_zero():
    from synergy_gym.baselines.sweep import make_avg_jct_vs_load_figure

    fig = make_avg_jct_vs_load_figure(_table(loads=(5.0, 7.0, 9.0)))
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0 and "against load" in ax.get_title()
    assert any("95 % CI over seeds" in t.get_text() for t in ax.get_legend().get_texts())
    _close(fig)


def test_sweep_with_one_seed_says_there_is_no_interval():
    from synergy_gym.baselines.sweep import format_seed_summary, make_avg_jct_vs_load_figure, seed_summary

    table = _table(seeds=(1,))
    assert "one seed: no confidence interval" in format_seed_summary(seed_summary(table))
    fig = make_avg_jct_vs_load_figure(table)
    ax = fig.axes[0]
    assert any("no confidence interval" in t.get_text() for t in ax.texts)
    assert ax.get_legend() is None and ax.get_ylim()[0] == 0
    _close(fig)


def test_sweep_prints_the_ci_table(tmp_path, capsys):
    from synergy_gym.cli import main

    out = tmp_path / "s"
    args = ["sweep", "--policies", "fifo+fair,fifo+tune", "--load", "2", "--seed", "1,2", "--jobs", "40",
            "--cluster", "small", "--no-ray", "--quiet", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "± CI95" in printed and "95 % confidence interval" in printed
    assert printed.count("± ") >= 3  # header + one per policy


# -- trace-stats -----------------------------------------------------------------------------


def test_trace_stats_figure_has_titles_and_labelled_log_axes():
    from synergy_gym.traces.trace_jobs import TraceJobs
    from synergy_gym.traces.trace_stats import make_histogram_figure

    rng = np.random.default_rng(2)
    n = 500
    trace = TraceJobs(
        source="/data/philly.csv",
        submit_s=np.sort(rng.uniform(0, 86400 * 3, n)),
        duration_s=rng.uniform(0.3, 60, n) * 3600,
        gpus=rng.choice([1, 2, 4, 8], n),
        cpu_per_gpu=np.full(n, np.nan),
        mem_per_gpu=np.full(n, np.nan),
    )
    fig = make_histogram_figure(trace)
    left, right = fig.axes
    assert "philly.csv" in fig._suptitle.get_text() and left.get_title() and right.get_title()
    assert len(_tick_texts(fig, left.xaxis)) > 1 and len(_tick_texts(fig, right.yaxis)) > 1
    assert left.get_ylim()[0] == 0
    _close(fig)


def test_the_duration_histogram_counts_every_job_a_log_axis_can_show():
    # The lowest bin edge was clamped to 3.6 s: jobs of 1-3 s (51 in the Philly trace) were silently dropped.
    from synergy_gym.traces.trace_jobs import TraceJobs
    from synergy_gym.traces.trace_stats import make_histogram_figure

    durations = np.array([0.0, 1.0, 2.0, 3.0, 600.0, 7200.0, 86400.0])
    n = durations.size
    trace = TraceJobs(source="t.csv", submit_s=np.arange(n, dtype=float), duration_s=durations,
                      gpus=np.ones(n, dtype=int), cpu_per_gpu=np.full(n, np.nan), mem_per_gpu=np.full(n, np.nan))
    fig = make_histogram_figure(trace)
    left = fig.axes[0]
    assert sum(patch.get_height() for patch in left.patches) == n - 1
    assert "1 of 0 s not shown" in left.get_title()
    _close(fig)


# -- env render ------------------------------------------------------------------------------


ACTION_1 = DEMAND_LEVEL  # slot 0 at its demand


@pytest.mark.parametrize("preemptive", [False, True], ids=["default", "preemptive"])
def test_rgb_array_render_is_a_readable_picture(preemptive):
    import matplotlib.pyplot as plt

    env = SynergyEnv(**SMALL, render_mode="rgb_array", preemptive=preemptive)
    env.reset(seed=0)
    before = env.render()  # the first decision: nothing runs yet
    assert before.shape[0] >= 360 and before.shape[1] >= 640
    while env.sim.now == env.sim.first_round_s or env.sim.ledger.n_slots == 0:
        env.step(ACTION_1)
    open_figures = len(plt.get_fignums())
    images = [env.render() for _ in range(10)]
    img = images[-1]
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    assert img.shape[0] >= 360 and img.shape[1] >= 640
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 10  # not a single colour: bars, labels, text
    assert not np.array_equal(img, before)  # jobs are running now
    assert all(np.array_equal(i, img) for i in images)  # rendering changes nothing
    assert len(plt.get_fignums()) == open_figures  # renders leave no figures open
    done = False
    while not done:  # to the end: the picture of the finished episode
        _, _, terminated, truncated, _ = env.step(ACTION_1)
        done = terminated or truncated
    end = env.render()
    assert end.shape == img.shape and not np.array_equal(end, img)
    env.close()


def test_rgb_array_render_survives_pickling_and_close():
    env = SynergyEnv(**SMALL, render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(3):
        env.step(ACTION_1)
    first = env.render()
    clone = pickle.loads(pickle.dumps(env))
    np.testing.assert_array_equal(clone.render(), first)
    env.close()
    np.testing.assert_array_equal(env.render(), first)  # rebuilt after close


def test_ansi_render_names_the_job_in_the_first_slot():
    env = SynergyEnv(**SMALL, render_mode="ansi")
    env.reset(seed=0)
    for _ in range(3):
        env.step(ACTION_1)
    text = env.render()
    assert isinstance(text, str) and "server" in text
    j = int(env.slot_jobs[0])
    model = env.zoo.names[env.sim.jobs.model[j]]
    assert text.splitlines()[-1] == f"deciding job {env.sim.jobs.job_id[j]} ({model}, 1 GPU)"
    assert SynergyEnv.metadata["render_modes"] == ["ansi", "rgb_array"] and SynergyEnv.metadata["render_fps"] > 0
