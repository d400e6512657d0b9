"""The JCT CDFs: which curves ``evaluate`` draws, no two curves alike, legends outside the axes.

Checked on matplotlib's objects: each line's colour and line style, and the legend's
box against the axes' box (both in display coordinates after drawing).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import synergy_gym.agents.eval_outputs as eval_outputs
import synergy_gym.baselines.compare as compare
from synergy_gym.agents.eval_outputs import cdf_curves
from synergy_gym.cli import main
from synergy_gym.cli.plots import curve_style, make_jct_cdf_figure, pyplot


def _looks(ax) -> list[tuple[str, str]]:
    return [(line.get_color(), line.get_linestyle()) for line in ax.get_lines()]


def _check_figure(fig) -> dict[str, tuple[str, str]]:
    """Every panel: distinct (colour, line style) pairs, the legend outside the axes; returns label → look."""
    fig.canvas.draw()
    looks: dict[str, tuple[str, str]] = {}
    for ax in fig.axes:
        pairs = _looks(ax)
        assert len(set(pairs)) == len(pairs), pairs
        legend = ax.get_legend()
        assert legend is not None
        assert not legend.get_window_extent().overlaps(ax.get_window_extent()), "the legend covers the axes"
        for line in ax.get_lines():
            policy = line.get_label().rsplit(" (", 1)[0]  # without "(N jobs)"
            assert looks.setdefault(policy, (line.get_color(), line.get_linestyle())) == looks[policy], policy
    return looks


def test_curve_styles_differ_from_neighbours_and_forty_are_distinct():
    pairs = [(curve_style(i)["color"], curve_style(i)["linestyle"]) for i in range(40)]
    assert len(set(pairs)) == 40
    for i in range(79):
        a, b = curve_style(i), curve_style(i + 1)
        assert a["color"] != b["color"] and a["linestyle"] != b["linestyle"]
    triples = {(s["color"], s["linestyle"], s.get("marker")) for s in map(curve_style, range(200))}
    assert len(triples) == 200


def test_compare_cdf_keeps_each_policy_s_look_across_panels_and_the_legend_outside(tmp_path, monkeypatch):
    captured = []
    real = compare.jct_cdf_png

    def spy(jcts, title=None, jobs="measured jobs"):
        captured.append((jcts, title))
        return real(jcts, title, jobs)

    monkeypatch.setattr(compare, "jct_cdf_png", spy)
    assert main(["compare", "--quiet", "--jobs", "60", "--cluster", "small", "--load", "20,40", "--policies",
                 "fifo+fair,fifo+greedy,fifo+tune,srtf+tune,las+tune", "--sensitivity", "true,profiled",
                 "--out", str(tmp_path / "c"), "--plots"]) == 0
    (jcts, title), = captured
    fig = make_jct_cdf_figure(jcts, title)
    assert len(fig.axes) == 2 and all(len(ax.get_lines()) == 10 for ax in fig.axes)
    looks = _check_figure(fig)
    assert len(looks) == 10 and len(set(looks.values())) == 10
    pyplot().close(fig)


def _summary(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["policy", "source", "mean_jct_h"])
    return frame.sort_values("mean_jct_h", ignore_index=True)


def test_evaluate_draws_the_agents_the_best_heuristic_fifo_tune_and_the_bound():
    rng = np.random.default_rng(0)
    rows = [("agent-a", "agent", 10.0), ("agent-b", "agent", 10.5), ("agent", "agent", 10.25),
            ("srtf+price", "env", 11.0), ("fifo+tune", "env", 12.0), ("tetris", "env", 14.0), ("random", "env", 13.0),
            ("fifo+tune", "sim", 12.0), ("fifo+fair", "sim", 20.0), ("no-wait-bound", "bound", 8.0)]
    jcts = {(name, source): rng.uniform(1, 50, 30) for name, source, _ in rows if name != "agent"}  # no mean row
    summary = _summary(rows)
    default = cdf_curves(jcts, summary)
    assert list(default) == ["agent-a (agent)", "agent-b (agent)", "srtf+price (env, best heuristic)",
                             "fifo+tune (env)", "no-wait-bound (bound)"]
    assert len(cdf_curves(jcts, summary, plot_all=True)) == len(jcts) == 9
    fig = make_jct_cdf_figure({(label, 3.0): values for label, values in default.items()})
    looks = _check_figure(fig)
    colours = [c for c, _ in looks.values()]
    assert len(set(colours)) == 5 and len({s for _, s in list(looks.values())[:4]}) == 4
    pyplot().close(fig)
    # Without env heuristics: the simulator's fifo+tune; the best heuristic being fifo+tune: drawn once.
    no_env = {k: v for k, v in jcts.items() if k[1] != "env"}
    assert list(cdf_curves(no_env, summary[summary["source"] != "env"])) == \
        ["agent-a (agent)", "agent-b (agent)", "fifo+tune (sim)", "no-wait-bound (bound)"]
    tune_best = summary[summary["policy"] != "srtf+price"]
    assert "fifo+tune (env, best heuristic)" in cdf_curves(jcts, tune_best)
    assert len(cdf_curves(jcts, tune_best)) == 4
    # random is never the best heuristic, even with the lowest mean JCT (as benchmark and training pick it) ...
    random_lowest = _summary([(p, s, 9.0 if p == "random" else m) for p, s, m in rows])
    assert "srtf+price (env, best heuristic)" in cdf_curves(jcts, random_lowest)
    assert "random (env)" in cdf_curves(jcts, random_lowest, plot_all=True)
    # ... and with random the only env heuristic there is none: random is not drawn as one.
    only_random = random_lowest[(random_lowest["source"] != "env") | (random_lowest["policy"] == "random")]
    random_jcts = {k: v for k, v in jcts.items() if k[1] != "env" or k[0] == "random"}
    assert list(cdf_curves(random_jcts, only_random)) == \
        ["agent-a (agent)", "agent-b (agent)", "fifo+tune (sim)", "no-wait-bound (bound)"]


@pytest.mark.parametrize("plot_all", [False, True])
def test_evaluate_command_writes_the_chosen_curves(tmp_path, monkeypatch, capsys, plot_all):
    captured = []
    monkeypatch.setattr(eval_outputs, "jct_cdf_png", lambda cdf, title, jobs: captured.append((cdf, title)) or b"")
    argv = ["evaluate", "--env", "Synergy-small-v0", "--env-kwargs", "num_jobs=8", "--seeds", "0", "--quiet",
            "--baselines", "env:fifo+tune,env:srtf+price,env:tetris,sim:fifo+fair,sim:no-wait-bound,sim:fifo+tune",
            "--out", str(tmp_path / "e"), *(["--plot-all"] if plot_all else [])]
    assert main(argv) == 0, capsys.readouterr().err
    (cdf, title), = captured
    labels = [label for label, _ in cdf]
    rows = json.loads((tmp_path / "e" / "results.json").read_text())["results"]
    best = next(r["policy"] for r in rows if r["source"] == "env")  # the rows are sorted by mean JCT
    if plot_all:
        assert len(labels) == len(rows) == 6 and "of 6 policies" not in title
    else:
        expected = [f"{best} (env, best heuristic)", "fifo+tune (env)", "no-wait-bound (bound)"]
        assert labels == list(dict.fromkeys(e for e in expected if not (best == "fifo+tune" and e == "fifo+tune (env)")))
        assert f"{len(labels)} of 6 policies" in title
    fig = make_jct_cdf_figure(cdf, title)
    _check_figure(fig)
    pyplot().close(fig)


def test_a_curve_rises_from_zero_so_a_single_job_shows():
    # One job's curve was one point drawn as a step: invisible (a legend entry over empty axes), and every curve
    # started at 1/n instead of 0.
    fig = make_jct_cdf_figure({("fifo+fair", 2.0): np.array([9.93]), ("fifo+tune", 2.0): np.array([3.43, 1.0])})
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    one, two = lines["fifo+fair (1 jobs)"], lines["fifo+tune (2 jobs)"]
    assert list(one.get_xdata()) == [9.93, 9.93] and list(one.get_ydata()) == [0.0, 1.0]
    assert list(two.get_xdata()) == [1.0, 1.0, 3.43] and list(two.get_ydata()) == [0.0, 0.5, 1.0]


def test_series_against_load_look_apart_even_where_their_values_are_equal():
    # Two policies with equal results: the second line covered the first, in the same marker and line style.
    from synergy_gym.baselines.plots import make_avg_jct_figure

    rows = [{"policy": p, "load": load, "seed": 1, "mean_jct_h": 10.0 + load} for p in ("a", "b") for load in (2, 4)]
    series = make_avg_jct_figure(rows).axes[0].containers  # an errorbar per policy: its data line first
    assert [c.get_label() for c in series] == ["a", "b"]
    lines = [c.lines[0] for c in series]
    assert len(lines) == 2 and lines[0].get_marker() != lines[1].get_marker()
    assert (lines[0].get_color(), lines[0].get_linestyle()) != (lines[1].get_color(), lines[1].get_linestyle())
    assert all(line.get_fillstyle() == "none" for line in lines)  # open markers: both show where they coincide
