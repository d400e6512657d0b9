"""The evaluation's summary: one row per policy over the seeds, paired comparisons, the table and the JSON rows.

:func:`summarise` turns the per-seed results of :func:`synergy_gym.agents.evaluate.run_policies`
into one row per (policy, source): the mean over episodes of the episode's mean JCT with
its 95 % t-interval (:func:`synergy_gym.experiments.statistics.mean_ci95`), p99 JCT and
makespan, and several models' mean row ``agent`` with its CI over models.
:func:`paired_vs_best_env` compares each agent per seed with the best env heuristic (:func:`best_env_row`:
the lowest mean JCT, never ``random``);
:func:`format_summary` is the printed table and :func:`summary_records` the rows of
``results.json`` (:data:`SUMMARY_FIELDS`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from synergy_gym.agents.baseline_scores import best_heuristic
from synergy_gym.experiments.statistics import mean_ci95

#: Keys of every row of ``results.json`` (and ``--json``).
SUMMARY_FIELDS = ("policy", "source", "episodes", "mean_jct_h", "mean_jct_ci95_h", "p99_jct_h", "makespan_h",
                  "truncated", "wall_s", "ci95_over", "per_seed")


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (policy, source), sorted by mean JCT (the columns: :mod:`synergy_gym.agents.evaluate`).

    Several agents (``agent[0]``, ``agent[1]``, …) also give a row ``agent``: the mean over
    models, with the 95 % CI over the models' means (``ci95_over`` = ``"models"``); its ``truncated`` counts
    the seeds on which any model's episode was truncated, so it is at most its ``episodes`` (one per seed).
    """
    rows: list[dict[str, Any]] = []
    for (policy, source), g in results.groupby(["policy", "source"], sort=False):
        mean, half = mean_ci95(g["mean_jct_h"].to_numpy())
        rows.append({
            "policy": policy, "source": source, "episodes": len(g), "mean_jct_h": mean, "mean_jct_ci95_h": half,
            "p99_jct_h": float(g["p99_jct_h"].mean()), "makespan_h": float(g["makespan_h"].mean()),
            "truncated": int((~g["terminated"].astype(bool)).sum()), "wall_s": float(g["wall_s"].sum()),
            "ci95_over": "episodes", "per_seed": {str(int(s)): float(v) for s, v in zip(g["seed"], g["mean_jct_h"])},
        })
    agents = [r for r in rows if r["source"] == "agent"]
    if len(agents) > 1:
        mean, half = mean_ci95(np.array([r["mean_jct_h"] for r in agents]))
        per_seed = _mean_over_models(pd.DataFrame([r["per_seed"] for r in agents]))
        rows.append({
            "policy": "agent", "source": "agent", "episodes": agents[0]["episodes"], "mean_jct_h": mean,
            "mean_jct_ci95_h": half, "p99_jct_h": float(np.mean([r["p99_jct_h"] for r in agents])),
            "makespan_h": float(np.mean([r["makespan_h"] for r in agents])),
            "truncated": _seeds_truncated(results[results["source"] == "agent"]),
            "wall_s": sum(r["wall_s"] for r in agents),
            "ci95_over": "models", "models": len(agents), "per_seed": {k: float(v) for k, v in per_seed.items()},
        })
    summary = pd.DataFrame(rows)
    return summary.sort_values("mean_jct_h", kind="stable", ignore_index=True)


def _mean_over_models(frame: pd.DataFrame) -> pd.Series:
    """Each column's mean over the rows (models), as a first value plus the mean difference from it: exactly that
    value when the models agree (a plain mean of three equal JCTs can be an ulp below them, and their mean row was
    then "lower" than a heuristic every model tied)."""
    first = frame.bfill().iloc[0]
    return first + (frame - first).mean(axis=0)


def _seeds_truncated(episodes: pd.DataFrame) -> int:
    """How many seeds of ``episodes`` (rows of several policies) have a truncated episode of any of them."""
    cut = ~episodes["terminated"].astype(bool)
    return int(episodes.loc[cut, "seed"].nunique())


def best_env_row(summary: pd.DataFrame) -> pd.Series | None:
    """The best env heuristic's row: the lowest mean JCT of source ``env``, ties by name, ``random`` never
    (:func:`synergy_gym.agents.baseline_scores.best_heuristic`'s rule, which training also follows unless
    ``random`` is its only heuristic); None when no env heuristic but ``random`` ran."""
    env_rows = summary[summary["source"] == "env"]
    means = {str(p): float(m) for p, m in zip(env_rows["policy"], env_rows["mean_jct_h"])}
    best = best_heuristic(means) if means else "random"
    return None if best == "random" else env_rows[env_rows["policy"] == best].iloc[0]


def paired_vs_best_env(summary: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each agent row's paired per-seed comparison with the best env heuristic of the table (:func:`best_env_row`;
    ``{}`` without one).

    For every seed both ran: difference = agent's mean JCT − the heuristic's. Per agent row
    (the models' mean row ``agent`` included: its per-seed mean over the models):
    ``{heuristic, seeds, mean_diff_h, ci95_h (t-interval over seeds), relative (mean_diff /
    the heuristic's mean over those seeds), better_seeds (seeds with a lower JCT)}``.
    """
    best = best_env_row(summary)
    if best is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for row in summary[summary["source"] == "agent"].itertuples():
        seeds = [s for s in row.per_seed if s in best["per_seed"]]
        if not seeds:
            continue
        agent = np.array([row.per_seed[s] for s in seeds])
        heuristic = np.array([best["per_seed"][s] for s in seeds])
        mean, half = mean_ci95(agent - heuristic)
        out[str(row.policy)] = {
            "heuristic": str(best["policy"]), "seeds": len(seeds), "mean_diff_h": mean, "ci95_h": half,
            "relative": mean / float(heuristic.mean()), "better_seeds": int((agent < heuristic).sum()),
        }
    return out


def _reference(summary: pd.DataFrame) -> tuple[str, float]:
    """The row the table's ratios are to: env fifo+tune, else sim fifo+tune (label and mean JCT)."""
    for source in ("env", "sim"):
        row = summary[(summary["policy"] == "fifo+tune") & (summary["source"] == source)]
        if len(row):
            return f"{source} fifo+tune", float(row["mean_jct_h"].iloc[0])
    return "", float("nan")


def seed_text(seeds: list[int], separator: str = ",") -> str:
    """``1000000..1000019`` for a run of consecutive seeds (more than two), else the seeds joined by ``separator``."""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}..{seeds[-1]}"
    return separator.join(map(str, seeds))


def run_heading(env_id: str, seeds: list[int], env_kwargs: dict[str, Any] | None = None) -> str:
    """The table's first line: the environment, its env kwargs beyond the id's (``preemptive=True`` …) and the seeds."""
    kwargs = " ".join(f"{key}={value}" for key, value in (env_kwargs or {}).items())
    episodes = f"{len(seeds)} episode{'s' if len(seeds) != 1 else ''}"
    seeds_part = f"workload seeds {seed_text(seeds, ', ')} ({episodes}; all jobs of each episode)"
    return f"{env_id}{f' ({kwargs})' if kwargs else ''}, {seeds_part}"


def format_summary(summary: pd.DataFrame, seeds: list[int], env_id: str, env_kwargs: dict[str, Any] | None = None) -> str:
    """The table, sorted by mean JCT, and a line naming the best env heuristic; ``env_kwargs``: the run's (heading)."""
    ref_label, ref = _reference(summary)
    width = max([16, *(len(str(p)) + 2 for p in summary["policy"])])  # long agent names widen the column
    lines = [run_heading(env_id, seeds, env_kwargs),
             (f"{'policy':<{width}}{'source':<8}{'mean JCT h':>11}{'± 95% CI':>10}{'p99 h':>9}{'makespan h':>12}"
              f"{'vs ' + ref_label if ref_label else '':>20}{'wall s':>9}")]
    r: Any  # a row: one attribute per column
    for r in summary.itertuples():
        ci = "-" if math.isnan(r.mean_jct_ci95_h) else f"{r.mean_jct_ci95_h:.2f}"
        if r.ci95_over == "models":
            ci += "*"
        ratio = f"{r.mean_jct_h / ref:.3f}×" if ref_label else ""
        flag = f"  ({r.truncated} truncated)" if r.truncated else ""
        p99, makespan = (_cell(r.p99_jct_h, ".2f"), _cell(r.makespan_h, ".1f"))  # "-": a bound with a mean only
        lines.append(f"{r.policy:<{width}}{r.source:<8}{r.mean_jct_h:>11.3f}{ci:>10}{p99:>9}{makespan:>12}"
                     f"{ratio:>20}{r.wall_s:>9.1f}{flag}")
    if (summary["ci95_over"] == "models").any():
        lines.append("* the CI of the agents' mean is over models, the others' over episodes")
    best = best_env_row(summary)
    if best is not None:
        vs = f" ({best['mean_jct_h'] / ref - 1:+.1%} vs {ref_label})" if ref_label else ""
        lines.append(f"best env heuristic: {best['policy']}, mean JCT {best['mean_jct_h']:.3f} h{vs}")
    elif (summary["source"] == "env").any():
        paired = "; the agents get no paired comparison" if (summary["source"] == "agent").any() else ""
        lines.append(f"best env heuristic: none (only random ran, and random never counts){paired}")
    for name, p in paired_vs_best_env(summary).items():
        ci = "" if math.isnan(p["ci95_h"]) else f" ± {p['ci95_h']:.3f}"
        lines.append(f"paired vs {p['heuristic']}: {name} {p['mean_diff_h']:+.3f} h{ci} ({p['relative']:+.1%}), "
                     f"lower JCT on {p['better_seeds']} of {p['seeds']} seeds")
    return "\n".join(lines)


def _cell(value: float, spec: str) -> str:
    """A number of the table, or ``-`` where there is none (NaN)."""
    return "-" if math.isnan(value) else format(value, spec)


def summary_records(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """The JSON rows: :data:`SUMMARY_FIELDS` (and ``models`` for the agents' mean)."""
    records = []
    paired = paired_vs_best_env(summary)
    for row in summary.to_dict("records"):
        record = {k: json_value(row.get(k)) for k in SUMMARY_FIELDS}
        if isinstance(row.get("models"), (int, float, np.integer, np.floating)) and not pd.isna(row.get("models")):
            record["models"] = int(row["models"])
        if row["source"] == "agent" and str(row["policy"]) in paired:
            record["paired_vs_best_env"] = json_value(paired[str(row["policy"])])
        records.append(record)
    return records


def json_value(value: Any) -> Any:
    """``value`` as JSON has it: NumPy numbers as Python's, NaN as None, dicts with string keys."""
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value
