"""``synergy-gym sweep``: every (policy, load, seed) simulation, on Ray when it is there.

Each cell – one policy on one synthetic workload (``--load`` jobs/hour, seed,
``--jobs`` jobs or the paper's open-ended run) – is an independent
simulation: a Ray task on a local Ray instance (or the cluster at
``--address``), or with ``--no-ray`` (or without Ray installed) a plain loop in
this process. Either way the numbers are identical.

Every finished cell is written at once and atomically to
``<out>/cells/<policy>__load<L>__seed<S>.json`` (its summary and the measured
jobs' JCTs). Re-running the same command with the same ``--out`` skips the
cells already there, so an interrupted sweep resumes without losing or
duplicating results. At the end the folder gets

``results.csv`` (and ``results.parquet`` when pyarrow is installed)
    one row per cell: policy, load, seed and the run's summary;
``avg_jct_vs_load.png``
    mean JCT against load per policy (bars per policy for one load), with the
    95 % confidence interval over seeds (t-distribution) that the printed
    table gives as ``± CI95``; none with one seed;
``jct_cdf.png``
    the CDF of measured JCTs, one panel per load;
``results.json`` (and ``--json FILE``)
    the rows of ``results.csv`` as ``{"results": [...], "meta": {...}}``
    (:mod:`synergy_gym.cli.results_json`).

Inputs are checked (``--out``, ``--json``, policies, seeds, loads, ``--jobs``, cluster,
Ray address) before anything is written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from synergy_gym.baselines.plots import CI_LABEL, describe_runs
from synergy_gym.baselines.registry import make_policy, parse_policy_list
from synergy_gym.cli.args import check_job_count, parse_float_list, parse_seed_list
from synergy_gym.cli.files import atomic_write_bytes, atomic_write_text, check_output_dir, check_output_file
from synergy_gym.cli.plots import figure_png, jct_cdf_png, pyplot
from synergy_gym.cli.results_json import build_meta, utc_now, write_results_json
from synergy_gym.errors import Interrupted, SynergyGymError
from synergy_gym.experiments.statistics import ci95_half_width
from synergy_gym.sim.cluster import ClusterSpec, load_cluster
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.generator import SyntheticWorkload
from synergy_gym.sim.simulator import Simulator
from synergy_gym.sim.workload import MAX_JOBS

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class SweepCell:
    """One simulation of a sweep."""

    policy: str
    load: float
    seed: int
    num_jobs: int | None = None
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    config: SimulationConfig = field(default_factory=SimulationConfig)

    @property
    def key(self) -> str:
        return f"{self.policy}__load{self.load:g}__seed{self.seed}"


def run_cell(cell: SweepCell) -> dict:
    """Simulate one cell; returns its summary and the measured jobs' JCTs (a JSON-ready dict)."""
    spec = SyntheticWorkload(
        jobs_per_hour=cell.load, seed=cell.seed, num_jobs=cell.num_jobs, max_gpus=cell.cluster.total_gpus
    )
    workload, more = spec.stream()
    result = Simulator(cell.cluster, workload, make_policy(cell.policy), cell.config, more_jobs=more).run()
    summary = result.summary.as_dict()
    summary.pop("policy")
    return {
        "policy": cell.policy,
        "load": cell.load,
        "seed": cell.seed,
        **summary,
        "jct_h": result.measured_jct_h().tolist(),
    }


def _cell_path(out: Path, cell: SweepCell) -> Path:
    return out / "cells" / f"{cell.key}.json"


def finished_cells(out: Path, cells: Iterable[SweepCell]) -> dict[str, dict]:
    """Cells of ``cells`` whose result file is already in ``out`` (unreadable files count as missing)."""
    done = {}
    for cell in cells:
        path = _cell_path(out, cell)
        if path.is_file():
            try:
                done[cell.key] = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
    return done


def interrupted_message(out: Path, cells: list[SweepCell], same_out: bool) -> str:
    """What an interrupted sweep kept, and how to resume it (``same_out``: ``--out`` was given)."""
    kept = len(finished_cells(out, cells))
    if not kept:
        return "no cell had finished; nothing written"
    again = "re-run the same command to resume" if same_out else f"re-run it with --out {out} to resume"
    return f"{kept} of {len(cells)} cells kept in {out / 'cells'}; {again}"


def connect_ray(address: str | None) -> ModuleType | None:
    """The ``ray`` module, initialised locally or at ``address``; errors are one line."""
    try:
        import ray
    except ImportError:
        return None
    if address and address != "auto" and not address.startswith("ray://"):
        _check_reachable(address)
    try:
        with _quiet_stderr():  # Ray's C++ client logs every retry to stderr; the error below says it in one line
            if address:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level=logging.ERROR)
            else:
                ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as exc:  # ConnectionError, RuntimeError, ValueError depending on the failure
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SynergyGymError(f"--address {address!r}: cannot connect to Ray: {first}") from None
    return ray


def _check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail fast, in one line, when nothing listens at HOST:PORT (Ray would retry for 20 s)."""
    import socket

    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except ValueError:
        raise SynergyGymError(f"--address {address!r}: expected auto or HOST:PORT") from None
    except OSError as exc:
        raise SynergyGymError(f"--address {address!r}: cannot connect to Ray: {exc.strerror or exc}") from None


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null (native libraries write there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def run_sweep(
    cells: list[SweepCell],
    out: Path,
    ray_module: ModuleType | None = None,
    on_cell: Callable[[dict, int, int], None] | None = None,
) -> tuple[pd.DataFrame, list[dict]]:
    """Run the cells not yet in ``out`` (on Ray if given), write each as it finishes, return the table."""
    done = finished_cells(out, cells)
    todo = [c for c in cells if c.key not in done]
    total = len(cells)

    def record(cell: SweepCell, row: dict) -> None:
        atomic_write_text(_cell_path(out, cell), json.dumps(row) + "\n")
        done[cell.key] = row
        if on_cell is not None:
            on_cell(row, len(done), total)

    if ray_module is not None and todo:
        remote = ray_module.remote(run_cell)
        pending = {remote.remote(c): c for c in todo}
        while pending:
            ready, _ = ray_module.wait(list(pending), num_returns=1)
            cell = pending.pop(ready[0])
            record(cell, ray_module.get(ready[0]))
    else:
        for cell in todo:
            record(cell, run_cell(cell))
    rows = [done[c.key] for c in cells]
    return pd.DataFrame([{k: v for k, v in r.items() if k != "jct_h"} for r in rows]), rows


def seed_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, load): seeds, mean JCT over seeds and the half-width of its 95 % CI (t; NaN with one seed).

    The console table and ``avg_jct_vs_load.png`` both show these numbers.
    """
    grouped = table.groupby(["policy", "load"], sort=False)["mean_jct_h"]
    out = grouped.agg(seeds="count", mean_jct_h="mean", std="std").reset_index()
    out["ci95_h"] = ci95_half_width(out["std"].to_numpy(), out["seeds"].to_numpy())
    return out.drop(columns=["std"])


def format_seed_summary(summary: pd.DataFrame) -> str:
    """The console table: mean JCT ± half-width of the 95 % confidence interval over seeds."""
    header = f"{'policy':<14}{'load':>6}{'seeds':>7}{'mean JCT h':>12}{'± CI95 h':>11}"
    lines = ["mean JCT over seeds ± 95 % confidence interval (t-distribution, half-width in hours)",
             header, "-" * len(header)]
    for r in summary.to_dict("records"):
        ci = "-" if np.isnan(r["ci95_h"]) else f"± {r['ci95_h']:.2f}"
        lines.append(f"{r['policy']:<14}{r['load']:>6g}{r['seeds']:>7}{r['mean_jct_h']:>12.2f}{ci:>11}")
    if summary["seeds"].min() < 2:
        lines.append("(one seed: no confidence interval; pass several seeds, e.g. --seed 1..5)")
    return "\n".join(lines)


def make_avg_jct_vs_load_figure(table: pd.DataFrame) -> Figure:
    """Mean JCT against load per policy with its 95 % CI over seeds (bars per policy for one load)."""
    plt = pyplot()
    summary = seed_summary(table)
    policies = list(dict.fromkeys(summary["policy"]))
    loads = sorted(summary["load"].unique())
    n_seeds = int(summary["seeds"].max())
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(policies) + 2), 4.5))
    if len(loads) == 1:
        x = np.arange(len(policies))
        mean = summary.set_index("policy").loc[policies, "mean_jct_h"].to_numpy()
        half = summary.set_index("policy").loc[policies, "ci95_h"].to_numpy()
        bars = ax.bar(x, mean, color=[f"C{i % 10}" for i in range(len(policies))])
        if n_seeds > 1:
            ax.errorbar(x, mean, yerr=np.nan_to_num(half), fmt="none", ecolor="black", capsize=5,
                        label=f"{CI_LABEL} (t, n={n_seeds})")
            ax.legend(loc="upper right")
        labels = [f"{m:.2f} h" if np.isnan(h) else f"{m:.2f} ± {h:.2f} h" for m, h in zip(mean, half)]
        ax.bar_label(bars, labels=labels, fontsize=9, label_type="center",
                     bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.85, linewidth=0))
        ax.set_xticks(x, policies, rotation=20 if len(policies) > 3 else 0, ha="right" if len(policies) > 3 else "center")
        ax.set_xlabel(f"policy (load {loads[0]:g} jobs/h)")
    else:
        for i, policy in enumerate(policies):
            rows_p = summary[summary["policy"] == policy].sort_values("load")
            load, mean, half = rows_p["load"].to_numpy(), rows_p["mean_jct_h"].to_numpy(), rows_p["ci95_h"].to_numpy()
            ax.plot(load, mean, marker="o", color=f"C{i % 10}", label=policy)
            if n_seeds > 1:
                ax.fill_between(load, mean - np.nan_to_num(half), mean + np.nan_to_num(half), color=f"C{i % 10}",
                                alpha=0.2, linewidth=0)
        handles, labels = ax.get_legend_handles_labels()
        if n_seeds > 1:
            from matplotlib.patches import Patch

            handles.append(Patch(color="0.6", alpha=0.4))
            labels.append(f"shaded: {CI_LABEL} (t, n={n_seeds})")
        ax.legend(handles, labels, loc="best")
        ax.set_xlabel("load (jobs per hour)")
    if n_seeds < 2:
        ax.text(0.99, 0.98, "one seed: no confidence interval", transform=ax.transAxes, ha="right", va="top",
                fontsize=8, color="0.35")
    ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.08)
    ax.set_ylabel("average JCT of measured jobs (hours)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"Sweep: average JCT {'by policy' if len(loads) == 1 else 'against load'}\n"
                 f"{describe_runs(table)}", fontsize=11)
    fig.tight_layout()
    return fig


def avg_jct_vs_load_png(table: pd.DataFrame) -> bytes:
    return figure_png(make_avg_jct_vs_load_figure(table))


def write_outputs(table: pd.DataFrame, rows: list[dict], out: Path, meta: dict | None = None,
                  json_path: Path | None = None) -> list[str]:
    """The sweep's files in ``out`` (results.json with ``meta``, also to ``json_path``); the names written."""
    written = ["results.csv"]
    atomic_write_text(out / "results.csv", table.to_csv(index=False))
    try:
        import io

        buf = io.BytesIO()
        table.to_parquet(buf, index=False)
        atomic_write_bytes(out / "results.parquet", buf.getvalue())
        written.append("results.parquet")
    except ImportError:
        pass
    atomic_write_bytes(out / "avg_jct_vs_load.png", avg_jct_vs_load_png(table))
    jcts: dict[tuple[str, object], list] = {}
    for r in rows:
        jcts.setdefault((r["policy"], r["load"]), []).extend(r["jct_h"])
    policies = list(dict.fromkeys(table["policy"]))
    title = (f"Sweep: CDF of job completion times, {len(policies)} {'policy' if len(policies) == 1 else 'policies'}\n"
             f"{describe_runs(table)}" + (", seeds pooled" if table["seed"].nunique() > 1 else ""))
    atomic_write_bytes(out / "jct_cdf.png", jct_cdf_png({k: np.asarray(v) for k, v in jcts.items()}, title))
    write_results_json([out / "results.json", json_path], table.to_dict("records"), meta or {})
    return written + ["avg_jct_vs_load.png", "jct_cdf.png", "results.json"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sweep", help="run policies × loads × seeds (on Ray when installed)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--policies", required=True, help="comma-separated <order>+<alloc> names")
    p.add_argument("--load", required=True, help="jobs per hour, comma-separated, e.g. 5,7,9,11")
    p.add_argument("--seed", required=True, help="seeds: 42, 1,2,3 or 0..9")
    p.add_argument("--jobs", type=int, default=None,
                   help=f"exactly N jobs per cell, 1 to {MAX_JOBS:,} (default: the paper's open-ended run)")
    p.add_argument("--cluster", default="default", help="preset or TOML file (default: %(default)s)")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder; re-use it to resume (default: runs/sweep-<timestamp>)")
    p.add_argument("--address", default=None, help="Ray cluster: auto or HOST:PORT (default: a local Ray)")
    p.add_argument("--no-ray", action="store_true", help="run the cells in this process")
    p.add_argument("--json", type=Path, default=None, help="also write the results (results.json) to this file")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(run=main)


def cells_from_args(args: argparse.Namespace) -> list[SweepCell]:
    policies = parse_policy_list(args.policies)
    loads = parse_float_list(args.load, "--load")
    seeds = parse_seed_list(args.seed, "--seed")
    check_job_count(args.jobs, "--jobs")
    cluster = load_cluster(args.cluster)
    for load in loads:  # validate the workload settings once per load
        SyntheticWorkload(jobs_per_hour=load, num_jobs=args.jobs, max_gpus=cluster.total_gpus)
    return [SweepCell(p, load, seed, args.jobs, cluster) for load in loads for seed in seeds for p in policies]


OUTPUT_FILES = ("cells/", "results.csv", "results.parquet", "avg_jct_vs_load.png", "jct_cdf.png", "results.json")


def main(args: argparse.Namespace) -> int:
    out = args.out or Path("runs") / f"sweep-{datetime.now():%Y%m%d-%H%M%S}"
    check_output_dir(out, "--out", OUTPUT_FILES, create_parents=args.out is None)
    if args.json is not None:
        check_output_file(args.json, "--json", folders=((out, "--out"),))
    started_at = utc_now()
    cells = cells_from_args(args)
    ray_module = None if args.no_ray else connect_ray(args.address)
    if ray_module is None and args.address and not args.no_ray:
        raise SynergyGymError("--address given but Ray is not installed (pip install 'synergy-gym[ray]')")
    started = time.perf_counter()
    where = "in this process" if ray_module is None else "on Ray"
    if not args.quiet:
        print(f"sweep: {len(cells)} cells {where}; results in {out}", file=sys.stderr)

    def progress(row: dict, done: int, total: int) -> None:
        if not args.quiet:
            print(f"  [{done}/{total}] {row['policy']:<12} load {row['load']:g} seed {row['seed']}: "
                  f"mean JCT {row['mean_jct_h']:.2f} h ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    try:
        table, rows = run_sweep(cells, out, ray_module, on_cell=progress)
        meta = build_meta(args, dict.fromkeys(c.seed for c in cells), started_at,
                          policies=list(dict.fromkeys(c.policy for c in cells)),
                          loads=list(dict.fromkeys(c.load for c in cells)), cluster=cells[0].cluster.describe())
        written = write_outputs(table, rows, out, meta, args.json)
    except KeyboardInterrupt:  # Ctrl-C: the finished cells stay in <out>/cells
        raise Interrupted(interrupted_message(out, cells, same_out=args.out is not None)) from None
    print(format_seed_summary(seed_summary(table)))
    print(f"wrote {', '.join(written)} to {out}" + (f"; {args.json}" if args.json is not None else ""))
    return 0
