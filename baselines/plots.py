"""The average-JCT figure of a comparison (the JCT CDF is ``synergy_gym.cli.plots.jct_cdf_png``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from synergy_gym.cli.plots import figure_png, pyplot
from synergy_gym.experiments.statistics import ci95_half_width

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CI_LABEL = "95 % CI over seeds"


def _seed_text(results: pd.DataFrame) -> str:
    seeds = sorted(int(s) for s in results["seed"].dropna().unique()) if "seed" in results else []
    if not seeds:
        return ""
    if len(seeds) > 3 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}–{seeds[-1]} ({len(seeds)})"
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def describe_runs(results: pd.DataFrame, window: str | None = None) -> str:
    """A line saying what ``results`` covers: loads (or workload), seeds, measured jobs."""
    parts: list[str] = []
    loads: list[float] = sorted(results["load"].dropna().unique()) if "load" in results else []
    if len(loads):
        parts.append(("load " if len(loads) == 1 else "loads ") + ", ".join(f"{x:g}" for x in loads) + " jobs/h")
    elif "case" in results and results["case"].nunique() == 1:
        parts.append(str(results["case"].iloc[0]))
    if _seed_text(results):
        parts.append(_seed_text(results))
    if window:
        parts.append(window)
    elif "jobs_measured" in results and len(results):
        lo, hi = int(results["jobs_measured"].min()), int(results["jobs_measured"].max())
        parts.append(f"{lo} measured jobs per run" if lo == hi else f"{lo}–{hi} measured jobs per run")
    return ", ".join(parts)


def make_avg_jct_figure(results: pd.DataFrame, window: str | None = None) -> Figure:
    """The average-JCT figure (see :func:`avg_jct_png`), not yet saved."""
    if "sensitivity" in results and set(results["sensitivity"]) != {"true"}:  # true and profiled side by side
        results = results.assign(policy=[p if s == "true" else f"{p} (profiled)"
                                         for p, s in zip(results["policy"], results["sensitivity"])])
    policies = list(dict.fromkeys(results["policy"]))
    loads = results["load"].dropna().unique()
    n_seeds = results["seed"].nunique() if "seed" in results else 1
    fig, ax = pyplot().subplots(figsize=(max(7, 1.2 * len(policies) + 2), 4.5))
    if len(loads) > 1:
        for policy in policies:
            rows = results[results["policy"] == policy].groupby("load")["mean_jct_h"]
            mean = rows.mean()
            half = np.nan_to_num(ci95_half_width(rows.std().to_numpy(), rows.count().to_numpy()))
            ax.errorbar(mean.index, mean.to_numpy(), yerr=half, marker="o", capsize=3, label=policy)
        ax.set_xlabel("load (jobs per hour)")
    else:
        grouped = results.groupby("policy", sort=False)["mean_jct_h"]
        mean = grouped.mean().reindex(policies)
        half = np.nan_to_num(ci95_half_width(grouped.std().reindex(policies).to_numpy(),
                                             grouped.count().reindex(policies).to_numpy()))
        x = np.arange(len(policies))
        colours = [f"C{i % 10}" for i in range(len(policies))]
        bars = ax.bar(x, mean.to_numpy(), color=colours)
        if n_seeds > 1:
            ax.errorbar(x, mean.to_numpy(), yerr=half, fmt="none", ecolor="black", capsize=5,
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
    ax.set_title(f"{what}\n{describe_runs(results, window)}", fontsize=11)
    fig.tight_layout()
    return fig


def avg_jct_png(results: pd.DataFrame, window: str | None = None) -> bytes:
    """Bar chart of mean JCT per policy, or mean JCT against load when there are several loads.

    ``results`` has columns policy, load, seed, mean_jct_h; seeds are averaged
    (error bars: 95 % confidence interval over seeds, t-distribution).
    ``window`` describes the measured jobs for the title (default: their count).
    """
    return figure_png(make_avg_jct_figure(results, window))
