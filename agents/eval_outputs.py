"""The files ``synergy-gym evaluate`` writes: ``results.csv``, ``results.json``, ``jct_cdf.png`` and the records.

:func:`write_outputs` writes :data:`OUTPUT_FILES` to ``--out`` (and ``results.json``
to ``--json``): one ``results.csv`` row per policy and seed (:data:`FIELDS`), the
summary rows (:func:`synergy_gym.agents.eval_summary.summary_records`) with the run's
``meta`` (:mod:`synergy_gym.cli.results_json`) and the CDF of the pooled job completion
times of the finished jobs (:func:`cdf_figure`; :func:`cdf_curves`: the agents, the best env heuristic,
fifo+tune and the no-waiting bound; every policy with ``--plot-all``; truncated ones marked).
:func:`write_decisions` writes the ``--decisions`` logs and :func:`jobs_table` the ``--jobs-csv`` table (:data:`JOBS_FIELDS`).

All of them appear together or none does: :func:`staged_writer` stages every file
(:func:`synergy_gym.cli.staging.staged_outputs`) and moves them into place once all are written; an
error, Ctrl-C or SIGTERM while writing leaves nothing. :func:`check_record_paths` checks the
``--decisions`` and ``--jobs-csv`` paths before any work.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synergy_gym.agents.eval_policies import decisions_file_name, decisions_files
from synergy_gym.agents.eval_summary import best_env_row, summary_records
from synergy_gym.cli.files import atomic_write_bytes, atomic_write_text, check_output_dir, check_output_file
from synergy_gym.cli.plots import jct_cdf_png
from synergy_gym.cli.results_json import write_results_json
from synergy_gym.cli.staging import Staging
from synergy_gym.errors import PathError

#: One row per policy and seed in ``results.csv``.
FIELDS = ("policy", "source", "seed", "load", "mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h",
          "jobs_finished", "jobs_total", "terminated", "decisions", "invalid_actions", "wall_s")
#: What ``--out`` holds.
OUTPUT_FILES = ("results.csv", "results.json", "jct_cdf.png")
#: Where a file of the run is written: told its final path, gives the (staged) path to write.
Stage = Callable[[Path], Path]
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


def write_decisions(results: pd.DataFrame, folder: Path, stage: Stage | None = None) -> list[Path]:
    """``--decisions``: ``folder/<label>.jsonl`` per policy with a decision log (the first seed's episode).

    ``stage``: where each file is written instead (:func:`staged_writer`); the paths returned are the final ones.
    """
    written = []
    place = stage or _in_place
    row: Any  # a row: one attribute per column
    for row in results.itertuples(index=False):
        log = getattr(row, "decision_log", None)
        if not isinstance(log, list):
            continue
        lines = [json.dumps({"seed": int(row.seed), **record}, allow_nan=False) for record in log]
        path = folder / decisions_file_name(str(row.policy))
        atomic_write_text(place(path), "".join(line + "\n" for line in lines))
        written.append(path)
    return written


def cdf_curves(jcts: dict[tuple[str, str], np.ndarray], summary: pd.DataFrame,
               plot_all: bool = False) -> dict[str, np.ndarray]:
    """The curves of ``jct_cdf.png``, ``{legend label: JCTs of the finished jobs}`` in drawing order.

    By default the agents, the best env heuristic (:func:`~synergy_gym.agents.eval_summary.best_env_row`: the
    lowest mean JCT of source ``env``, never ``random``),
    ``fifo+tune`` (the env heuristic; also the simulator's when the env heuristic finished no job, or
    ran not at all) and the no-waiting bound;
    with ``plot_all`` every policy, in the order they ran; never the contention bound, which has no per-job
    JCTs. Labels are ``name (source)``, ``name (source, N truncated)`` for a policy with N episodes
    truncated at ``max_rounds`` (the summary's ``truncated``). A policy that finished no job keeps its
    label with no JCTs (:func:`write_outputs` names it in the title).
    """
    present = {key: values for key, values in jcts.items() if not _mean_only(key)}
    row = best_env_row(summary)
    best_env = [] if row is None else [str(row["policy"])]
    if plot_all:
        keys = list(present)
    else:
        best = [(name, "env") for name in best_env]
        tune = [("fifo+tune", "env")] if ("fifo+tune", "env") in present else []
        if not any(np.asarray(present[k]).size for k in tune) and ("fifo+tune", "sim") in present:
            tune.append(("fifo+tune", "sim"))  # the env heuristic finished no job (it stays named) or did not run
        keys = [k for k in present if k[1] == "agent"] + best + tune + [k for k in present if k[1] == "bound"]
        keys = [k for k in dict.fromkeys(keys) if k in present]
    truncated = _truncated(summary)
    curves = {}
    for name, source in keys:
        notes = [source, *(["best heuristic"] if source == "env" and [name] == best_env else [])]
        notes += [f"{truncated[(name, source)]} truncated"] if truncated.get((name, source)) else []
        curves[f"{name} ({', '.join(notes)})"] = np.asarray(present[(name, source)], dtype=float)
    return curves


def _mean_only(key: tuple[str, str]) -> bool:
    """Whether the policy ``(name, source)`` has a mean JCT only, no per-job JCTs: the contention bound."""
    from synergy_gym.baselines.sim_on_env import CONTENTION_BOUND  # imports scipy: only when drawing

    return key == (CONTENTION_BOUND, "bound")


def _truncated(summary: pd.DataFrame) -> dict[tuple[str, str], int]:
    """``{(policy, source): truncated episodes}`` of the summary (none without its ``truncated`` column)."""
    if "truncated" not in summary:
        return {}
    return {(str(p), str(s)): int(t) for p, s, t in zip(summary["policy"], summary["source"], summary["truncated"])
            if not pd.isna(t)}


def write_outputs(results: pd.DataFrame, jcts: dict[tuple[str, str], np.ndarray], summary: pd.DataFrame, out: Path,
                  json_path: Path | None, meta: dict[str, Any] | None = None, plot_all: bool = False,
                  stage: Stage | None = None) -> None:
    """``--out``: ``results.csv``, ``results.json`` with ``meta`` (also to ``json_path`` if given) and ``jct_cdf.png``.

    ``stage``: where each file is written instead (:func:`staged_writer`).
    """
    place = stage or _in_place
    atomic_write_text(place(out / "results.csv"), results[list(FIELDS)].to_csv(index=False))
    write_results_json([place(out / "results.json"), place(json_path) if json_path is not None else None],
                       summary_records(summary), meta or {})
    title, jobs, cdf = cdf_figure(jcts, summary, results["load"].iloc[0], plot_all)
    atomic_write_bytes(place(out / "jct_cdf.png"), jct_cdf_png(cdf, title, jobs=jobs))


def cdf_figure(jcts: dict[tuple[str, str], np.ndarray], summary: pd.DataFrame, load: Any,
               plot_all: bool = False) -> tuple[str, str, dict[tuple[str, Any], np.ndarray]]:
    """``jct_cdf.png``'s title, its axis' jobs and its curves ``{(label, panel): JCTs}`` (:func:`cdf_curves`).

    The panel is the load (jobs per hour), ``fixed workload`` where it has none (NaN: jobs from a file).
    Where a drawn policy had truncated episodes the figure is of the finished jobs (the unfinished ones have no
    JCT); a chosen policy that finished no job has no curve and is named in the title.
    """
    curves = cdf_curves(jcts, summary, plot_all)
    panel = "fixed workload" if load is None or pd.isna(load) else load
    cdf = {(label, panel): values for label, values in curves.items() if values.size}
    unfinished = [label for label, values in curves.items() if not values.size]
    plottable = sum(not _mean_only(key) for key in jcts)
    if not curves:
        shown = "no policy with per-job JCTs (the contention bound gives a mean only)"
    elif len(curves) < plottable:
        shown = (f"{len(curves)} of {plottable} policies: the agents, the best env heuristic, fifo+tune, the bound "
                 "(--plot-all: all)")
    else:
        shown = f"{len(curves)} {'policy' if len(curves) == 1 else 'policies'}"
    truncated = any(" truncated)" in label for label in curves)
    jobs = "finished jobs of the episodes" if truncated else "jobs of the episodes"
    which = ("the finished jobs of the evaluation episodes (truncated episodes' unfinished jobs have no JCT)"
             if truncated else "every job of the evaluation episodes")
    title = f"CDF of job completion times, {which}\n{shown}"
    if unfinished:
        title += f"\nno finished job, no curve: {', '.join(unfinished)}"
    return title, jobs, cdf


def _in_place(path: Path) -> Path:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return Path(path)


def _inside(path: Path, folder: Path) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(folder) + os.sep)


def _same_or_inside(path: Path, folder: Path) -> bool:
    return os.path.abspath(path) == os.path.abspath(folder) or _inside(path, folder)


class StagedFiles:
    """The :data:`Stage` of :func:`staged_writer`; after the block, :attr:`folder` is where ``out``'s files went."""

    def __init__(self, main: Staging, logs: Staging | None, decisions: Path | None) -> None:
        self._main, self._logs, self._decisions = main, logs, decisions

    def __call__(self, path: Path) -> Path:
        # a decision log goes with --decisions; anything else (and everything when --decisions holds --out) with --out
        log = self._decisions is not None and _inside(path, self._decisions) and not _inside(path, self._main.target)
        staged = (self._logs if self._logs is not None and log else self._main).file(path)
        staged.parent.mkdir(parents=True, exist_ok=True)
        return staged

    @property
    def folder(self) -> Path:
        """``out``, or for a default folder another command took meanwhile, the free ``out-2``, … used instead."""
        return self._main.final


@contextmanager
def staged_writer(out: Path, decisions: Path | None = None, default_name: bool = False,
                  new: bool | None = None) -> Iterator[StagedFiles]:
    """A :data:`Stage` for the files of one evaluation: they move into place together when the block ends.

    ``out`` is staged as a folder (``default_name``: the command's default one, see
    :func:`~synergy_gym.cli.staging.staged_outputs`); the ``decisions`` folder too, when it is neither ``out`` nor
    inside it (a folder that did not exist is then not left behind empty); other files (``--json``, ``--jobs-csv``)
    are staged beside their place. ``new``: ``out`` did not exist when the command checked its paths
    (:func:`~synergy_gym.cli.staging.is_new`). A file that cannot be written (a full disk) is one line
    saying that nothing was.
    """
    stagings: list[Staging] = []
    try:
        try:
            stagings.append(Staging(out, default_name, new))
            if decisions is not None and not _same_or_inside(decisions, out):
                stagings.append(Staging(decisions))
            yield StagedFiles(stagings[0], stagings[1] if len(stagings) > 1 else None, decisions)
        except BaseException:
            for staging in stagings:
                staging.discard()
            raise
        # --out first: if another command took its new folder (an error), the decision logs are not written either
        for i, staging in enumerate(stagings):
            try:
                staging.commit()
            except BaseException:
                for later in stagings[i + 1:]:
                    later.discard()
                raise
    except OSError as exc:  # the staged files are gone already
        where = f" ({exc.filename})" if exc.filename else ""
        raise PathError(f"writing the results failed: {exc.strerror or exc}{where}; nothing written") from None


def check_record_paths(out: Path, json_path: Path | None, decisions: Path | None, jobs_csv: Path | None,
                       labels: list[str], env_names: tuple[str, ...]) -> None:
    """``--decisions`` and ``--jobs-csv`` may be written and overwrite none of the other files the run writes."""
    written = {os.path.abspath(out / name): "--out" for name in OUTPUT_FILES}  # files the run writes, by flag
    if json_path is not None:
        written[os.path.abspath(json_path)] = "--json"
    folders: tuple[tuple[Path, str], ...] = ((out, "--out"),)
    if decisions is not None:
        names = decisions_files(labels, env_names)
        inside_out = os.path.abspath(decisions.parent) == os.path.abspath(out)  # out/DIR: created with --out
        check_output_dir(decisions, "--decisions", tuple(names), create_parents=inside_out)
        for name in names:
            path = os.path.abspath(decisions / name)
            if path in written:
                raise PathError(f"--decisions {decisions}: {name} would overwrite the {written[path]} file {path}")
            written[path] = "--decisions"
        folders += ((decisions, "--decisions"),)
    if jobs_csv is not None:
        check_output_file(jobs_csv, "--jobs-csv", folders=folders)
        other = written.get(os.path.abspath(jobs_csv))
        if other is not None:
            raise PathError(f"--jobs-csv {jobs_csv}: is also a file that {other} writes")
