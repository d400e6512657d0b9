"""Figures shared by the commands: the CDF of job completion times."""

from __future__ import annotations

import io

import numpy as np


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png(fig) -> bytes:
    """The figure as PNG bytes; closes it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    pyplot().close(fig)
    return buf.getvalue()


def jct_cdf_png(jcts: dict[tuple[str, object], np.ndarray]) -> bytes:
    """CDF of JCTs (hours) per policy, one panel per load; keys are (policy, load or case label)."""
    import matplotlib.ticker as mticker

    plt = pyplot()
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
    return figure_png(fig)
