"""The files ``synergy-gym evaluate`` writes: ``results.csv``, ``results.json``, ``jct_cdf.png`` and the records.

:func:`write_outputs` writes :data:`OUTPUT_FILES` to ``--out`` (and ``results.json``
to ``--json``): one ``results.csv`` row per policy and seed (:data:`FIELDS`), the
summary rows (:func:`synergy_gym.agents.eval_summary.summary_records`) with the run's
``meta`` (:mod:`synergy_gym.cli.results_json`) and the CDF of the pooled job completion
times (:func:`cdf_curves`: the agents, the best env heuristic, fifo+tune and the
no-waiting bound; every policy with ``--plot-all``). :func:`write_decisions` writes the
``--decisions`` logs and :func:`jobs_table` the ``--jobs-csv`` table (:data:`JOBS_FIELDS`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synergy_gym.agents.eval_policies import decisions_file_name
from synergy_gym.agents.eval_summary import summary_records
from synergy_gym.cli.files import atomic_write_bytes, atomic_write_text
from synergy_gym.cli.plots import jct_cdf_png
from synergy_gym.cli.results_json import write_results_json

#: One row per policy and seed in ``results.csv``.
FIELDS = ("policy", "source", "seed", "load", "mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h",
          "jobs_finished", "jobs_total", "terminated", "decisions", "invalid_actions", "wall_s")
#: What ``--out`` holds.
OUTPUT_FILES = ("results.csv", "results.json", "jct_cdf.png")
#: Columns of ``--jobs-csv``: one row per job, episode and policy.
JOBS_FIELDS = ("policy", "source", "seed", "job_id", "arrival_h", "start_h", "finish_h", "jct_h", "gpus", "model")


def jobs_table(results: pd.DataFrame) -> pd.DataFrame:
    """``--jobs-csv``: the ``jobs`` frames of the results with policy, source and seed (:data:`JOBS_FIELDS`)."""
    frames = []
    row: Any  # a row: one attribute per column
    for row in results.itertuples(index=False):
        jobs = getattr(row, "jobs", None)
        if isinstance(jobs, pd.DataFrame):
            frames.append(jobs.assign(policy=row.policy, source=row.source, seed=int(row.seed)))
    if not frames:
        return pd.DataFrame(columns=list(JOBS_FIELDS))
    return pd.concat(frames, ignore_index=True)[list(JOBS_FIELDS)]


def write_decisions(results: pd.DataFrame, folder: Path) -> list[Path]:
    """``--decisions``: ``folder/<label>.jsonl`` per policy with a decision log (the first seed's episode)."""
    written = []
    folder.mkdir(parents=True, exist_ok=True)
    row: Any  # a row: one attribute per column
    for row in results.itertuples(index=False):
        log = getattr(row, "decision_log", None)
        if not isinstance(log, list):
            continue
        lines = [json.dumps({"seed": int(row.seed), **record}, allow_nan=False) for record in log]
        path = folder / decisions_file_name(str(row.policy))
        atomic_write_text(path, "".join(line + "\n" for line in lines))
        written.append(path)
    return written


def cdf_curves(jcts: dict[tuple[str, str], np.ndarray], summary: pd.DataFrame,
               plot_all: bool = False) -> dict[str, np.ndarray]:
    """The curves of ``jct_cdf.png``, ``{legend label: JCTs}`` in drawing order.

    By default the agents, the best env heuristic (the lowest mean JCT of source ``env``),
    ``fifo+tune`` (the env heuristic, else the simulator's) and the no-waiting bound;
    with ``plot_all`` every policy, in the order they ran. Labels are ``name (source)``.
    """
    present = {key: values for key, values in jcts.items() if np.asarray(values).size}
    if plot_all:
        keys = list(present)
    else:
        env = summary[summary["source"] == "env"]
        best = [(str(env["policy"].iloc[0]), "env")] if len(env) else []  # summary is sorted by mean JCT
        tune = [k for k in (("fifo+tune", "env"), ("fifo+tune", "sim")) if k in present][:1]
        keys = [k for k in present if k[1] == "agent"] + best + tune + [k for k in present if k[1] == "bound"]
        keys = [k for k in dict.fromkeys(keys) if k in present]
    best_env = summary[summary["source"] == "env"]["policy"].head(1).tolist()
    return {f"{name} ({source}, best heuristic)" if source == "env" and [name] == best_env else f"{name} ({source})":
            np.asarray(present[(name, source)], dtype=float) for name, source in keys}


def write_outputs(results: pd.DataFrame, jcts: dict[tuple[str, str], np.ndarray], summary: pd.DataFrame, out: Path,
                  json_path: Path | None, meta: dict[str, Any] | None = None, plot_all: bool = False) -> None:
    """``--out``: ``results.csv``, ``results.json`` with ``meta`` (also to ``json_path`` if given) and ``jct_cdf.png``."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "results.csv", results[list(FIELDS)].to_csv(index=False))
    write_results_json([out / "results.json", json_path], summary_records(summary), meta or {})
    load = results["load"].iloc[0]
    curves = cdf_curves(jcts, summary, plot_all)
    cdf = {(label, load): values for label, values in curves.items()}
    if len(cdf) < len(jcts):
        shown = (f"{len(cdf)} of {len(jcts)} policies: the agents, the best env heuristic, fifo+tune, the bound "
                 "(--plot-all: all)")
    else:
        shown = f"{len(cdf)} {'policy' if len(cdf) == 1 else 'policies'}"
    title = f"CDF of job completion times, every job of the evaluation episodes\n{shown}"
    atomic_write_bytes(out / "jct_cdf.png", jct_cdf_png(cdf, title, jobs="jobs of the episodes"))
