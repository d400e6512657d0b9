"""What ``synergy-gym benchmark`` prints and writes: the table, the leaderboard, JSON, CSV and the scores' figure.

:func:`format_table` is one row per cell and agent (mean JCT, score, the best env heuristic, env
``fifo+tune``, the bounds' scores, the paired difference to the best heuristic with its 95 % CI and
on how many seeds the agent was lower; ``(N truncated)`` where N of its episodes were), then the skipped cells
and why, and per cell in which any policy's episodes were truncated a note naming them
(:func:`truncation_notes`: their JCTs and scores are not comparable); :func:`format_leaderboard` one row
per policy (agents, env heuristics, bounds) and one column per cell, score and mean JCT (and the
truncated episodes' count, where there are any).
:func:`write_outputs` writes :data:`OUTPUT_FILES`: ``results.json`` (:func:`records`: one row per
cell and policy, evaluate's summary fields (:data:`synergy_gym.agents.eval_summary.SUMMARY_FIELDS`) with
``env_id``, ``mode`` and ``score``; agents also ``paired_vs_best_env`` and ``trained_here``),
``results.csv`` (the same rows flat, ``truncated`` included), ``episodes.csv`` (one row per cell, policy and seed) and
``scores.png`` (:func:`scores_png`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from synergy_gym.agents.benchmark_runs import CONTENTION_BOUND, CellRun
from synergy_gym.agents.benchmark_scores import ZERO, CellScore
from synergy_gym.agents.eval_outputs import Stage
from synergy_gym.agents.eval_summary import json_value, seed_text, summary_records
from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES
from synergy_gym.baselines.sim_on_env import NO_WAIT_BOUND
from synergy_gym.cli.files import atomic_write_bytes, atomic_write_text
from synergy_gym.cli.plots import curve_style, figure_png, new_figure
from synergy_gym.cli.results_json import write_results_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: What ``--out`` holds.
OUTPUT_FILES = ("results.csv", "episodes.csv", "results.json", "scores.png")
#: Columns of ``results.csv``: one row per cell and policy.
CSV_FIELDS = ("env_id", "mode", "policy", "source", "episodes", "truncated", "mean_jct_h", "mean_jct_ci95_h", "score",
              "best_heuristic", "paired_mean_diff_h", "paired_ci95_h", "paired_relative", "lower_seeds", "paired_seeds",
              "trained_here")
#: Columns of ``episodes.csv``: one row per cell, policy and seed.
EPISODE_FIELDS = ("env_id", "mode", "policy", "source", "seed", "mean_jct_h")

#: The scores ``scores.png`` shows at most (beyond: at the edge, with their value).
PLOT_RANGE = (-200.0, 300.0)
#: Each cell's run and, where it ran, its scores.
Scored = list[tuple[CellRun, CellScore | None]]


def _num(value: float, spec: str) -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, spec)


def _bound_scores(score: CellScore) -> dict[str, float]:
    rows = score.summary[score.summary["source"] == "bound"]
    return {str(p): float(s) for p, s in zip(rows["policy"], rows["score"])}


def _truncated(count: object) -> int:
    """A summary row's count of truncated episodes (0 where there is none)."""
    return int(count) if isinstance(count, (int, float, np.integer, np.floating)) and math.isfinite(count) else 0


def truncation_notes(scored: Scored) -> list[str]:
    """One line per cell in which some policy's episodes were truncated (ended at ``max_rounds`` with jobs unfinished).

    Such a policy's mean JCT counts its unfinished jobs with their time so far, so its JCT and score are not
    comparable with those of policies whose episodes finished.
    """
    notes = []
    for run, score in scored:
        if score is None:
            continue
        hit = [f"{row.policy} {_truncated(row.truncated)}/{row.episodes}" for row in score.summary.itertuples()
               if _truncated(row.truncated)]
        if hit:
            notes.append(f"truncated in {run.cell.name} (episodes that ended at max_rounds with jobs unfinished, counted "
                         f"with their time so far: these JCTs and scores are not comparable): {', '.join(hit)}")
    return notes


def format_table(scored: Scored, seeds: list[int]) -> str:
    """The benchmark's table (see the module); the contention bound's column only where some cell has it."""
    agents = [a for run, _ in scored for a in run.agents] or ["-"]
    aw = max(8, *(len(a) + 3 for a in agents))
    contention = any(CONTENTION_BOUND in _bound_scores(score) for _, score in scored if score is not None)
    bound_heads = f"{'no-wait':>9}" + (f"{'contention':>11}" if contention else "")
    lines = [f"workload seeds {seed_text(seeds)} ({len(seeds)} episode{'s' if len(seeds) != 1 else ''} per policy and "
             f"cell); score: 0 = env {ZERO}, 100 = the best env heuristic; bounds: their scores",
             f"{'env':<25}{'mode':<12}{'agent':<{aw}}{'JCT h':>8}{'score':>8}  {'best env heuristic':<22}"
             f"{'fifo+tune h':>12}{bound_heads}  {'paired vs best, h':<20}{'lower':>7}"]
    for run, score in scored:
        if score is None:
            continue
        cell, ref = run.cell, score.reference
        bounds = _bound_scores(score)
        best = f"{ref.best} {ref.best_h:.3f}"
        common = f"{best:<22}{ref.fifo_tune_h:>12.3f}{_num(bounds.get(NO_WAIT_BOUND, math.nan), '.1f'):>9}"
        if contention:
            common += f"{_num(bounds.get(CONTENTION_BOUND, math.nan), '.1f'):>11}"
        rows = score.summary[score.summary["source"] == "agent"]
        for row in rows.itertuples() if len(rows) else [None]:
            if row is None:
                lines.append(f"{cell.env_id:<25}{cell.mode:<12}{'-':<{aw}}{'-':>8}{'-':>8}  {common}")
                continue
            label = str(row.policy) + ("*" if row.policy in run.trained_here else "")
            p = score.paired.get(str(row.policy))
            paired, lower = "-", "-"
            if p is not None:
                paired = f"{p['mean_diff_h']:+.3f}" + ("" if math.isnan(p["ci95_h"]) else f" ± {p['ci95_h']:.3f}")
                lower = f"{p['better_seeds']}/{p['seeds']}"
            cut = _truncated(row.truncated)
            lines.append(f"{cell.env_id:<25}{cell.mode:<12}{label:<{aw}}{row.mean_jct_h:>8.3f}"
                         f"{_num(row.score, '.1f'):>8}  {common}  {paired:<20}{lower:>7}"
                         + (f"  ({cut} truncated)" if cut else ""))
    if any(run.trained_here for run, score in scored if score is not None):
        lines.append("* the cell the agent was trained in")
    lines += truncation_notes(scored)
    for run, _ in scored:
        for label, why in run.skipped:
            lines.append(f"skipped: {label} in {run.cell.name}: {why}")
        if run.contention not in ("computed", "cached", "off") and run.results is not None:
            lines.append(f"contention bound in {run.cell.name}: {run.contention}")
    return "\n".join(lines)


def leaderboard(scored: Scored) -> pd.DataFrame:
    """One row per policy (agents, env heuristics by mean score, bounds), ``(score, mean JCT, truncated episodes)``
    per cell name."""
    cells = [run.cell.name for run, score in scored if score is not None]
    table: dict[tuple[str, str], dict[str, tuple[float, float, int]]] = {}
    for run, score in scored:
        if score is None:
            continue
        row: Any  # a summary row: one attribute per column
        for row in score.summary.itertuples():
            table.setdefault((str(row.source), str(row.policy)), {})[run.cell.name] = (
                float(row.score), float(row.mean_jct_h), _truncated(row.truncated))
    order = {"agent": 0, "env": 1, "bound": 2}

    def rank(key: tuple[str, str]) -> tuple[int, float]:
        scores = [s for s, _, _ in table[key].values() if math.isfinite(s)]
        return order.get(key[0], 1), -float(np.mean(scores)) if scores and key[0] != "agent" else 0.0

    keys = sorted(table, key=rank)
    return pd.DataFrame([{"policy": p, "source": s, **{c: table[(s, p)].get(c) for c in cells}} for s, p in keys])


def format_leaderboard(scored: Scored) -> str:
    """The leaderboard as text: ``score (mean JCT h)`` per cell, ``score (mean JCT h, N truncated)`` where a policy's
    episodes were truncated (the table's :func:`truncation_notes` say what that means)."""
    board = leaderboard(scored)
    runs = [run for run, score in scored if score is not None]
    if board.empty:
        return ""
    texts = []
    for row in board.to_dict("records"):
        cells = []
        for run in runs:
            value = row.get(run.cell.name)
            cut = f", {value[2]} truncated" if value is not None and value[2] else ""
            cells.append("-" if value is None else f"{_num(value[0], '.1f')} ({value[1]:.2f}{cut})")
        texts.append((row, cells))
    width = max(16, *(len(str(p)) + 2 for p in board["policy"]))
    col = max(15, *(len(run.cell.short) + 2 for run in runs), *(len(c) + 2 for _, cells in texts for c in cells))
    lines = ["scores (mean JCT h) per cell",
             f"{'policy':<{width}}{'source':<8}" + "".join(f"{run.cell.short:>{col}}" for run in runs)]
    for row, cells in texts:
        lines.append(f"{row['policy']:<{width}}{row['source']:<8}" + "".join(f"{c:>{col}}" for c in cells))
    return "\n".join(lines)


def records(scored: Scored) -> list[dict[str, Any]]:
    """The rows of ``results.json``: one per cell and policy (see the module)."""
    out = []
    for run, score in scored:
        if score is None:
            continue
        for record, row in zip(summary_records(score.summary), score.summary.to_dict("records")):
            record = {"env_id": run.cell.env_id, "mode": run.cell.mode, **record, "score": json_value(row["score"])}
            record.pop("paired_vs_best_env", None)
            if row["source"] == "agent":
                record["trained_here"] = row["policy"] in run.trained_here
                paired = score.paired.get(str(row["policy"]))
                record["paired_vs_best_env"] = json_value(paired) if paired is not None else None
            out.append(record)
    return out


def csv_rows(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """``results.csv`` from the JSON rows: :data:`CSV_FIELDS`."""
    flat = []
    for r in rows:
        p = r.get("paired_vs_best_env") or {}
        own = CSV_FIELDS[: CSV_FIELDS.index("best_heuristic")]  # the row's own columns; the paired ones follow
        flat.append({**{k: r.get(k) for k in own}, "best_heuristic": p.get("heuristic"),
                     "paired_mean_diff_h": p.get("mean_diff_h"), "paired_ci95_h": p.get("ci95_h"),
                     "paired_relative": p.get("relative"), "lower_seeds": p.get("better_seeds"),
                     "paired_seeds": p.get("seeds"), "trained_here": r.get("trained_here")})
    # Counts stay integers beside the empty cells of the rows without a paired comparison (not 3.0, as in the JSON).
    return pd.DataFrame(flat, columns=list(CSV_FIELDS)).astype({"truncated": "Int64", "lower_seeds": "Int64",
                                                                "paired_seeds": "Int64"})


def episode_rows(scored: Scored) -> pd.DataFrame:
    """``episodes.csv``: every policy's mean JCT per seed in every cell that ran (:data:`EPISODE_FIELDS`)."""
    frames = [run.results.assign(env_id=run.cell.env_id, mode=run.cell.mode)[list(EPISODE_FIELDS)]
              for run, _ in scored if run.results is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(EPISODE_FIELDS))


def _scores(runs: list[tuple[CellRun, CellScore]], source: str, policy: str) -> list[float]:
    """A policy's score in each of the cells (NaN where it did not run)."""
    return [float(row["score"].iloc[0]) if len(row) else math.nan for row in _rows(runs, source, policy)]


def _truncations(runs: list[tuple[CellRun, CellScore]], source: str, policy: str) -> list[int]:
    """A policy's truncated episodes in each of the cells (0 where it did not run)."""
    return [_truncated(row["truncated"].iloc[0]) if len(row) else 0 for row in _rows(runs, source, policy)]


def _rows(runs: list[tuple[CellRun, CellScore]], source: str, policy: str) -> list[pd.DataFrame]:
    return [score.summary[(score.summary["policy"] == policy) & (score.summary["source"] == source)]
            for _, score in runs]


def scores_png(scored: Scored) -> bytes:
    """Bars of the agents' and env heuristics' scores per cell (``random`` left out), the bounds as markers.

    The axis shows scores from :data:`PLOT_RANGE` at most; a score beyond is drawn at the edge with its value.
    A bar whose policy had truncated episodes in its cell carries a red ``T`` (the tables' notes say why).
    """
    return figure_png(scores_figure(scored))


def scores_figure(scored: Scored) -> Figure:
    """:func:`scores_png`'s figure."""
    runs = [(run, score) for run, score in scored if score is not None]
    board = leaderboard(scored)
    keys = list(zip(board["source"], board["policy"])) if not board.empty else []
    bars = [(s, p) for s, p in keys if s == "agent" or (s == "env" and p != "random")]
    marks = [(s, p) for s, p in keys if s == "bound"]
    bar_scores = {key: _scores(runs, *key) for key in bars}
    mark_scores = {key: _scores(runs, *key) for key in marks}
    shown = [v for values in (*bar_scores.values(), *mark_scores.values()) for v in values if math.isfinite(v)]
    low = max(PLOT_RANGE[0], min([0.0, *shown]) - 15.0)
    high = min(PLOT_RANGE[1], max([100.0, *shown]) + 25.0)
    fig = new_figure(figsize=(max(8.0, 2.0 + 0.25 * len(runs) * max(1, len(bars))), 4.8), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(1, len(bars))

    def clipped(x: float, y: float) -> float:
        if y < low or y > high:
            edge = low if y < low else high
            ax.annotate(f"{y:.0f}", (x, edge), ha="center", va="bottom" if y < low else "top", fontsize="x-small",
                        rotation=90, xytext=(0, 2 if y < low else -2), textcoords="offset points")
            return edge
        return y

    any_cut = False
    for i, ((source, policy), values) in enumerate(bar_scores.items()):
        x = np.arange(len(runs)) - 0.4 + width * (i + 0.5)
        heights = [clipped(float(xi), v) if math.isfinite(v) else math.nan for xi, v in zip(x, values)]
        agent = source == "agent"
        ran = [len(row) > 0 for row in _rows(runs, source, policy)]
        for xi, height, cut, did_run in zip(x, heights, _truncations(runs, source, policy), ran):
            if agent and not did_run:  # skipped in this cell: no bar, not a score of 0
                ax.annotate("not run", (float(xi), 0.0), ha="center", va="bottom", rotation=90, fontsize="x-small",
                            xytext=(0, 2), textcoords="offset points")
            elif cut and math.isfinite(height):
                any_cut = True
                ax.annotate("T", (float(xi), height), ha="center", va="bottom" if height >= 0 else "top",
                            color="red", fontsize="small", fontweight="bold", xytext=(0, 2 if height >= 0 else -2),
                            textcoords="offset points")
        ax.bar(x, heights, width, label=f"{policy} (agent)" if agent else policy, color=curve_style(i)["color"],
               hatch="//" if agent else None, edgecolor="black" if agent else None)
    for j, ((_, policy), values) in enumerate(mark_scores.items()):
        x = np.arange(len(runs), dtype=float)
        ys = [clipped(float(xi), v) if math.isfinite(v) else math.nan for xi, v in zip(x, values)]
        ax.scatter(x, ys, marker=("_", "x", "+")[j % 3], s=500 if j % 3 == 0 else 60, color="black",
                   label=f"{policy} (bound)", zorder=3)
    for xi, (_, score) in enumerate(runs):
        if math.isnan(score.reference.score(score.reference.best_h)):  # no room between the two references
            ax.annotate(f"scores undefined:\n{ZERO} is the best\nenv heuristic", (float(xi), 50.0), ha="center",
                        va="center", fontsize="x-small")
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.axhline(100, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylim(low, high)
    ax.set_xlim(-0.5, len(runs) - 0.5)  # every cell whole, also one whose scores are all undefined (no bars)
    ax.set_xticks(np.arange(len(runs)), [run.cell.short for run, _ in runs])
    ax.set_ylabel(f"score (0 = env {ZERO}, 100 = best env heuristic)")
    heuristics = len([n for n in HEURISTIC_NAMES if n != "random"])
    ax.set_title(f"benchmark scores per cell: agents, {heuristics} env heuristics (random not shown), bounds;\n"
                 f"scores beyond {PLOT_RANGE[0]:g}..{PLOT_RANGE[1]:g} are drawn at the edge with their value"
                 + ("; T: some episodes truncated at max_rounds (not comparable)" if any_cut else ""),
                 fontsize="medium")
    if bars or marks:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    return fig


def write_outputs(scored: Scored, out: Path, json_path: Path | None, meta: dict[str, Any], stage: Stage) -> None:
    """``--out``: :data:`OUTPUT_FILES` (and ``results.json`` to ``json_path`` too), each through ``stage``."""
    rows = records(scored)
    write_results_json([stage(out / "results.json"), stage(json_path) if json_path is not None else None], rows, meta)
    atomic_write_text(stage(out / "results.csv"), csv_rows(rows).to_csv(index=False))
    atomic_write_text(stage(out / "episodes.csv"), episode_rows(scored).to_csv(index=False))
    atomic_write_bytes(stage(out / "scores.png"), scores_png(scored))
