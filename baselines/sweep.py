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
duplicating results. Each cell records the settings it ran with (``--jobs``, ``--cluster``): a
folder whose cells were made with other settings is refused (use another ``--out``), and a cell
file that is unreadable, malformed or without settings is run again. At the end the folder gets

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

These final files are staged and appear together or not at all
(:mod:`synergy_gym.cli.staging`); Ctrl-C while they are written leaves the cells only.
On Ray a cell whose worker process dies is run again (up to
:data:`~synergy_gym.baselines.sweep_cells.CELL_RETRIES` times), so a killed worker
costs that cell's time, not the sweep.

Inputs are checked (``--out``, ``--json``, policies, seeds, loads – each once –, ``--jobs``,
cluster, Ray address, the settings of the cells already in ``--out``) before anything is written,
and so is the sweep's size: past the memory or time limits of :mod:`synergy_gym.cli.guards` (time
divided among the Ray workers) it is refused unless ``--allow-large`` is given.
"""


from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from synergy_gym.baselines.compare_runs import load_text
from synergy_gym.baselines.plots import CI_LABEL, describe_runs
from synergy_gym.baselines.registry import parse_policy_list
from synergy_gym.baselines.sweep_cells import (
    CellFailed,
    SweepCell,
    cell_settings,
    check_cell_settings,
    connect_ray,
    finished_cells,
    interrupted_message,
    run_cell,
    run_sweep,
)
from synergy_gym.cli.args import SeedList, check_job_count, parse_loads, parse_seeds
from synergy_gym.cli.columns import fit
from synergy_gym.cli.files import (
    atomic_write_bytes,
    atomic_write_text,
    check_output_dir,
    check_output_file,
    claim_new_folder,
    remove_empty_folders,
    timestamped_dir,
)
from synergy_gym.cli.guards import (
    Estimate,
    check_size,
    format_duration,
    open_ended_jobs,
    quiet_notice,
    sweep_estimate,
)
from synergy_gym.cli.plots import figure_png, jct_cdf_png, point_style, pyplot
from synergy_gym.cli.results_json import build_meta, utc_now, write_results_json
from synergy_gym.cli.staging import interrupt_of, is_new, staged_outputs
from synergy_gym.errors import Interrupted, SynergyGymError, UnknownNameError
from synergy_gym.experiments.statistics import ci95_half_width
from synergy_gym.sim.cluster import ClusterSpec, load_cluster
from synergy_gym.sim.generator import DEFAULT_WINDOW, SyntheticWorkload

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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
        mean = f"{r['mean_jct_h']:.2f}"
        lines.append(f"{fit(r['policy'], 14, left=True)}{fit(load_text(r['load']), 6)}{fit(str(r['seeds']), 7)}"
                     f"{fit(mean, 12)}{fit(ci, 11)}")
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
            style = point_style(i)
            ax.plot(load, mean, label=policy, **style)
            if n_seeds > 1:
                ax.fill_between(load, mean - np.nan_to_num(half), mean + np.nan_to_num(half), color=style["color"],
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
                  json_path: Path | None = None, stage: Callable[[Path], Path] | None = None) -> list[str]:
    """The sweep's files in ``out`` (results.json with ``meta``, also to ``json_path``); the names written.

    ``stage`` (:meth:`synergy_gym.cli.staging.Staging.file`) gives the path to write each file to
    instead, so that they appear together.
    """
    place = stage or (lambda path: path)
    written = ["results.csv"]
    atomic_write_text(place(out / "results.csv"), table.to_csv(index=False))
    try:
        import io

        buf = io.BytesIO()
        table.to_parquet(buf, index=False)
        atomic_write_bytes(place(out / "results.parquet"), buf.getvalue())
        written.append("results.parquet")
    except ImportError:
        pass
    atomic_write_bytes(place(out / "avg_jct_vs_load.png"), avg_jct_vs_load_png(table))
    jcts: dict[tuple[str, object], list] = {}
    for r in rows:
        jcts.setdefault((r["policy"], r["load"]), []).extend(r["jct_h"])
    policies = list(dict.fromkeys(table["policy"]))
    title = (f"Sweep: CDF of job completion times, {len(policies)} {'policy' if len(policies) == 1 else 'policies'}\n"
             f"{describe_runs(table)}" + (", seeds pooled" if table["seed"].nunique() > 1 else ""))
    atomic_write_bytes(place(out / "jct_cdf.png"), jct_cdf_png({k: np.asarray(v) for k, v in jcts.items()}, title))
    paths = [place(out / "results.json"), None if json_path is None else place(json_path)]
    write_results_json(paths, table.to_dict("records"), meta or {})
    return written + ["avg_jct_vs_load.png", "jct_cdf.png", "results.json"]


#: A sweep of more cells than this is sized (and refused) before its cells are listed.
LISTED_CELLS = 1_000_000
OUTPUT_FILES = ("cells/", "results.csv", "results.parquet", "avg_jct_vs_load.png", "jct_cdf.png", "results.json")


@dataclass(frozen=True)
class SweepPlan:
    """What the arguments ask for, checked, before any cell is listed."""

    policies: tuple[str, ...]
    loads: tuple[float, ...]
    seeds: SeedList
    num_jobs: int | None
    cluster: ClusterSpec

    @property
    def size(self) -> int:
        return len(self.policies) * len(self.loads) * len(self.seeds)

    def cells(self) -> list[SweepCell]:
        return [SweepCell(p, load, seed, self.num_jobs, self.cluster)
                for load in self.loads for seed in self.seeds for p in self.policies]

    def estimate(self, cells: int, workers: int, ray: str) -> Estimate:
        """The size of ``cells`` of this plan's cells (:func:`synergy_gym.cli.guards.sweep_estimate`)."""
        jobs = self.num_jobs or open_ended_jobs(DEFAULT_WINDOW[1])
        measured = max(1, self.num_jobs // 2) if self.num_jobs else DEFAULT_WINDOW[1] - DEFAULT_WINDOW[0]
        return sweep_estimate(self.policies, cells, jobs, measured, self.cluster.num_servers, workers, ray)


def checked_policies(text: str) -> tuple[str, ...]:
    """``--policies``: the names, checked; an unknown one is one line naming the flag, the orders and allocations."""
    try:
        return parse_policy_list(text, "--policies")
    except UnknownNameError as exc:
        orders = dict.fromkeys(name.partition("+")[0] for name in exc.valid)
        allocations = dict.fromkeys(name.partition("+")[2] for name in exc.valid)
        raise SynergyGymError(f"--policies {text!r}: unknown policy {exc.name!r}; a policy is <order>+<allocation>, orders "
                              f"{', '.join(orders)}, allocations {', '.join(allocations)}") from None


def plan_from_args(args: argparse.Namespace) -> SweepPlan:
    """The sweep the arguments ask for, checked; no cell is listed yet."""
    policies = checked_policies(args.policies)
    loads = parse_loads(args.load)
    seeds = parse_seeds(args.seed, "--seed")
    check_job_count(args.jobs, "--jobs")
    cluster = load_cluster(args.cluster, source="--cluster")
    for load in loads:  # validate the workload settings once per load
        SyntheticWorkload(jobs_per_hour=load, num_jobs=args.jobs, max_gpus=cluster.total_gpus)
    return SweepPlan(policies, loads, seeds, args.jobs, cluster)


def checked_cells(plan: SweepPlan, out: Path, workers: int, ray: str, allow_large: bool) -> tuple[list[SweepCell], Estimate]:
    """The plan's cells, listed once the size of those still to run (not yet in ``out``) is estimated and allowed.

    A plan of more than :data:`LISTED_CELLS` cells is sized whole before any is listed.
    """
    if plan.size > LISTED_CELLS:
        check_size(plan.estimate(plan.size, workers, ray), allow_large)
    cells = plan.cells()
    size = plan.estimate(max(1, len(cells) - len(finished_cells(out, cells))), workers, ray)
    check_size(size, allow_large)
    return cells, size


def _workers(ray_module: ModuleType | None, on_ray: bool) -> tuple[int, str]:
    """Cells run at a time, and where: ``"none"``, ``"local"`` or ``"remote"`` (``ray_module`` connected to a cluster)."""
    if not on_ray:
        return 1, "none"
    if ray_module is not None:
        return max(1, int(ray_module.cluster_resources().get("CPU", 1))), "remote"
    return os.cpu_count() or 1, "local"


def main(args: argparse.Namespace) -> int:
    out = args.out or timestamped_dir("sweep")
    check_output_dir(out, "--out", OUTPUT_FILES, create_parents=args.out is None)
    new = is_new(out)
    if args.json is not None:
        check_output_file(args.json, "--json", folders=((out, "--out"),), outputs=OUTPUT_FILES,
                          inputs=((args.cluster, "--cluster"),))
    if args.no_ray and args.address:
        raise SynergyGymError(f"--address {args.address!r} is a Ray cluster, but --no-ray runs the cells in this process; "
                              "give one of them")
    started_at = utc_now()
    plan = plan_from_args(args)
    check_cell_settings(out, cell_settings(plan.num_jobs, plan.cluster))
    on_ray = not args.no_ray and importlib.util.find_spec("ray") is not None
    if args.address and not args.no_ray and not on_ray:
        raise SynergyGymError("--address given but Ray is not installed (pip install 'synergy-gym[ray]')")
    # A Ray cluster is joined first (its CPUs size the run); a local Ray starts only once the run is allowed.
    ray_module = connect_ray(args.address) if on_ray and args.address else None
    workers, where = _workers(ray_module, on_ray)
    cells, size = checked_cells(plan, out, workers, where, args.allow_large)
    quiet_notice("sweep", size, args.quiet)
    if on_ray and ray_module is None:  # (before the folder is made: a failed or interrupted start leaves none)
        ray_module = connect_ray(None)
    # The cells are written into it as they finish: a new folder is this sweep's from now on (a default name another
    # process took meanwhile gives the next free one; a named one made meanwhile is refused).
    claimed = claim_new_folder(out, default_name=args.out is None) if new else []
    out = claimed[-1] if claimed else out
    started = time.perf_counter()
    if not args.quiet:
        took = f" (about {format_duration(size.seconds)})" if size.seconds > 60 else ""
        print(f"sweep: {len(cells)} cells {'in this process' if ray_module is None else 'on Ray'}{took}; results in {out}",
              file=sys.stderr)

    def progress(row: dict, done: int, total: int) -> None:
        if not args.quiet:
            print(f"  [{done}/{total}] {row['policy']:<12} load {load_text(row['load'])} seed {row['seed']}: "
                  f"mean JCT {row['mean_jct_h']:.2f} h ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    def kept() -> str:
        return interrupted_message(out, cells, same_out=args.out is not None)

    finished = False
    try:
        table, rows = run_sweep(cells, out, ray_module, on_cell=progress, cell_fn=run_cell)
        meta = build_meta(args, dict.fromkeys(c.seed for c in cells), started_at,
                          policies=list(dict.fromkeys(c.policy for c in cells)),
                          loads=list(dict.fromkeys(c.load for c in cells)), cluster=cells[0].cluster.describe())
        with staged_outputs(out) as staging:  # the final files appear together, or none does
            written = write_outputs(table, rows, out, meta, args.json, stage=staging.file)
        finished = True
    except (KeyboardInterrupt, SystemError) as exc:  # Ctrl-C (inside a numba kernel it comes back wrapped)
        if interrupt_of(exc) is None:
            raise
        raise Interrupted(kept()) from None  # the finished cells stay in <out>/cells
    except CellFailed as exc:  # a cell's Ray worker died on every attempt
        raise CellFailed(f"{exc}; {kept()}") from None
    finally:
        if not finished:  # the folders this sweep made, if no cell was kept in them
            remove_empty_folders(claimed)
    print(format_seed_summary(seed_summary(table)))
    print(f"wrote {', '.join(written)} to {out}" + (f"; {args.json}" if args.json is not None else ""))
    keys = {cell.key for cell in cells}
    earlier = [path for path in Path(out, "cells").glob("*.json") if path.stem not in keys]
    if earlier:  # a smaller grid into an earlier sweep's folder: its results files now hold this grid alone
        print(f"synergy-gym sweep: note: the results files hold this sweep's {len(cells)} cell{'s' * (len(cells) != 1)}; "
              f"{out}/cells also keeps {len(earlier)} of an earlier sweep there (a sweep over their grid writes their "
              "results again)", file=sys.stderr)
    return 0
