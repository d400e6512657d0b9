"""``synergy-gym compare``: run scheduling policies on identical workloads and compare JCTs.

With no arguments it runs the paper's default experiment – 128 GPUs,
single-GPU Philly-derived jobs at 9 jobs/hour, seed 42, measured window jobs
4000–4999 – under ``fifo+fair``, ``fifo+greedy`` and ``fifo+tune``, prints a
table and writes to ``--out`` (default ``runs/compare-<timestamp>``):

``results.csv``   one row per policy × load × seed (summary statistics)
``jobs.csv``      one row per job and run (arrival, start, finish, JCT)
``avg_jct.png``   with ``--plots``: mean JCT per policy, or against load when several are given
``jct_cdf.png``   with ``--plots``: CDF of the measured jobs' JCTs
``workloads/``    the jobs each synthetic case ran, replayable with ``--workload``

The figures are opt-in because drawing them (importing matplotlib, drawing two figures) takes
about half a second, a third of a small comparison's whole process; without ``--plots`` a reused
``--out`` folder's earlier figures are removed with the new files' arrival, so that no figure
disagrees with the results beside it.

``--json FILE`` also writes ``{"results": [{policy, load, seed, mean_jct_h,
median_jct_h, p99_jct_h, makespan_h, jobs_measured, wall_s, …}], "meta": {…}}``
(:mod:`synergy_gym.cli.results_json`). Inputs and output paths are all checked before
anything runs, and so is the run's size: past the memory or time limits of
:mod:`synergy_gym.cli.guards` it is refused unless ``--allow-large`` is given. The files are
written after every run has finished, into a staging folder, and appear together or not at all
(:mod:`synergy_gym.cli.staging`): Ctrl-C while they are written leaves none.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from synergy_gym.baselines.compare_runs import CompareOutcome, CompareSpec, load_text, run_compare
from synergy_gym.baselines.plots import avg_jct_png, describe_runs, present
from synergy_gym.baselines.registry import parse_policy_list
from synergy_gym.cli.args import check_job_count, list_items, parse_loads, parse_seeds
from synergy_gym.cli.columns import fit
from synergy_gym.cli.csv_text import csv_text
from synergy_gym.cli.files import (
    atomic_write_bytes,
    atomic_write_text,
    check_output_dir,
    check_output_file,
    timestamped_dir,
)
from synergy_gym.cli.guards import Estimate, check_size, compare_estimate, format_duration, quiet_notice
from synergy_gym.cli.plots import jct_cdf_png
from synergy_gym.cli.results_json import build_meta, utc_now, write_results_json
from synergy_gym.cli.staging import is_new, staged_outputs
from synergy_gym.errors import SynergyGymError, UnknownNameError
from synergy_gym.experiments.harness import CaseResult, WorkloadCase
from synergy_gym.sim.cluster import ClusterSpec, load_cluster
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.model_mix import DEFAULT_SPLIT, parse_split
from synergy_gym.sim.profiling import SENSITIVITIES, ProfilerConfig
from synergy_gym.traces.replay import workload_table

JSON_FIELDS = (
    "policy", "sensitivity", "load", "seed", "mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h",
    "speedup_vs_fair", "jobs_measured", "jobs_finished", "mean_gpu_util", "mean_cpu_util",
    "mean_mem_util", "mean_throughput", "simulated_h", "rounds_planned", "wall_s", "profiling_gpu_min_per_job",
)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """The results (one row per run) as the table the command prints."""
    show_sens = {r["sensitivity"] for r in results} != {"true"}
    sens_head = f"{'sensitivity':<12}" if show_sens else ""
    header = (
        f"{'policy':<14}{sens_head}{'load':>6}{'seed':>6}{'mean JCT h':>12}{'median h':>10}{'p99 h':>10}"
        f"{'makespan h':>12}{'vs fair':>9}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        sens = fit(r["sensitivity"], 12, left=True) if show_sens else ""
        load = "-" if _missing(r["load"]) else load_text(r["load"])
        seed = "-" if _missing(r["seed"]) else f"{int(r['seed'])}"
        vs = "-" if math.isnan(r["speedup_vs_fair"]) else f"{r['speedup_vs_fair']:.2f}×"
        numbers = [(f"{r[k]:.{digits}f}", width) for k, digits, width in
                   (("mean_jct_h", 2, 12), ("median_jct_h", 2, 10), ("p99_jct_h", 2, 10), ("makespan_h", 1, 12))]
        lines.append(f"{fit(r['policy'], 14, left=True)}{sens}{fit(load, 6)}{fit(seed, 6)}"
                     + "".join(fit(text, width) for text, width in numbers) + fit(vs, 9))
    return "\n".join(lines)


def write_outputs(outcome: CompareOutcome, out_dir: Path, cluster: ClusterSpec, json_path: Path | None = None,
                  meta: dict[str, Any] | None = None, stage: Callable[[Path], Path] | None = None,
                  plots: bool = True) -> None:
    """The files of :data:`OUTPUT_FILES` in ``out_dir`` (the figures only with ``plots``), and the results JSON
    (with ``meta``) to ``json_path``.

    ``stage`` (:meth:`synergy_gym.cli.staging.Staging.file`) gives, for each final path, the path to write
    instead, so that the files appear together once all are written; without it each is written in place.
    """
    place = stage or (lambda path: path)
    results = outcome.results
    atomic_write_text(place(out_dir / "results.csv"), csv_text({c: [r[c] for r in results] for c in ("case", *JSON_FIELDS)}))
    atomic_write_text(place(out_dir / "jobs.csv"), csv_text(job_rows(outcome.runs)))
    if plots:
        write_figures(outcome, out_dir, place)
    largest: dict[str, CaseResult] = {}
    for run in outcome.runs:
        label = run.case.label
        if run.case.load is not None and (label not in largest or len(run.workload) > len(largest[label].workload)):
            largest[label] = run
    for label, run in largest.items():
        atomic_write_text(place(out_dir / "workloads" / f"{label}.csv"), csv_text(workload_table(run.workload, cluster)))
    write_results_json([None if json_path is None else place(json_path)], [{k: r[k] for k in JSON_FIELDS} for r in results],
                       meta or {})


def write_figures(outcome: CompareOutcome, out_dir: Path, place: Callable[[Path], Path]) -> None:
    """``avg_jct.png`` and ``jct_cdf.png`` of :data:`FIGURES` in ``out_dir`` (each at ``place(path)``)."""
    results = outcome.results
    window = measured_window_text(outcome.runs)
    atomic_write_bytes(place(out_dir / "avg_jct.png"), avg_jct_png(results, window))
    jcts: dict[tuple[str, object], list[np.ndarray]] = {}
    for run in outcome.runs:
        label = run.policy if run.result.summary.sensitivity == "true" else f"{run.policy} (profiled)"
        key = (label, run.case.load if run.case.load is not None else run.case.label)
        jcts.setdefault(key, []).append(run.result.measured_jct_h())
    policies = list(dict.fromkeys(r["policy"] for r in results))
    pooled = len(present(r["seed"] for r in results)) > 1
    title = (f"CDF of job completion times: {len(policies)} {'policy' if len(policies) == 1 else 'policies'}\n"
             f"{describe_runs(results, window)}" + (", seeds pooled" if pooled else ""))
    cdf = jct_cdf_png({k: np.concatenate(v) for k, v in jcts.items()}, title)
    atomic_write_bytes(place(out_dir / "jct_cdf.png"), cdf)


def job_rows(runs: Sequence[CaseResult]) -> dict[str, np.ndarray]:
    """The columns of ``jobs.csv``: each run's jobs (:attr:`SimulationResult.job_columns`) after its policy,
    sensitivity and case."""
    parts = []
    for run in runs:
        jobs = run.result.job_columns
        n = len(jobs["job_id"])
        labels = {"policy": run.policy, "sensitivity": run.result.summary.sensitivity, "case": run.case.label}
        parts.append({**{k: np.full(n, v, dtype=object) for k, v in labels.items()}, **jobs})
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]} if parts else {}


def measured_window_text(runs: Sequence[CaseResult]) -> str | None:
    """``measured window: jobs A:B (N jobs)`` when every run measured the same jobs by arrival, else None."""
    windows = set()
    for run in runs:
        idx = np.flatnonzero(run.workload.measured)
        if idx.size == 0 or idx[-1] - idx[0] + 1 != idx.size:
            return None
        windows.add((int(idx[0]), int(idx[-1]) + 1))
    if len(windows) != 1:
        return None
    (a, b), = windows
    return f"measured window: jobs {a}:{b} ({b - a} jobs)"


# -- command line ----------------------------------------------------------------------


def parse_window(text: str) -> tuple[int, int]:
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        raise SynergyGymError(f"--window {text!r}: expected A:B, e.g. 4000:5000") from None
    return a, b


def spec_from_args(args: argparse.Namespace) -> CompareSpec:
    """The comparison the arguments ask for, checked; its workloads are built later (:meth:`CompareSpec.cases`)."""
    sources = [name for name, value in (("--workload", args.workload), ("--trace", args.trace)) if value is not None]
    if len(sources) > 1:
        raise SynergyGymError("--workload and --trace cannot be combined")
    if sources:
        fixed = {"--multigpu": args.multigpu or None}
        if args.workload is not None or args.trace_mode == "real":
            fixed.update({"--load": args.load, "--seed": args.seed})
        if args.workload is not None:
            fixed.update({"--jobs": args.jobs, "--window": args.window, "--split": args.split})
        clash = [k for k, v in fixed.items() if v is not None]
        if clash:
            raise SynergyGymError(f"{sources[0]} fixes the jobs; {', '.join(clash)} does not apply")
    check_job_count(args.jobs, "--jobs")
    if args.trace is None and (args.arrival_scale != 1.0 or args.trace_mode != "real" or args.trace_format != "auto"
                               or args.all_durations):
        raise SynergyGymError("--arrival-scale, --trace-mode, --trace-format and --all-durations apply only with --trace")
    if args.arrival_scale != 1.0 and args.trace_mode == "sampled":
        raise SynergyGymError("--trace-mode sampled draws its arrivals at --load; --arrival-scale does not apply")
    if not (math.isfinite(args.arrival_scale) and args.arrival_scale > 0):
        raise SynergyGymError(f"--arrival-scale {args.arrival_scale!r}: must be a positive finite number")
    if not (math.isfinite(args.round_s) and args.round_s > 0):  # (SimulationConfig's message names round_s)
        raise SynergyGymError(f"--round-s {args.round_s!r}: must be a positive finite number of seconds")
    cluster = load_cluster(args.cluster, source="--cluster")
    config = SimulationConfig(round_s=args.round_s, placement=args.placement, timing=args.timing)
    sensitivities = tuple(dict.fromkeys(list_items(args.sensitivity, "--sensitivity")))
    for sens in sensitivities:
        if sens not in SENSITIVITIES:
            raise UnknownNameError("sensitivity", sens, SENSITIVITIES)
    profile_noise = ProfilerConfig(noise=args.profile_noise).noise  # a bad value is its own error first
    if profile_noise != 0.0 and "profiled" not in sensitivities:
        raise SynergyGymError(f"--profile-noise {args.profile_noise!r} applies only with --sensitivity profiled "
                              "(or true,profiled)")
    return CompareSpec(
        policies=parse_policy_list(args.policies, "--policies"),
        sensitivities=sensitivities,
        profile_noise=profile_noise,
        loads=parse_loads(args.load) if args.load is not None else (9.0,),
        seeds=parse_seeds(args.seed, "--seed") if args.seed is not None else (42,),
        num_jobs=args.jobs,
        window=parse_window(args.window) if args.window is not None else None,
        multigpu=args.multigpu,
        class_split=parse_split(args.split) if args.split is not None else DEFAULT_SPLIT,
        workload_csv=args.workload,
        trace_csv=args.trace,
        trace_format=args.trace_format,
        trace_mode=args.trace_mode,
        arrival_scale=args.arrival_scale,
        all_durations=args.all_durations,
        cluster=cluster,
        config=config,
    )


def checked_cases(spec: CompareSpec, allow_large: bool, quiet: bool) -> tuple[list[WorkloadCase], Estimate]:
    """The workloads, built only once the run's size is estimated and allowed (:mod:`synergy_gym.cli.guards`).

    Synthetic and sampled workloads are sized from the arguments before any is drawn; a fixed one
    (``--workload``, ``--trace``) once its file is read.
    """
    def estimate(jobs: int) -> Estimate:
        size = compare_estimate(spec.policies, spec.case_count(), jobs, spec.cluster.num_servers,
                                spec.config.placement, len(spec.sensitivities))
        check_size(size, allow_large)
        return size

    jobs = spec.jobs_per_case()
    size = estimate(jobs) if jobs is not None else None
    cases = spec.cases()
    if size is None:
        size = estimate(max(len(case.make()[0]) for case in cases))
    quiet_notice("compare", size, quiet)
    return cases, size


#: The figures ``--plots`` draws.
FIGURES = ("avg_jct.png", "jct_cdf.png")
OUTPUT_FILES = ("results.csv", "jobs.csv", *FIGURES, "workloads/")


#: Rows of ``jobs.csv`` from which writing the files is announced (a few seconds of work).
ANNOUNCE_ROWS = 200_000


def main(args: argparse.Namespace) -> int:
    out_dir = args.out or timestamped_dir("compare")
    written = OUTPUT_FILES if args.plots else tuple(name for name in OUTPUT_FILES if name not in FIGURES)
    check_output_dir(out_dir, "--out", written, create_parents=args.out is None)
    new = is_new(out_dir)  # a folder made by another command while this one runs is not written into
    if args.json is not None:
        check_output_file(args.json, "--json", folders=((out_dir, "--out"),), outputs=OUTPUT_FILES,
                          inputs=((args.workload, "--workload"), (args.trace, "--trace"), (args.cluster, "--cluster")))
    started = utc_now()
    spec = spec_from_args(args)
    cases, size = checked_cases(spec, args.allow_large, args.quiet)
    if not args.quiet:
        took = f"; about {format_duration(size.seconds)}" if size.seconds > 60 else ""
        print(f"cluster: {spec.cluster.describe()}; policies: {', '.join(spec.policies)}{took}", file=sys.stderr)
    outcome = run_compare(spec, show_progress=not args.quiet, cases=cases)
    print(format_table(outcome.results))
    seeds = dict.fromkeys(int(c.seed) for c in cases if c.seed is not None)
    meta = build_meta(args, seeds, started, policies=list(spec.policies), sensitivities=list(spec.sensitivities),
                      loads=sorted({c.load for c in cases if c.load is not None}), cluster=spec.cluster.describe(),
                      workload=str(spec.workload_csv or spec.trace_csv or "") or None)
    rows = sum(len(run.result.job_columns["job_id"]) for run in outcome.runs)
    if not args.quiet and rows >= ANNOUNCE_ROWS:
        figures = " and the figures" if args.plots else ""
        print(f"writing {rows:,} job rows{figures} to {out_dir}", file=sys.stderr, flush=True)
    stale = [] if args.plots else [name for name in FIGURES if (out_dir / name).is_file()]
    with staged_outputs(out_dir, args.out is None, new) as staging:  # every file appears together, or none does
        write_outputs(outcome, out_dir, spec.cluster, args.json, meta, stage=staging.file, plots=args.plots)
        old_workloads = stale_workloads(out_dir, staging.folder, spec.workload_csv)
        for path in [*(out_dir / name for name in stale), *old_workloads]:  # would disagree with these results
            staging.remove(path)
    moved = staging.final != out_dir  # a default folder another command took meanwhile: the free one used instead
    out_dir = staging.final
    removed = [] if moved else [*stale, *(f"workloads/{path.name}" for path in old_workloads)]
    said = f"; removed the earlier run's {', '.join(removed)}" if removed else ""
    if args.plots:
        print(f"wrote results.csv, jobs.csv, {', '.join(FIGURES)} to {out_dir}{said}")
    else:
        print(f"wrote results.csv, jobs.csv to {out_dir} (--plots also draws {' and '.join(FIGURES)}){said}")
    return 0


def stale_workloads(out_dir: Path, staged: Path, workload_csv: Path | None) -> list[Path]:
    """An earlier run's ``workloads/*.csv`` in ``out_dir`` that this run (staged in ``staged``) does not write again:
    they would not be the jobs of the results beside them. The ``--workload`` file this run read is kept."""
    folder = out_dir / "workloads"
    read = Path(workload_csv).resolve() if workload_csv is not None else None
    return [path for path in sorted(folder.glob("*.csv")) if path.is_file()
            and not (staged / "workloads" / path.name).exists() and path.resolve() != read]
