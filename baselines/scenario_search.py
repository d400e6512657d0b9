"""Search CPU-scarce cluster scenarios for ``Synergy-small-scarce-v0``.

What it is for: choosing the cluster (CPUs per server), class split and load of
the ``Synergy-small-scarce-v0`` environment – a 32-GPU cluster (4 servers × 8
GPUs, 500 GB each) where CPUs are scarce, so that how a scheduler hands out CPUs
matters – on *tuning* workload seeds 0–99 only. The held-out evaluation seeds
(1,000,000 and up) are never touched here, so picking a scenario on these
numbers does not leak into the final evaluation.

Every run goes through the simulator, not the Gymnasium environment, but on
exactly the environment's workloads: the jobs come from
:class:`~synergy_gym.env.source.GeneratedWorkloads` with the environment's
generator arguments, whose ``workload(seed)`` is what
``env.reset(options={"workload_seed": seed})`` runs, and with ``num_jobs`` set the
generator's workload runs until *all* jobs have finished (``run_until="all"``),
as the environment does. The reported JCT is the mean over *all* jobs of an
episode (finish − arrival), not the generator's measured middle-half window.

For each scenario and seed it records, per policy, the mean JCT (hours), the
fraction of jobs that first started more than 24 h after arriving, and the
backlog (last finish − last arrival, hours); and the no-waiting bound
(:func:`synergy_gym.sim.bounds.no_wait_jct_s`) with the offered load at the jobs'
demands and at the GPU-proportional share (GPU-hours asked per GPU-hour, so
above 1 the queue grows for as long as jobs keep arriving).

Usage::

    python -m synergy_gym.baselines.scenario_search --out docs/scarce_grid_coarse.csv --seeds 0..19
    python -m synergy_gym.baselines.scenario_search --out docs/scarce_grid_seeds0-99.csv --seeds 0..99 \\
        --select-from docs/scarce_grid_coarse.csv --top 6
    python -m synergy_gym.baselines.scenario_search --out /tmp/smoke.csv --quick

:func:`run_grid` (per-seed rows) and :func:`summarize` (means with 95 %
confidence intervals over seeds) can be reused by later scripts.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from synergy_gym.baselines.registry import make_policy, parse_policy_list
from synergy_gym.cli.args import list_items, parse_seed_list, usage_error
from synergy_gym.cli.files import check_input_file, check_output_file
from synergy_gym.env.source import GeneratedWorkloads
from synergy_gym.errors import ConfigError, SynergyGymError
from synergy_gym.experiments.statistics import ci95_half_width
from synergy_gym.sim.bounds import no_wait_jct_s
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.generator import SyntheticWorkload
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.simulator import Simulator
from synergy_gym.sim.workload import Workload

#: The policies compared: the two orderings that beat FIFO, FIFO+Tune and the fair baseline.
DEFAULT_POLICIES: tuple[str, ...] = ("fifo+tune", "srtf+tune", "tetris+greedy", "fifo+fair")
#: The name of the no-waiting bound's rows.
BOUND = "no_wait_bound"
#: The policies whose best is compared with FIFO+Tune and the bound.
CHALLENGERS: tuple[str, ...] = ("srtf+tune", "tetris+greedy")
REFERENCE = "fifo+tune"

GRID_CPUS: tuple[float, ...] = (8, 12, 16, 20, 24)
GRID_SPLITS: tuple[tuple[int, int, int], ...] = ((20, 70, 10), (40, 40, 20), (60, 20, 20))
GRID_LOADS: tuple[float, ...] = (1.5, 2.25, 3.0)

WAIT_LIMIT_S = 24 * 3600.0
KEY = ["cpus_per_server", "split", "jobs_per_hour"]


@dataclass(frozen=True)
class ScarceConfig:
    """One scenario: a 4 × 8-GPU cluster with ``cpus_per_server`` CPUs and a synthetic workload."""

    cpus_per_server: float
    split: tuple[int, int, int]
    jobs_per_hour: float
    num_jobs: int = 300
    multigpu: bool = False
    num_servers: int = 4
    gpus_per_server: int = 8
    mem_gb_per_server: float = 500.0

    @property
    def split_label(self) -> str:
        return "/".join(f"{w:g}" for w in self.split)

    def cluster(self) -> ClusterSpec:
        """The cluster; its fair share is ``cpus_per_server / gpus_per_server`` CPUs per GPU."""
        return ClusterSpec(
            num_servers=self.num_servers, gpus_per_server=self.gpus_per_server,
            cpus_per_server=self.cpus_per_server, mem_gb_per_server=self.mem_gb_per_server,
        )

    def source(self, zoo: ModelZoo) -> GeneratedWorkloads:
        """The environment's workload source for this scenario (``workload(seed)`` = the env's episode)."""
        vision, language, speech = self.split
        spec = SyntheticWorkload(
            jobs_per_hour=float(self.jobs_per_hour), num_jobs=int(self.num_jobs), multigpu=bool(self.multigpu),
            class_split=(float(vision), float(language), float(speech)), max_gpus=self.cluster().total_gpus,
        )
        return GeneratedWorkloads(spec, zoo)

    def label(self) -> str:
        return f"{self.cpus_per_server:g} CPUs/server, split {self.split_label}, {self.jobs_per_hour:g} jobs/h"

    @classmethod
    def parse(cls, text: str) -> ScarceConfig:
        """``"12:20/70/10:2.25"`` → cpus_per_server 12, split (20, 70, 10), 2.25 jobs/h.

        A malformed entry, or one whose cluster or workload is invalid (no CPUs, a split without a
        positive weight, a load that is not a positive number), is a one-line :class:`ConfigError`.
        """
        try:
            cpus, split, load = text.strip().split(":")
            cfg = cls(float(cpus), _parse_split(split), float(load))
        except ValueError:
            raise ConfigError(f"--configs {text!r}: expected CPUS:V/L/S:JOBS_PER_HOUR, e.g. 12:20/70/10:2.25") from None
        try:
            cfg.source(ModelZoo.default())  # builds the cluster and the workload generator: both check their values
        except SynergyGymError as exc:
            raise ConfigError(f"--configs {text!r}: {exc}") from None
        return cfg


def _parse_split(text: str) -> tuple[int, int, int]:
    """``"20/70/10"`` → (20, 70, 10); ValueError unless three integers."""
    vision, language, speech = (int(w) for w in text.split("/"))
    return vision, language, speech


def default_grid() -> list[ScarceConfig]:
    """CPUs per server × class split × load: 5 × 3 × 3 = 45 scenarios."""
    return [ScarceConfig(c, s, load) for c, s, load in itertools.product(GRID_CPUS, GRID_SPLITS, GRID_LOADS)]


def _offered_load(workload: Workload, cluster: ClusterSpec, jobs_per_hour: float) -> tuple[float, float]:
    """GPU-hours asked per GPU-hour of the cluster, at the jobs' demands and at the fair share."""
    jobs = JobTable(cluster, workload)
    work = jobs.total_iters * jobs.iter_time_s * jobs.gpus / 3600.0  # GPU-hours at throughput 1
    per_gpu_hour = jobs_per_hour / cluster.total_gpus
    return (
        float(np.mean(work / jobs.tput_target)) * per_gpu_hour,
        float(np.mean(work / jobs.tput_fair)) * per_gpu_hour,
    )


def _config_columns(cfg: ScarceConfig) -> dict[str, object]:
    return {"cpus_per_server": cfg.cpus_per_server, "split": cfg.split_label, "jobs_per_hour": cfg.jobs_per_hour}


def run_grid(
    configs: Iterable[ScarceConfig],
    seeds: Sequence[int],
    policies: Sequence[str] = DEFAULT_POLICIES,
    *,
    round_s: float = 300.0,
    include_bound: bool = True,
    zoo: ModelZoo | None = None,
    on_row: Callable[[dict[str, object]], None] | None = None,
) -> pd.DataFrame:
    """Simulate every policy on every (config, seed) workload; one row per (config, seed, policy).

    Columns: cpus_per_server, split, jobs_per_hour, seed, policy, mean_jct_h (over all
    jobs), frac_wait_gt24h, backlog_h, wall_s, and for the bound's rows (policy
    :data:`BOUND`) also load_demand and load_fair. Each policy gets a freshly built
    copy of the workload, so runs are independent and identical in their jobs.
    """
    zoo = zoo or ModelZoo.default()
    sim_config = SimulationConfig(round_s=round_s, record_rounds=False)
    rows: list[dict[str, object]] = []

    def emit(row: dict[str, object]) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    for cfg in configs:
        cluster, source = cfg.cluster(), cfg.source(zoo)
        for seed in seeds:
            base = {**_config_columns(cfg), "seed": int(seed)}
            if include_bound:
                t0 = time.perf_counter()
                workload = source.workload(seed)
                bound = no_wait_jct_s(workload, cluster, round_s)
                load_demand, load_fair = _offered_load(workload, cluster, cfg.jobs_per_hour)
                emit({
                    **base, "policy": BOUND, "mean_jct_h": float(bound.mean()) / 3600.0,
                    "frac_wait_gt24h": 0.0, "backlog_h": np.nan, "wall_s": time.perf_counter() - t0,
                    "load_demand": load_demand, "load_fair": load_fair,
                })
            for name in policies:
                t0 = time.perf_counter()
                workload = source.workload(seed)
                assert workload.run_until == "all", "a generated workload with num_jobs runs all jobs"
                jobs = Simulator(cluster, workload, make_policy(name), sim_config).run().jobs
                if len(jobs) != len(workload) or jobs["finish_s"].isna().any():
                    raise RuntimeError(f"{name} on {cfg.label()} seed {seed}: not every job finished")
                jct = (jobs["finish_s"] - jobs["arrival_s"]).to_numpy()
                wait = (jobs["start_s"] - jobs["arrival_s"]).to_numpy()
                emit({
                    **base, "policy": name, "mean_jct_h": float(jct.mean()) / 3600.0,
                    "frac_wait_gt24h": float(np.mean(wait > WAIT_LIMIT_S)),
                    "backlog_h": float(jobs["finish_s"].max() - jobs["arrival_s"].max()) / 3600.0,
                    "wall_s": time.perf_counter() - t0,
                })
    return pd.DataFrame(rows)


def summarize(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per (config, policy): mean over seeds of each seed's mean JCT, its t-based 95 % CI, the seed count.

    Also the means over seeds of frac_wait_gt24h, backlog_h and (bound rows) the offered loads.
    """
    group = per_seed.groupby([*KEY, "policy"], sort=False)
    out = group["mean_jct_h"].agg(mean_jct_h="mean", std="std", seeds="count").reset_index()
    out["ci95_h"] = ci95_half_width(out["std"].to_numpy(), out["seeds"].to_numpy())
    extra = [c for c in ("frac_wait_gt24h", "backlog_h", "load_demand", "load_fair") if c in per_seed]
    out = out.merge(group[extra].mean().reset_index(), on=[*KEY, "policy"])
    return out[[*KEY, "policy", "mean_jct_h", "ci95_h", "seeds", *extra]]


def compare_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per config: the reference, challengers and bound side by side, with the ratios.

    ``cut`` = 1 − best/fifo+tune (best of :data:`CHALLENGERS`); ``headroom`` = best / bound.
    """
    wide = summary.pivot_table(index=KEY, columns="policy", values="mean_jct_h", sort=False)
    ref = summary[summary["policy"] == REFERENCE].set_index(KEY)
    bound = summary[summary["policy"] == BOUND].set_index(KEY)
    out = pd.DataFrame(index=wide.index)
    for name in (REFERENCE, *CHALLENGERS, BOUND):
        out[name] = wide.get(name, np.nan)
    present = [c for c in CHALLENGERS if c in wide]
    out["best"] = wide[present].min(axis=1) if present else np.nan  # no challenger run: no best, nothing selected
    out["best_is"] = wide[present].idxmin(axis=1) if present else None
    out["cut"] = 1.0 - out["best"] / out[REFERENCE]
    out["headroom"] = out["best"] / out[BOUND]
    out["ref_wait24"] = ref["frac_wait_gt24h"].reindex(out.index)
    out["ref_backlog_h"] = ref["backlog_h"].reindex(out.index)
    for col in ("load_demand", "load_fair"):
        out[col] = bound[col].reindex(out.index) if col in bound else np.nan
    return out.reset_index()


def select_promising(
    table: pd.DataFrame, top: int = 6, min_cut: float = 0.35, min_headroom: float = 1.7, max_ref_h: float = 60.0
) -> pd.DataFrame:
    """Configs where the best challenger cuts FIFO+Tune's JCT by ≥ ``min_cut``, the bound is ≥
    ``min_headroom``× below the best, and FIFO+Tune's mean JCT is below ``max_ref_h``; the ``top``
    with the most headroom (ties: the larger cut).
    """
    ok = table[(table["cut"] >= min_cut) & (table["headroom"] >= min_headroom) & (table[REFERENCE] < max_ref_h)]
    return ok.sort_values(["headroom", "cut"], ascending=False).head(top)


def format_table(table: pd.DataFrame) -> str:
    """The comparison as readable text."""
    head = (
        f"{'CPUs':>4} {'split':>8} {'jobs/h':>6} {'fifo+tune':>9} {'srtf+tune':>9} {'tetris+gr':>9} "
        f"{'bound':>6} {'cut':>5} {'best/bnd':>8} {'wait>24h':>8} {'backlog':>7} {'ρdem':>5} {'ρfair':>5}"
    )
    lines = [head, "-" * len(head)]
    for d in table.to_dict("records"):
        lines.append(
            f"{d['cpus_per_server']:>4g} {d['split']:>8} {d['jobs_per_hour']:>6g} {d[REFERENCE]:>9.2f} "
            f"{d['srtf+tune']:>9.2f} {d['tetris+greedy']:>9.2f} {d[BOUND]:>6.2f} {d['cut']:>5.0%} "
            f"{d['headroom']:>7.2f}× {d['ref_wait24']:>8.1%} {d['ref_backlog_h']:>6.1f}h "
            f"{d['load_demand']:>5.2f} {d['load_fair']:>5.2f}"
        )
    return "\n".join(lines)


def _configs_from_coarse(path: Path, top: int, **criteria: float) -> list[ScarceConfig]:
    summary = pd.read_csv(path, dtype={"split": str})
    missing = [c for c in (*KEY, "policy", "mean_jct_h", "frac_wait_gt24h", "backlog_h") if c not in summary]
    if missing:
        raise ConfigError(f"--select-from {path}: not a summary CSV of this search (no column {', '.join(missing)})")
    chosen = select_promising(compare_table(summary), top=top, **criteria)
    return [
        ScarceConfig(float(r["cpus_per_server"]), _parse_split(str(r["split"])), float(r["jobs_per_hour"]))
        for r in chosen.to_dict("records")
    ]


#: The seeds, configs and selection criteria without ``--seeds``, ``--top``, ``--min-cut``, … .
DEFAULT_SEEDS = "0..19"
SELECT_DEFAULTS: dict[str, float] = {"top": 6, "min_cut": 0.35, "min_headroom": 1.7, "max_ref_h": 60.0}
QUICK_CONFIGS = (ScarceConfig(12, (20, 70, 10), 2.25), ScarceConfig(16, (40, 40, 20), 3.0))
QUICK_SEEDS = (0, 1, 2)


def _checked_policies(text: str) -> tuple[str, ...]:
    """``--policies``, each a simulator policy, including what the comparison table needs."""
    policies = parse_policy_list(text, "--policies")
    if REFERENCE not in policies or not any(c in policies for c in CHALLENGERS):
        raise ConfigError(f"--policies {text!r}: the comparison table needs {REFERENCE} and {' or '.join(CHALLENGERS)}")
    return policies


def _plan(args: argparse.Namespace) -> tuple[list[ScarceConfig], tuple[int, ...], tuple[str, ...]]:
    """The configs, seeds and policies the arguments ask for, every value checked before any run."""
    criteria = {name: getattr(args, name) for name in SELECT_DEFAULTS}
    given = [f"--{name.replace('_', '-')}" for name, value in criteria.items() if value is not None]
    if given and args.select_from is None:
        raise ConfigError(f"only --select-from uses {', '.join(given)}; give it too, or leave them out")
    if args.top is not None and args.top < 1:
        raise ConfigError(f"--top must be a positive integer, got {args.top}")
    if args.quick:
        options = (("--seeds", args.seeds), ("--configs", args.configs), ("--select-from", args.select_from))
        if clash := [flag for flag, value in options if value is not None]:
            raise ConfigError(f"--quick runs its own configs and seeds; it does not take {', '.join(clash)}")
    elif args.configs is not None and args.select_from is not None:
        raise ConfigError("--configs and --select-from both choose the configs; give one")
    policies = _checked_policies(args.policies)
    check_output_file(args.out, "--out")
    if args.per_seed is not None:
        check_output_file(args.per_seed, "--per-seed")
    if args.quick:
        return list(QUICK_CONFIGS), QUICK_SEEDS, policies
    seeds = parse_seed_list(DEFAULT_SEEDS if args.seeds is None else args.seeds, "--seeds")
    if max(seeds) >= 1_000_000:
        raise ConfigError(f"--seeds {args.seeds!r}: seeds 1,000,000 and up are held out for evaluation; tune on lower seeds")
    if args.configs is not None:
        configs = [ScarceConfig.parse(t) for t in list_items(args.configs, "--configs")]
        return configs, seeds, policies
    if args.select_from is not None:
        check_input_file(args.select_from, "--select-from")
        chosen = {name: SELECT_DEFAULTS[name] if value is None else value for name, value in criteria.items()}
        configs = _configs_from_coarse(args.select_from, int(chosen.pop("top")), **chosen)
        if not configs:
            raise ConfigError(f"no config in {args.select_from} meets the criteria; relax "
                              "--min-cut/--min-headroom/--max-ref-h")
        return configs, seeds, policies
    return default_grid(), seeds, policies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m synergy_gym.baselines.scenario_search", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="CSV: one row per (config, policy), in an existing folder")
    parser.add_argument("--seeds", help=f"tuning seeds, e.g. 0..19 or 0..99 (default {DEFAULT_SEEDS})")
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 configs, seeds 0..2 (no --seeds, --configs)")
    parser.add_argument("--configs", help="comma-separated CPUS:V/L/S:JOBS_PER_HOUR instead of the full grid")
    parser.add_argument("--select-from", type=Path, help="a coarse CSV: run its most promising configs")
    parser.add_argument("--top", type=int, help="how many promising configs --select-from takes (default 6)")
    parser.add_argument("--min-cut", type=float, help="--select-from: least 1 − best/fifo+tune (default 0.35)")
    parser.add_argument("--min-headroom", type=float, help="--select-from: least best/bound (default 1.7)")
    parser.add_argument("--max-ref-h", type=float, help="--select-from: most fifo+tune mean JCT, h (default 60)")
    parser.add_argument("--policies", default=",".join(DEFAULT_POLICIES),
                        help=f"policies to run; the table needs {REFERENCE} and {' or '.join(CHALLENGERS)}")
    parser.add_argument("--per-seed", type=Path, help="also write the per-seed rows to this CSV")
    args = parser.parse_args(argv)
    try:
        configs, seeds, policies = _plan(args)
    except SynergyGymError as exc:
        return usage_error(parser, exc)
    print(f"{len(configs)} configs × {len(seeds)} seeds × {len(policies)} policies (+ bound)", flush=True)

    t0, done = time.perf_counter(), [0]
    total = len(configs) * len(seeds) * (len(policies) + 1)

    def progress(row: dict[str, object]) -> None:
        done[0] += 1
        if done[0] % max(1, total // 20) == 0 or done[0] == total:
            print(f"  {done[0]}/{total} runs, {time.perf_counter() - t0:.0f} s", flush=True)

    per_seed = run_grid(configs, seeds, policies, on_row=progress)
    summary = summarize(per_seed)
    summary.to_csv(args.out, index=False, float_format="%.4f")
    if args.per_seed:
        per_seed.to_csv(args.per_seed, index=False, float_format="%.4f")
    print(format_table(compare_table(summary)))
    print(f"wrote {args.out} ({len(summary)} rows) in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
