"""The average-JCT figure of a comparison (the JCT CDF is ``synergy_gym.plots.jct_cdf_png``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from synergy_gym.plots import figure_png, pyplot


def avg_jct_png(results: pd.DataFrame) -> bytes:
    """Bar chart of mean JCT per policy, or mean JCT against load when there are several loads.

    ``results`` has columns policy, load, seed, mean_jct_h; seeds are averaged
    (error bars: standard deviation over seeds).
    """
    policies = list(dict.fromkeys(results["policy"]))
    loads = results["load"].dropna().unique()
    fig, ax = pyplot().subplots(figsize=(7, 4))
    if len(loads) > 1:
        for policy in policies:
            rows = results[results["policy"] == policy].groupby("load")["mean_jct_h"]
            mean, std = rows.mean(), rows.std().fillna(0.0)
            ax.errorbar(mean.index, mean.to_numpy(), yerr=std.to_numpy(), marker="o", capsize=3, label=policy)
        ax.set_xlabel("load (jobs per hour)")
        ax.legend()
    else:
        grouped = results.groupby("policy", sort=False)["mean_jct_h"]
        mean, std = grouped.mean().reindex(policies), grouped.std().reindex(policies).fillna(0.0)
        ax.bar(np.arange(len(policies)), mean.to_numpy(), yerr=std.to_numpy(), capsize=4, color="tab:blue")
        ax.set_xticks(np.arange(len(policies)), policies, rotation=20, ha="right")
        title = f"load {loads[0]:g} jobs/h" if len(loads) == 1 else "replayed workload"
        ax.set_title(title)
    ax.set_ylabel("average JCT (hours)")
    ax.grid(axis="y", alpha=0.3)
    return figure_png(fig)
