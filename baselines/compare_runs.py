"""What ``synergy-gym compare`` runs: its :class:`CompareSpec`, the runs (:func:`run_compare`) and their table.

:meth:`CompareSpec.case_count` and :meth:`CompareSpec.jobs_per_case` size a comparison without
building it, so that the command can estimate it (:mod:`synergy_gym.cli.guards`) before any seed
is listed or any workload drawn.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from synergy_gym.baselines.registry import DEFAULT_POLICIES, make_policy
from synergy_gym.cli.guards import open_ended_jobs
from synergy_gym.cli.progress import Progress
from synergy_gym.errors import SynergyGymError
from synergy_gym.experiments.harness import CaseResult, WorkloadCase, run_cases
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.generator import DEFAULT_WINDOW, SyntheticWorkload
from synergy_gym.sim.model_mix import DEFAULT_SPLIT
from synergy_gym.sim.workload import Workload
from synergy_gym.traces.replay import read_workload_csv
from synergy_gym.traces.trace_jobs import sample_workload, to_workload

#: Jobs per sampled case of ``--trace-mode sampled`` without ``--jobs``.
SAMPLED_JOBS = 1000


def load_text(load: float) -> str:
    """``load`` as it names a case or a sweep cell: ``9``, ``2.5``; exact, so that two loads never share a name.

    ``{load:g}`` when that reads back as ``load``, else :func:`repr` (``9.0000001``, not ``9``).
    """
    short = f"{load:g}"
    return short if float(short) == load else repr(float(load))


@dataclass(frozen=True)
class CompareSpec:
    """Everything a comparison runs; validated when built from arguments."""

    policies: tuple[str, ...] = DEFAULT_POLICIES
    loads: tuple[float, ...] = (9.0,)
    #: Any sequence: a :class:`~synergy_gym.cli.args.SeedList` is listed only when the cases are built.
    seeds: Sequence[int] = (42,)
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
    #: Keep a Philly trace's jobs outside the paper's duration range (``load_trace``'s filter off).
    all_durations: bool = False
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

    def case_count(self) -> int:
        """Workloads to run each policy on (without building them)."""
        fixed = self.workload_csv is not None or (self.trace_csv is not None and self.trace_mode == "real")
        return 1 if fixed else len(self.loads) * len(self.seeds)

    def jobs_per_case(self) -> int | None:
        """Jobs in each workload, estimated before any is built; None for a fixed workload (its file tells)."""
        if self.workload_csv is not None or (self.trace_csv is not None and self.trace_mode == "real"):
            return None
        if self.trace_csv is not None:
            return self.num_jobs or SAMPLED_JOBS
        return self.num_jobs or open_ended_jobs((self.window or DEFAULT_WINDOW)[1])

    def cases(self) -> list[WorkloadCase]:
        if self.workload_csv is not None:
            w = read_workload_csv(self.workload_csv)
            w.check_window(str(self.workload_csv))
            w.check_fits(self.cluster, str(self.workload_csv))
            return [WorkloadCase(label=self.workload_csv.name, make=_fixed(w))]
        if self.trace_csv is not None:
            from synergy_gym.traces.loader import load_trace  # the trace readers use pandas

            trace = load_trace(self.trace_csv, self.trace_format, philly_duration_filter=not self.all_durations)
            if self.trace_mode == "real":
                if self.num_jobs is not None and self.num_jobs > len(trace):
                    raise SynergyGymError(
                        f"--jobs {self.num_jobs}: {self.trace_csv} has {len(trace):,} usable job(s)"
                        + (f" ({trace.filtered:,} more outside the paper's duration range: --all-durations keeps them)"
                           if trace.filtered and self.num_jobs <= len(trace) + trace.filtered else "")
                    )
                w = to_workload(trace, class_split=self.class_split, max_jobs=self.num_jobs, window=self.window,
                                arrival_scale=self.arrival_scale)
                w.check_fits(self.cluster, str(self.trace_csv))
                return [WorkloadCase(label=self.trace_csv.name, make=_fixed(w))]
            cases = []
            for load in self.loads:
                for seed in self.seeds:
                    w = sample_workload(trace, self.num_jobs or SAMPLED_JOBS, load, seed, class_split=self.class_split,
                                        window=self.window)
                    w.check_fits(self.cluster, str(self.trace_csv))
                    cases.append(WorkloadCase(label=f"{self.trace_csv.stem}_load{load_text(load)}_seed{seed}",
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
                cases.append(WorkloadCase(label=f"load{load_text(load)}_seed{seed}", make=spec.stream, load=load, seed=seed))
        return cases


def _fixed(workload: Workload) -> Callable[[], tuple[Workload, None]]:
    """A :attr:`WorkloadCase.make` that returns ``workload`` and no further jobs."""
    return lambda: (workload, None)


@dataclass(frozen=True)
class CompareOutcome:
    runs: list[CaseResult]
    #: One row per run (columns: policy, load, seed, case, the run's summary, speedup_vs_fair).
    results: list[dict[str, Any]]


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
        for case in cases:  # each case with the profiling noise of its own seed (the same for all its policies)
            runs += run_cases([case], policies, spec.cluster, profiled_for(config, case), progress=progress,
                              on_done=finished)
    return CompareOutcome(runs=runs, results=results_table(runs))


def profiled_for(config: SimulationConfig, case: WorkloadCase) -> SimulationConfig:
    """``config`` for ``case``: with profiling noise, the profiler seeded with the case's workload seed, so that
    seeds replicate the noise too (every seed drew the same noise); a fixed workload (no seed) keeps the config's."""
    if config.sensitivity != "profiled" or config.profiler.noise == 0 or case.seed is None:
        return config
    return replace(config, profiler=replace(config.profiler, seed=int(case.seed)))


def results_table(runs: Sequence[CaseResult]) -> list[dict[str, Any]]:
    """One row per run: policy, load, seed, case, the fields of its summary and speedup_vs_fair."""
    rows = []
    for run in runs:
        s = run.result.summary.as_dict()
        s.pop("policy")
        rows.append({"policy": run.policy, "load": run.case.load, "seed": run.case.seed, "case": run.case.label, **s})
    speedups = [_speedup(rows, row) for row in rows]
    for row, speedup in zip(rows, speedups):
        row["speedup_vs_fair"] = speedup
    return rows


def _speedup(rows: Sequence[dict[str, Any]], row: dict[str, Any]) -> float:
    """Mean JCT of the same ordering's ``fair`` run (else ``fifo+fair``) over this run's."""
    order = row["policy"].partition("+")[0]
    same_case = [r for r in rows if r["case"] == row["case"] and r["sensitivity"] == row["sensitivity"]]
    for ref in (f"{order}+fair", "fifo+fair"):
        match = [r for r in same_case if r["policy"] == ref]
        if match:
            return float(np.float64(match[0]["mean_jct_h"]) / np.float64(row["mean_jct_h"]))
    return float("nan")
