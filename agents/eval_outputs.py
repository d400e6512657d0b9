"""The files ``synergy-gym evaluate`` writes: ``results.csv``, ``results.json``, ``jct_cdf.png`` and the records.

:func:`write_outputs` writes :data:`OUTPUT_FILES` to ``--out`` (and ``results.json``
to ``--json``): one ``results.csv`` row per policy and seed (:data:`FIELDS`), the
summary rows (:func:`synergy_gym.agents.eval_summary.summary_records`) and the CDF of the
pooled job completion times. :func:`write_decisions` writes the ``--decisions`` logs
and :func:`jobs_table` the ``--jobs-csv`` table (:data:`JOBS_FIELDS`).
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


def write_outputs(results: pd.DataFrame, jcts: dict[tuple[str, str], np.ndarray], summary: pd.DataFrame, out: Path,
                  json_path: Path | None) -> None:
    """``--out``: ``results.csv``, ``results.json`` (also to ``json_path`` if given) and ``jct_cdf.png``."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "results.csv", results[list(FIELDS)].to_csv(index=False))
    text = json.dumps(summary_records(summary), indent=2) + "\n"
    atomic_write_text(out / "results.json", text)
    if json_path is not None:
        atomic_write_text(json_path, text)
    load = results["load"].iloc[0]
    cdf = {(f"{name} ({source})", load): values for (name, source), values in jcts.items() if values.size}
    title = f"CDF of job completion times: {len(cdf)} policies, every job of the evaluation episodes"
    atomic_write_bytes(out / "jct_cdf.png", jct_cdf_png(cdf, title, jobs="jobs of the episodes"))
