"""``synergy-gym compare``: run scheduling policies on identical workloads and compare JCTs.

With no arguments it runs the paper's default experiment – 128 GPUs,
single-GPU Philly-derived jobs at 9 jobs/hour, seed 42, measured window jobs
4000–4999 – under ``fifo+fair``, ``fifo+greedy`` and ``fifo+tune``, prints a
table and writes to ``--out`` (default ``runs/compare-<timestamp>``):

``results.csv``   one row per policy × load × seed (summary statistics)
``jobs.csv``      one row per job and run (arrival, start, finish, JCT)
``avg_jct.png``   mean JCT per policy, or against load when several are given
``jct_cdf.png``   CDF of the measured jobs' JCTs
``workloads/``    the jobs each synthetic case ran, replayable with ``--workload``

``--json FILE`` also writes ``{"results": [{policy, load, seed, mean_jct_h,
median_jct_h, p99_jct_h, makespan_h, jobs_measured, wall_s, …}], "meta": {…}}``
(:mod:`synergy_gym.cli.results_json`). Inputs and output paths are all checked before
anything runs, and files are written only after every run has finished, each one atomically.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synergy_gym.baselines.plots import avg_jct_png, describe_runs
from synergy_gym.baselines.registry import make_policy, parse_policy_list
from synergy_gym.cli.args import check_job_count, parse_float_list, parse_seed_list
from synergy_gym.cli.files import atomic_write_bytes, atomic_write_text, check_output_dir, check_output_file
from synergy_gym.cli.plots import jct_cdf_png
from synergy_gym.cli.progress import Progress
from synergy_gym.cli.results_json import build_meta, utc_now, write_results_json
from synergy_gym.errors import SynergyGymError, UnknownNameError
from synergy_gym.experiments.harness import CaseResult, WorkloadCase, run_cases
from synergy_gym.sim.cluster import ClusterSpec, load_cluster
from synergy_gym.sim.config import TIMINGS, SimulationConfig
from synergy_gym.sim.generator import SyntheticWorkload
from synergy_gym.sim.ledger import PLACEMENTS
from synergy_gym.sim.model_mix import DEFAULT_SPLIT, parse_split
from synergy_gym.sim.profiling import SENSITIVITIES, ProfilerConfig
from synergy_gym.sim.workload import MAX_JOBS, Workload
from synergy_gym.traces.loader import FORMATS, load_trace
from synergy_gym.traces.replay import read_workload_csv, workload_frame
from synergy_gym.traces.trace_jobs import sample_workload, to_workload

DEFAULT_POLICIES: tuple[str, ...] = ("fifo+fair", "fifo+greedy", "fifo+tune")
JSON_FIELDS = (
    "policy", "sensitivity", "load", "seed", "mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h",
    "speedup_vs_fair", "jobs_measured", "jobs_finished", "mean_gpu_util", "mean_cpu_util",
    "mean_mem_util", "mean_throughput", "simulated_h", "rounds_planned", "wall_s", "profiling_gpu_min_per_job",
)


@dataclass(frozen=True)
class CompareSpec:
    """Everything a comparison runs; validated when built from arguments."""

    policies: tuple[str, ...] = DEFAULT_POLICIES
    loads: tuple[float, ...] = (9.0,)
    seeds: tuple[int, ...] = (42,)
    num_jobs: int | None = None
    window: tuple[int, int] | None = None
    multigpu: bool = False
    class_split: tuple[float, float, float] = DEFAULT_SPLIT
    workload_csv: Path | None = None
    trace_csv: Path | None = None
    trace_format: str = "auto"
    #: "real": the trace's own submit times; "sampled": (GPUs, duration) drawn from it, Poisson arrivals.
    trace_mode: str = "real"
    arrival_scale: float = 1.0
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    config: SimulationConfig = field(default_factory=SimulationConfig)
    #: Run every policy with each sensitivity: "true" (measured) and/or "profiled".
    sensitivities: tuple[str, ...] = ("true",)
    profile_noise: float = 0.0

    def configs(self) -> list[SimulationConfig]:
        return [
            replace(self.config, sensitivity=s, profiler=replace(self.config.profiler, noise=self.profile_noise))
            for s in self.sensitivities
        ]

    def cases(self) -> list[WorkloadCase]:
        if self.workload_csv is not None:
            w = read_workload_csv(self.workload_csv)
            w.check_window(str(self.workload_csv))
            w.check_fits(self.cluster, str(self.workload_csv))
            return [WorkloadCase(label=self.workload_csv.name, make=_fixed(w))]
        if self.trace_csv is not None:
            trace = load_trace(self.trace_csv, self.trace_format)
            if self.trace_mode == "real":
                w = to_workload(trace, class_split=self.class_split, max_jobs=self.num_jobs, window=self.window,
                                arrival_scale=self.arrival_scale)
                w.check_fits(self.cluster, str(self.trace_csv))
                return [WorkloadCase(label=self.trace_csv.name, make=_fixed(w))]
            cases = []
            for load in self.loads:
                for seed in self.seeds:
                    w = sample_workload(trace, self.num_jobs or 1000, load, seed, class_split=self.class_split,
                                        window=self.window)
                    w.check_fits(self.cluster, str(self.trace_csv))
                    cases.append(WorkloadCase(label=f"{self.trace_csv.stem}_load{load:g}_seed{seed}",
                                              make=_fixed(w), load=load, seed=seed))
            return cases
        cases = []
        for load in self.loads:
            for seed in self.seeds:
                spec = SyntheticWorkload(
                    jobs_per_hour=load,
                    seed=seed,
                    class_split=self.class_split,
                    multigpu=self.multigpu,
                    max_gpus=self.cluster.total_gpus,
                    num_jobs=self.num_jobs,
                    window=self.window,
                )
                cases.append(WorkloadCase(label=f"load{load:g}_seed{seed}", make=spec.stream, load=load, seed=seed))
        return cases


def _fixed(workload: Workload) -> Callable[[], tuple[Workload, None]]:
    """A :attr:`WorkloadCase.make` that returns ``workload`` and no further jobs."""
    return lambda: (workload, None)


@dataclass(frozen=True)
class CompareOutcome:
    runs: list[CaseResult]
    results: pd.DataFrame  # one row per run, columns JSON_FIELDS


def run_compare(spec: CompareSpec, show_progress: bool = True, cases: list[WorkloadCase] | None = None) -> CompareOutcome:
    """Run every policy of ``spec`` on every case (``spec.cases()`` unless given)."""
    policies = {name: make_policy(name) for name in spec.policies}
    cases = spec.cases() if cases is None else cases
    bars: list[Progress] = []

    def progress(case: WorkloadCase, policy: str) -> Callable[[int, int], None] | None:
        if not show_progress:
            return None
        bar = Progress(f"{policy:<12} {case.label}", unit="job", leave=False)
        bars.append(bar)
        return bar.update

    def finished(run: CaseResult) -> None:
        if bars:
            bars.pop().close()
        if show_progress:
            s = run.result.summary
            print(
                f"  {run.policy:<12} {run.case.label:<16} mean JCT {s.mean_jct_h:8.2f} h  ({s.wall_s:.1f} s)",
                file=sys.stderr,
            )

    runs = []
    for config in spec.configs():
        runs += run_cases(cases, policies, spec.cluster, config, progress=progress, on_done=finished)
    return CompareOutcome(runs=runs, results=results_table(runs))


def results_table(runs: Sequence[CaseResult]) -> pd.DataFrame:
    rows = []
    for run in runs:
        s = run.result.summary.as_dict()
        s.pop("policy")
        rows.append({"policy": run.policy, "load": run.case.load, "seed": run.case.seed, "case": run.case.label, **s})
    frame = pd.DataFrame(rows)
    frame["speedup_vs_fair"] = [_speedup(frame, row) for row in frame.itertuples()]
    return frame


def _speedup(frame: pd.DataFrame, row: Any) -> float:
    """Mean JCT of the same ordering's ``fair`` run (else ``fifo+fair``) over this run's."""
    order = row.policy.partition("+")[0]
    same_case = frame[(frame["case"] == row.case) & (frame["sensitivity"] == row.sensitivity)]
    for ref in (f"{order}+fair", "fifo+fair"):
        match = same_case[same_case["policy"] == ref]
        if len(match):
            return float(match["mean_jct_h"].iloc[0] / row.mean_jct_h)
    return float("nan")


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def format_table(results: pd.DataFrame) -> str:
    show_sens = set(results["sensitivity"]) != {"true"}
    sens_head = f"{'sensitivity':<12}" if show_sens else ""
    header = (
        f"{'policy':<14}{sens_head}{'load':>6}{'seed':>6}{'mean JCT h':>12}{'median h':>10}{'p99 h':>10}"
        f"{'makespan h':>12}{'vs fair':>9}"
    )
    lines = [header, "-" * len(header)]
    for r in results.to_dict("records"):
        sens = f"{r['sensitivity']:<12}" if show_sens else ""
        load = "-" if _missing(r["load"]) else f"{r['load']:g}"
        seed = "-" if _missing(r["seed"]) else f"{int(r['seed'])}"
        vs = "-" if math.isnan(r["speedup_vs_fair"]) else f"{r['speedup_vs_fair']:.2f}×"
        lines.append(
            f"{r['policy']:<14}{sens}{load:>6}{seed:>6}{r['mean_jct_h']:>12.2f}{r['median_jct_h']:>10.2f}"
            f"{r['p99_jct_h']:>10.2f}{r['makespan_h']:>12.1f}{vs:>9}"
        )
    return "\n".join(lines)


def write_outputs(outcome: CompareOutcome, out_dir: Path, cluster: ClusterSpec, json_path: Path | None = None,
                  meta: dict[str, Any] | None = None) -> None:
    """The files of :data:`OUTPUT_FILES` in ``out_dir``, and the results JSON (with ``meta``) to ``json_path``."""
    results = outcome.results
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "results.csv", results[["case", *JSON_FIELDS]].to_csv(index=False))
    job_frames = []
    for run in outcome.runs:
        jobs = run.result.jobs.copy()
        jobs.insert(0, "case", run.case.label)
        jobs.insert(0, "sensitivity", run.result.summary.sensitivity)
        jobs.insert(0, "policy", run.policy)
        job_frames.append(jobs)
    atomic_write_text(out_dir / "jobs.csv", pd.concat(job_frames, ignore_index=True).to_csv(index=False))
    window = measured_window_text(outcome.runs)
    atomic_write_bytes(out_dir / "avg_jct.png", avg_jct_png(results, window))
    jcts: dict[tuple[str, object], list[np.ndarray]] = {}
    for run in outcome.runs:
        label = run.policy if run.result.summary.sensitivity == "true" else f"{run.policy} (profiled)"
        key = (label, run.case.load if run.case.load is not None else run.case.label)
        jcts.setdefault(key, []).append(run.result.measured_jct_h())
    policies = list(dict.fromkeys(results["policy"]))
    title = (f"CDF of job completion times: {len(policies)} {'policy' if len(policies) == 1 else 'policies'}\n"
             f"{describe_runs(results, window)}" + (", seeds pooled" if results["seed"].nunique() > 1 else ""))
    atomic_write_bytes(out_dir / "jct_cdf.png", jct_cdf_png({k: np.concatenate(v) for k, v in jcts.items()}, title))
    largest: dict[str, CaseResult] = {}
    for run in outcome.runs:
        label = run.case.label
        if run.case.load is not None and (label not in largest or len(run.workload) > len(largest[label].workload)):
            largest[label] = run
    for label, run in largest.items():
        atomic_write_text(out_dir / "workloads" / f"{label}.csv", workload_frame(run.workload, cluster).to_csv(index=False))
    write_results_json([json_path], results[list(JSON_FIELDS)].to_dict("records"), meta or {})


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


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare scheduling policies on identical workloads (the main experiment)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--policies",
        default=",".join(DEFAULT_POLICIES),
        help="comma-separated <order>+<alloc> names; orders fifo, srtf, las, drf, tetris, ftf, ftf_ref; "
        "allocations fair, greedy, tune, opt, opt_lp (default: %(default)s)",
    )
    p.add_argument("--load", default=None, help="jobs per hour, comma-separated (default: 9)")
    p.add_argument("--seed", default=None, help="workload seed(s): 42, 1,2,3 or 0..9 (default: 42)")
    p.add_argument("--jobs", type=int, default=None,
                   help=f"run exactly N jobs (1 to {MAX_JOBS:,}); the window becomes the middle half and the run ends "
                   "when all finish")
    p.add_argument("--window", default=None, help="measured window A:B (job indices by arrival, B exclusive)")
    p.add_argument("--multigpu", action="store_true", help="draw GPU counts from the Philly trace's mix")
    p.add_argument("--split", default=None,
                   help="vision/language/speech class split in percent, summing to 100 (default: 20/70/10)")
    p.add_argument("--workload", type=Path, default=None, help="replay a workload CSV (reference format)")
    p.add_argument("--trace", type=Path, default=None,
                   help="a real job trace: Philly CSV or JSON log, Alibaba PAI job table (or its folder), Helios cluster_log")
    p.add_argument("--trace-format", default="auto", choices=FORMATS, help="trace format (default: from the file)")
    p.add_argument("--trace-mode", default="real", choices=("real", "sampled"),
                   help="real: the trace's submit times; sampled: (GPUs, duration) from the trace, Poisson arrivals at --load")
    p.add_argument("--arrival-scale", type=float, default=1.0, help="multiply the trace's submit times (0.5 = twice the rate)")
    p.add_argument("--cluster", default="default", help="preset (default, small, large) or TOML file (default: %(default)s)")
    p.add_argument("--round-s", type=float, default=300.0, help="round length in seconds (default: %(default)s)")
    p.add_argument("--placement", default="first_fit", choices=PLACEMENTS, help="GPU placement (default: %(default)s)")
    p.add_argument("--timing", default="round", choices=TIMINGS,
                   help="round: the paper's whole-round credit; exact: completion at the exact time")
    p.add_argument("--sensitivity", default="true", help="true, profiled, or true,profiled for both side by side")
    p.add_argument("--profile-noise", type=float, default=0.0, help="relative noise of profiling measurements (e.g. 0.05)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: runs/compare-<timestamp>)")
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON to this file")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(run=main)


def spec_from_args(args: argparse.Namespace) -> tuple[CompareSpec, list[WorkloadCase]]:
    """The comparison the arguments ask for, and its workloads (all loaded and checked)."""
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
    if args.trace is None and (args.arrival_scale != 1.0 or args.trace_mode != "real" or args.trace_format != "auto"):
        raise SynergyGymError("--arrival-scale, --trace-mode and --trace-format apply only with --trace")
    cluster = load_cluster(args.cluster)
    config = SimulationConfig(round_s=args.round_s, placement=args.placement, timing=args.timing)
    sensitivities = tuple(dict.fromkeys(x.strip() for x in args.sensitivity.split(",") if x.strip()))
    for sens in sensitivities or ("",):
        if sens not in SENSITIVITIES:
            raise UnknownNameError("sensitivity", sens, SENSITIVITIES)
    spec = CompareSpec(
        policies=parse_policy_list(args.policies),
        sensitivities=sensitivities,
        profile_noise=ProfilerConfig(noise=args.profile_noise).noise,
        loads=parse_float_list(args.load, "--load") if args.load is not None else (9.0,),
        seeds=parse_seed_list(args.seed, "--seed") if args.seed is not None else (42,),
        num_jobs=args.jobs,
        window=parse_window(args.window) if args.window is not None else None,
        multigpu=args.multigpu,
        class_split=parse_split(args.split) if args.split is not None else DEFAULT_SPLIT,
        workload_csv=args.workload,
        trace_csv=args.trace,
        trace_format=args.trace_format,
        trace_mode=args.trace_mode,
        arrival_scale=args.arrival_scale,
        cluster=cluster,
        config=config,
    )
    return spec, spec.cases()


OUTPUT_FILES = ("results.csv", "jobs.csv", "avg_jct.png", "jct_cdf.png", "workloads/")


def main(args: argparse.Namespace) -> int:
    out_dir = args.out or Path("runs") / f"compare-{datetime.now():%Y%m%d-%H%M%S}"
    check_output_dir(out_dir, "--out", OUTPUT_FILES, create_parents=args.out is None)
    if args.json is not None:
        check_output_file(args.json, "--json", folders=((out_dir, "--out"),))
    started = utc_now()
    spec, cases = spec_from_args(args)
    if not args.quiet:
        print(f"cluster: {spec.cluster.describe()}; policies: {', '.join(spec.policies)}", file=sys.stderr)
    outcome = run_compare(spec, show_progress=not args.quiet, cases=cases)
    print(format_table(outcome.results))
    seeds = dict.fromkeys(int(c.seed) for c in cases if c.seed is not None)
    meta = build_meta(args, seeds, started, policies=list(spec.policies), sensitivities=list(spec.sensitivities),
                      loads=sorted({c.load for c in cases if c.load is not None}), cluster=spec.cluster.describe(),
                      workload=str(spec.workload_csv or spec.trace_csv or "") or None)
    write_outputs(outcome, out_dir, spec.cluster, args.json, meta)
    print(f"wrote results.csv, jobs.csv, avg_jct.png, jct_cdf.png to {out_dir}")
    return 0
