"""Figures shared by the commands: the CDF of job completion times.

Every curve gets its own look (:func:`curve_style`: colour and line style both change
from one curve to the next, and no two of the first 40 curves share both; markers tell
further ones apart), the same policy keeps its look in every panel, and each panel's
legend sits outside its axes, to the right, so that it covers no curve.
"""

from __future__ import annotations

import io
import sys

import numpy as np


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def new_figure(**kwargs):
    """A figure of its own (``matplotlib.figure.Figure(**kwargs)``), not pyplot's: drawing it needs no pyplot.

    :func:`figure_png` saves it as pyplot would (the Agg renderer writes PNG files either way).
    """
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def figure_png(fig) -> bytes:
    """The figure as PNG bytes; closes it (if pyplot made it)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close(fig)
    return buf.getvalue()


#: Colours and line styles of the curves, cycled by :func:`curve_style`.
CURVE_COLOURS = tuple(f"C{i}" for i in range(10))
CURVE_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = (None, "o", "s", "^", "D", "v", "x", "+")


def curve_style(i: int) -> dict[str, object]:
    """The look of the ``i``-th curve: ``color``, ``linestyle`` and ``marker`` keyword arguments.

    Colours cycle through the 10 of matplotlib's default cycle and line styles through 4,
    shifted by one after 20 curves, so that neighbours differ in both and the first 40
    curves are 40 distinct (colour, line style) pairs; from then on markers differ too.
    """
    n_colours, n_styles = len(CURVE_COLOURS), len(CURVE_LINESTYLES)
    block = i // (n_colours * n_styles // 2)  # 20: gcd(10, 4) = 2, so each block of 20 pairs repeats after it
    marker = _MARKERS[(i // (n_colours * n_styles)) % len(_MARKERS)]
    style: dict[str, object] = {"color": CURVE_COLOURS[i % n_colours], "linestyle": CURVE_LINESTYLES[(i + block) % n_styles]}
    if marker is not None:
        style.update(marker=marker, markevery=0.1, markersize=4)
    return style


#: Marker shapes of :func:`point_style`.
POINT_MARKERS = ("o", "s", "^", "D", "v", "P")


def point_style(i: int) -> dict[str, object]:
    """The look of the ``i``-th series of points joined by lines (mean JCT against load): :func:`curve_style`'s colour
    and line style, an open marker of its own, so that series with equal values still all show."""
    style = curve_style(i)
    return {"color": style["color"], "linestyle": style["linestyle"], "marker": POINT_MARKERS[i % len(POINT_MARKERS)],
            "fillstyle": "none"}


#: Tick multipliers per decade for log axes, coarsest first.
_LOG_SUBS = ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0), tuple(range(1, 10)),
             (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0), tuple(np.arange(1.0, 10.0, 0.2)))


def _tick_label(value: float, _pos=None) -> str:
    if value >= 1e5 or value < 1e-3:
        return f"{value:.0e}"
    return f"{value:g}"


def label_log_axis(axis, lo: float, hi: float, min_ticks: int = 5) -> None:
    """Labelled ticks (…, 20, 50, 100, 200, …) on a log ``axis`` showing ``lo``–``hi`` (both > 0).

    Picks the coarsest ticks per decade that put at least ``min_ticks`` labels in
    the range, so a range under a decade still gets several labelled ticks;
    unlabelled minor ticks mark the rest of 1–9 per decade.
    """
    import matplotlib.ticker as mticker

    lo, hi = float(min(lo, hi)), float(max(lo, hi))
    decades = np.arange(np.floor(np.log10(lo)) - 1, np.ceil(np.log10(hi)) + 1)
    subs = _LOG_SUBS[-1]
    for candidate in _LOG_SUBS:
        ticks = (10.0 ** decades[:, None] * np.asarray(candidate)[None, :]).ravel()
        if np.count_nonzero((ticks >= lo * (1 - 1e-9)) & (ticks <= hi * (1 + 1e-9))) >= min_ticks:
            subs = candidate
            break
    axis.set_major_locator(mticker.LogLocator(base=10.0, subs=subs, numticks=100))
    axis.set_major_formatter(mticker.FuncFormatter(_tick_label))
    axis.set_minor_locator(mticker.LogLocator(base=10.0, subs=tuple(range(1, 10)), numticks=100))
    axis.set_minor_formatter(mticker.NullFormatter())


def make_jct_cdf_figure(jcts: dict[tuple[str, object], np.ndarray], title: str | None = None, jobs: str = "measured jobs"):
    """The JCT CDF figure (see :func:`jct_cdf_png`), not yet saved; ``jobs`` says which jobs the JCTs are of."""
    loads = list(dict.fromkeys(load for _, load in jcts)) or [""]  # no curves (bounds only): one empty panel
    styles = {policy: curve_style(i) for i, policy in enumerate(dict.fromkeys(policy for policy, _ in jcts))}
    fig = new_figure(figsize=(max(9.5, 8.5 * len(loads)), 4.5), layout="constrained")
    axes = fig.subplots(1, len(loads), squeeze=False)
    for ax, load in zip(axes[0], loads):
        lo, hi = np.inf, 0.0
        for (policy, key_load), values in jcts.items():
            values = np.asarray(values, dtype=float)
            values = values[np.isfinite(values) & (values > 0)]
            if key_load != load or values.size == 0:
                continue
            x = np.sort(values)
            lo, hi = min(lo, x[0]), max(hi, x[-1])
            # from 0 at the first JCT (a single job's curve is the rise from 0 to 1, not one invisible point)
            ax.step(np.r_[x[0], x], np.arange(x.size + 1) / x.size, where="post", label=f"{policy} ({x.size} jobs)",
                    linewidth=1.6, **styles[policy])
        if hi > 0:
            if hi <= lo * 1.05:
                lo, hi = lo / 1.5, hi * 1.5
            pad = (hi / lo) ** 0.03
            ax.set_xscale("log")
            ax.set_xlim(lo / pad, hi * pad)
            label_log_axis(ax.xaxis, lo / pad, hi * pad)
            ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small")
        else:
            ax.text(0.5, 0.5, f"no {jobs}", transform=ax.transAxes, ha="center", va="center")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("job completion time (hours, log scale)")
        ax.set_ylabel(f"fraction of {jobs} ≤ JCT")
        if isinstance(load, (int, float, np.integer, np.floating)) and not isinstance(load, bool):
            ax.set_title(f"load {float(load):g} jobs/h")
        else:
            ax.set_title(str(load))
        ax.grid(alpha=0.3)
        ax.grid(which="minor", alpha=0.1)
    fig.suptitle(title or f"CDF of job completion times ({jobs})")
    return fig


def jct_cdf_png(
    jcts: dict[tuple[str, object], np.ndarray], title: str | None = None, jobs: str = "measured jobs"
) -> bytes:
    """CDF of JCTs (hours) per policy, one panel per load; keys are (policy, load or case label).

    ``title`` (the figure's title) should say what was run: policies, seeds, measured window;
    ``jobs`` which jobs the JCTs are of (the axis label).
    """
    return figure_png(make_jct_cdf_figure(jcts, title, jobs))
