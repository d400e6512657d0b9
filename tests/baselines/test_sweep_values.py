"""``sweep``'s mean JCT over seeds ± CI95 by value, recomputed from the cells (docs/cli.md).

Per (policy, load): the mean over seeds of each seed's mean JCT, and the half-width of its 95 %
confidence interval with the t-distribution, t(0.975, n − 1) · s / √n (s the sample standard deviation
over the n seeds) – in the printed table and in ``avg_jct_vs_load.png``.
"""

from __future__ import annotations

import contextlib
import io
import math
import statistics

import pandas as pd
import pytest
from scipy import stats

from synergy_gym.baselines.sweep import make_avg_jct_vs_load_figure
from synergy_gym.cli import main
from synergy_gym.cli.plots import pyplot

POLICIES = ("fifo+fair", "fifo+tune")
SEEDS = (1, 2, 3)
LOAD = 20.0


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep_values") / "out"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["sweep", "--no-ray", "--policies", ",".join(POLICIES), "--load", f"{LOAD:g}", "--seed", "1..3",
                     "--jobs", "40", "--cluster", "small", "--quiet", "--out", str(out)])
    assert code == 0
    return out, printed.getvalue()


def _expected(out) -> dict[str, tuple[int, float, float]]:
    """Per policy: seeds, mean over seeds of the per-seed mean JCTs, t-interval half-width; from results.csv."""
    table = pd.read_csv(out / "results.csv")
    expected = {}
    for policy in POLICIES:
        per_seed = table[(table["policy"] == policy) & (table["load"] == LOAD)].sort_values("seed")
        assert per_seed["seed"].tolist() == list(SEEDS)
        values = [float(v) for v in per_seed["mean_jct_h"]]
        n = len(values)
        half = stats.t.ppf(0.975, n - 1) * statistics.stdev(values) / math.sqrt(n)
        expected[policy] = (n, statistics.fmean(values), half)
    return expected


def test_the_seeds_differ_enough_for_the_checks_to_tell_the_statistics_apart(sweep):
    out, _ = sweep
    for n, _mean, half in _expected(out).values():
        assert n == 3 and half > 1.0  # a CI of over an hour: sem for std, or n + 1 seeds, shift it by far more than 0.01
    table = pd.read_csv(out / "results.csv")
    for policy in POLICIES:
        values = table[table["policy"] == policy]["mean_jct_h"]
        assert abs(values.mean() - values.median()) > 0.05, policy  # the median is not the mean here


def test_the_printed_table_is_the_mean_over_seeds_and_its_t_interval(sweep):
    out, printed = sweep
    lines = {words[0]: words for words in map(str.split, printed.splitlines()) if words and words[0] in POLICIES}
    assert set(lines) == set(POLICIES), printed
    for policy, (n, mean, half) in _expected(out).items():
        _, load, seeds, shown_mean, plus_minus, shown_half = lines[policy]
        assert (float(load), int(seeds), plus_minus) == (LOAD, n, "±")
        assert shown_mean == f"{mean:.2f}", (policy, shown_mean, mean)
        assert shown_half == f"{half:.2f}", (policy, shown_half, half)


def test_the_figure_s_bars_and_error_bars_are_the_mean_over_seeds_and_its_t_interval(sweep):
    out, _ = sweep
    expected = _expected(out)
    fig = make_avg_jct_vs_load_figure(pd.read_csv(out / "results.csv"))
    try:
        ax = fig.axes[0]
        heights = [p.get_height() for p in ax.patches]
        assert heights == pytest.approx([expected[p][1] for p in POLICIES], rel=1e-12)
        assert len(ax.containers) == 2  # the bars, then the error bars
        errorbar = ax.containers[1]
        segments = errorbar.lines[2][0].get_segments()
        halves = [(seg[1][1] - seg[0][1]) / 2 for seg in segments]
        assert halves == pytest.approx([expected[p][2] for p in POLICIES], rel=1e-9)
        labels = [t.get_text() for t in ax.texts if "±" in t.get_text()]
        assert labels == [f"{expected[p][1]:.2f} ± {expected[p][2]:.2f} h" for p in POLICIES]
    finally:
        pyplot().close(fig)
