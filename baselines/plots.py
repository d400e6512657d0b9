"""Figures of a comparison: average JCT per policy (or against load) and JCT CDFs."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as mticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def avg_jct_png(results: pd.DataFrame) -> bytes:
    """Bar chart of mean JCT per policy, or mean JCT against load when there are several loads.

    ``results`` has columns policy, load, seed, mean_jct_h; seeds are averaged
    (error bars: standard deviation over seeds).
    """
    policies = list(dict.fromkeys(results["policy"]))
    loads = results["load"].dropna().unique()
    fig, ax = plt.subplots(figsize=(7, 4))
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
    return _png(fig)


def jct_cdf_png(jcts: dict[tuple[str, object], np.ndarray]) -> bytes:
    """CDF of measured JCTs per policy, one panel per load; keys are (policy, load or case label)."""
    loads = list(dict.fromkeys(load for _, load in jcts))
    fig, axes = plt.subplots(1, len(loads), figsize=(6 * len(loads), 4), squeeze=False)
    for ax, load in zip(axes[0], loads):
        for (policy, key_load), values in jcts.items():
            if key_load != load or values.size == 0:
                continue
            x = np.sort(values)
            ax.plot(x, np.arange(1, x.size + 1) / x.size, label=policy)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(mticker.NullFormatter())
        ax.set_xlabel("JCT (hours)")
        ax.set_ylabel("fraction of jobs")
        ax.set_title(f"load {load:g} jobs/h" if isinstance(load, (int, float)) else str(load))
        ax.grid(alpha=0.3)
        ax.legend()
    return _png(fig)
