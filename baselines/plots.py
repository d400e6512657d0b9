"""The average-JCT figure of a comparison (the JCT CDF is ``synergy_gym.cli.plots.jct_cdf_png``).

A comparison's results are a table with one row per run: a DataFrame, or the rows as
dictionaries (what ``compare`` makes, so that it need not import pandas). Means and
standard deviations over seeds are pandas' own (:func:`group_stats`), whichever is given.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from synergy_gym.cli.plots import figure_png, new_figure, point_style
from synergy_gym.experiments.statistics import ci95_half_width

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

CI_LABEL = "95 % CI over seeds"

def table_rows(results: pd.DataFrame | Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], set[str]]:
    """The rows of ``results`` as dictionaries, and its columns."""
    if hasattr(results, "to_dict"):  # a DataFrame
        frame: Any = results
        return frame.to_dict("records"), {str(c) for c in frame.columns}
    rows = list(results)
    return rows, set(rows[0]) if rows else set()


def present(values: Iterable[Any]) -> list[Any]:
    """The distinct values that are not None or NaN, in order of appearance (pandas' ``dropna().unique()``)."""
    return list(dict.fromkeys(v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))))


def group_stats(keys: Sequence[Hashable], values: Sequence[float], groups: Sequence[Hashable]) -> tuple[
        np.ndarray, np.ndarray, np.ndarray]:
    """Mean, standard deviation (ddof=1) and count of the non-NaN ``values`` of each of ``groups`` (by ``keys``).

    As pandas' ``groupby(...).mean()``, ``.std()`` and ``.count()`` compute them, bit for bit:
    a compensated (Kahan) sum and Welford's update, in row order.
    """
    index = {g: k for k, g in enumerate(groups)}
    m = len(groups)
    total, compensation, count = np.zeros(m), np.zeros(m), np.zeros(m, dtype=np.int64)
    mean, m2 = np.zeros(m), np.zeros(m)
    for key, value in zip(keys, values):
        k = index.get(key)
        if k is None or value is None or math.isnan(value):
            continue
        count[k] += 1
        y = value - compensation[k]
        t = total[k] + y
        compensation[k] = t - total[k] - y
        if compensation[k] != compensation[k]:  # an infinite value
            compensation[k] = 0.0
        total[k] = t
        old = mean[k]
        mean[k] += (value - old) / count[k]
        m2[k] += (value - mean[k]) * (value - old)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(count > 0, total / count, np.nan)
        std = np.where(count > 1, np.sqrt(m2 / (count - 1)), np.nan)
    return means, std, count


def _seed_text(results: pd.DataFrame | Sequence[Mapping[str, Any]]) -> str:
    rows, columns = table_rows(results)
    seeds = sorted(int(s) for s in present(r["seed"] for r in rows)) if "seed" in columns else []
    if not seeds:
        return ""
    if len(seeds) > 3 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}–{seeds[-1]} ({len(seeds)})"
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def describe_runs(results: pd.DataFrame | Sequence[Mapping[str, Any]], window: str | None = None) -> str:
    """A line saying what ``results`` covers: loads (or workload), seeds, measured jobs."""
    rows, columns = table_rows(results)
    parts: list[str] = []
    loads: list[float] = sorted(present(r["load"] for r in rows)) if "load" in columns else []
    if len(loads):
        parts.append(("load " if len(loads) == 1 else "loads ") + ", ".join(f"{x:g}" for x in loads) + " jobs/h")
    elif "case" in columns and len(present(r["case"] for r in rows)) == 1:
        parts.append(str(rows[0]["case"]))
    if _seed_text(rows):
        parts.append(_seed_text(rows))
    if window:
        parts.append(window)
    elif "jobs_measured" in columns and len(rows):
        measured = present(r["jobs_measured"] for r in rows)
        lo, hi = int(min(measured)), int(max(measured))
        parts.append(f"{lo} measured jobs per run" if lo == hi else f"{lo}–{hi} measured jobs per run")
    return ", ".join(parts)


def make_avg_jct_figure(results: pd.DataFrame | Sequence[Mapping[str, Any]], window: str | None = None) -> Figure:
    """The average-JCT figure (see :func:`avg_jct_png`), not yet saved."""
    rows, columns = table_rows(results)
    if "sensitivity" in columns and {r["sensitivity"] for r in rows} != {"true"}:  # true and profiled side by side
        rows = [{**r, "policy": r["policy"] if r["sensitivity"] == "true" else f"{r['policy']} (profiled)"}
                for r in rows]
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    loads = present(r["load"] for r in rows)
    n_seeds = len(present(r["seed"] for r in rows)) if "seed" in columns else 1
    jct = [r["mean_jct_h"] for r in rows]
    fig = new_figure(figsize=(max(7, 1.2 * len(policies) + 2), 4.5))
    ax = fig.subplots()
    if len(loads) > 1:
        for i, policy in enumerate(policies):
            mine = [r for r in rows if r["policy"] == policy]
            at = sorted(present(r["load"] for r in mine))
            mean, std, count = group_stats([r["load"] for r in mine], [r["mean_jct_h"] for r in mine], at)
            half = np.nan_to_num(ci95_half_width(std, count))
            ax.errorbar(np.asarray(at, dtype=float), mean, yerr=half, capsize=3, label=policy, **point_style(i))
        ax.set_xlabel("load (jobs per hour)")
    else:
        mean, std, count = group_stats([r["policy"] for r in rows], jct, policies)
        half = np.nan_to_num(ci95_half_width(std, count))
        x = np.arange(len(policies))
        colours = [f"C{i % 10}" for i in range(len(policies))]
        bars = ax.bar(x, mean, color=colours)
        if n_seeds > 1:
            ax.errorbar(x, mean, yerr=half, fmt="none", ecolor="black", capsize=5,
                        label=f"{CI_LABEL} (t, n={n_seeds})")
        ax.bar_label(bars, labels=[f"{m:.2f} h" if h == 0 else f"{m:.2f} ± {h:.2f} h" for m, h in zip(mean, half)],
                     fontsize=9, label_type="center",
                     bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.85, linewidth=0))
        ax.set_xticks(x, policies, rotation=20 if len(policies) > 3 else 0, ha="right" if len(policies) > 3 else "center")
        ax.set_xlabel("policy")
    if n_seeds > 1:
        ax.legend(title=f"error bars: {CI_LABEL} (t, n={n_seeds})" if len(loads) > 1 else None)
    else:
        ax.text(0.99, 0.98, "one seed: no confidence interval", transform=ax.transAxes, ha="right", va="top",
                fontsize=8, color="0.35")
        if len(loads) > 1:
            ax.legend(loc="upper left")
    ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.08)
    ax.set_ylabel("average JCT of measured jobs (hours)")
    ax.grid(axis="y", alpha=0.3)
    what = "Average JCT against load" if len(loads) > 1 else "Average JCT by policy"
    ax.set_title(f"{what}\n{describe_runs(rows, window)}", fontsize=11)
    fig.tight_layout()
    return fig


def avg_jct_png(results: pd.DataFrame | Sequence[Mapping[str, Any]], window: str | None = None) -> bytes:
    """Bar chart of mean JCT per policy, or mean JCT against load when there are several loads.

    ``results`` (a DataFrame or its rows) has columns policy, load, seed, mean_jct_h; seeds are averaged
    (error bars: 95 % confidence interval over seeds, t-distribution).
    ``window`` describes the measured jobs for the title (default: their count).
    """
    return figure_png(make_avg_jct_figure(results, window))
