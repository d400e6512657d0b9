"""``synergy-gym benchmark``: the standard protocol in one command – agents on every registered scenario and mode.

Each ``--model`` (a model zip or ``pretrained:NAME``; repeatable, named by ``--label``; none: the
heuristics and bounds alone) runs on every cell – each registered environment id
(:data:`synergy_gym.env.scenarios.SCENARIOS`) in each mode, ``default`` and ``preemptive``
(:mod:`synergy_gym.agents.benchmark_cells`; ``--env``, ``--mode`` choose) – whose observation and
action spaces it fits; the others are listed with the reason, and a cell no model fits runs
nothing. In every cell that runs, every environment heuristic and the no-waiting bound (with
``--contention-bound`` also the contention-aware bound, an LP per seed) run on the same workloads
(the held-out seeds 1,000,000–1,000,019, or ``--seeds``; :mod:`synergy_gym.agents.benchmark_runs`).

Each policy gets a normalised score (:mod:`synergy_gym.agents.benchmark_scores`): 0 at env
``fifo+tune``, 100 at the best environment heuristic of the cell. The table has one row per cell
and agent: its mean JCT and score, the best heuristic and ``fifo+tune``, the bounds' scores, the
paired per-seed difference to the best heuristic with its 95 % CI and on how many seeds the agent
was lower; a second table, the leaderboard, every policy's score per cell. Written to ``--out``
(default ``runs/benchmark-<timestamp>``), all together or not at all: ``results.json`` (also to
``--json FILE``), ``results.csv``, ``episodes.csv`` and ``scores.png``
(:mod:`synergy_gym.agents.benchmark_outputs`).

The env heuristics' rows (and the contention bound's) are cached per code, cell and seeds
(:mod:`synergy_gym.agents.baseline_cache`), so a second benchmark on the same seeds runs the agents
and the no-waiting bound only.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from synergy_gym.agents.benchmark_cells import DEFAULT_SEEDS, MODES, Cell, benchmark_cells
from synergy_gym.agents.benchmark_outputs import OUTPUT_FILES, Scored, format_leaderboard, format_table, write_outputs
from synergy_gym.agents.benchmark_runs import (
    BenchAgent,
    CellRun,
    benchmark_estimate,
    env_parts,
    plan_cell,
    run_cell,
)
from synergy_gym.agents.benchmark_scores import SCORE_DEFINITION, CellScore, score_cell
from synergy_gym.agents.env_kwargs import parse_env_kwargs
from synergy_gym.agents.eval_outputs import staged_writer
from synergy_gym.agents.eval_policies import agent_labels
from synergy_gym.agents.evaluate import PolicyProgress
from synergy_gym.agents.extras import require_extra
from synergy_gym.agents.models import (
    check_model_zip,
    device_without_models,
    inference_threads,
    load_agent,
    resolve_device,
)
from synergy_gym.agents.normalization import resolve_stats
from synergy_gym.agents.pretrained_policies import resolve_model_argument
from synergy_gym.agents.provenance import run_config, trained_on
from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES
from synergy_gym.cli.args import parse_seed_list
from synergy_gym.cli.files import check_output_dir, check_output_file, require_file, timestamped_dir
from synergy_gym.cli.guards import check_size, format_duration, quiet_notice
from synergy_gym.cli.progress import Progress
from synergy_gym.cli.results_json import build_meta, utc_now
from synergy_gym.cli.staging import is_new
from synergy_gym.errors import ConfigError, SynergyGymError, UnknownNameError

#: What to do about a model's missing statistics: ``benchmark`` has no ``--vecnormalize``.
STATS_ADVICE = ("benchmark reads them only from beside the model: put them in one of those places (as synergy-gym "
                "train saves them: vecnormalize.pkl, best_vecnormalize.pkl for best*.zip), or give --no-normalize "
                "for models trained without VecNormalize")


def check_models(arguments: list[str], normalize: bool = True) -> list[tuple[Path, Path | None]]:
    """Each ``--model``'s path and statistics (found beside it; none with ``normalize`` false: ``--no-normalize``),
    every file checked before any model is loaded."""
    checked = []
    for argument in arguments:
        if not argument.strip():
            raise ConfigError(f"--model {argument!r}: the value is empty; give a model zip or pretrained:NAME")
        try:
            path = require_file(resolve_model_argument(argument), "--model file", ConfigError)
            check_model_zip(path)
        except SynergyGymError as exc:  # every message names --model and the argument as given
            text = str(exc)
            if not text.startswith("--model"):
                text = f"--model {argument}: {text.removeprefix(f'{argument} ')}"
            raise ConfigError(text) from None
        checked.append((path, resolve_stats(path, None, normalize, advice=STATS_ADVICE)))
    return checked


def check_device_flag(device: str, models: list[str]) -> str:
    """``--device``: only models run on one, so without ``--model`` anything but the default is refused."""
    if not models:
        return device_without_models(device, allowed=("auto",))
    try:
        return resolve_device(device)
    except UnknownNameError as exc:
        raise ConfigError(f"--device {device!r}: {exc}") from None


def load_agents(arguments: list[str], labels: list[str], device: str,
                checked: list[tuple[Path, Path | None]] | None = None) -> list[BenchAgent]:
    """Every ``--model`` loaded with its statistics (``checked``: :func:`check_models`' result, else checked here)."""
    agents = []
    for argument, (path, stats), label in zip(arguments, checked or check_models(arguments), labels):
        cfg = run_config(path)
        policy = load_agent(path, cfg, device, label, stats=stats, normalize=stats is not None)
        agents.append(BenchAgent(label, argument, path, policy, cfg, trained_on(path)))
    return agents


def plan(cells: list[Cell], parts: list[dict[str, str]], agents: list[BenchAgent]) -> list[tuple[CellRun, list[BenchAgent]]]:
    """Each cell's run and the models that fit it (``parts``: each cell's spaces); a model that fits none is an error."""
    planned = [plan_cell(cell, agents, cell_parts) for cell, cell_parts in zip(cells, parts)]
    if agents and not any(fits for _, fits in planned):
        run = planned[0][0]
        label, why = run.skipped[0]
        raise ConfigError(f"--model: no model fits any cell chosen ({label} in {run.cell.name}: {why})")
    return planned


def cell_progress(cell: Cell, episodes: int, quiet: bool) -> PolicyProgress:
    """Progress of a cell's policies: a bar (or lines) per policy, counting its ``episodes``."""
    def policy(source: str, name: str) -> Callable[[int, int], None]:
        bar = Progress(f"{cell.short}: {source} {name}", total=episodes, unit="episode", enabled=not quiet)

        def episode(done: int, total: int) -> None:
            bar.update(done, total)
            if done >= total:
                bar.close()

        return episode

    return policy


def cell_meta(run: CellRun, score: CellScore | None) -> dict[str, Any]:
    """The cell's entry in ``meta.cells``: what ran, what was skipped and why, its references."""
    ref = score.reference if score is not None else None
    return {
        "env_id": run.cell.env_id, "mode": run.cell.mode, "env_kwargs": run.cell.env_kwargs,
        "ran": run.results is not None, "agents": run.agents, "trained_here": run.trained_here,
        "skipped": [{"agent": label, "reason": why} for label, why in run.skipped],
        "best_heuristic": ref.best if ref else None, "best_heuristic_jct_h": ref.best_h if ref else None,
        "fifo_tune_jct_h": ref.fifo_tune_h if ref else None, "heuristics_cached": run.heuristics_cached,
        "contention_bound": run.contention if run.results is not None else None, "wall_s": run.wall_s,
    }


def main(args: argparse.Namespace) -> int:
    """``synergy-gym benchmark``: check every input and output path, run the cells, print the tables, write the files."""
    began = time.perf_counter()
    if args.model:  # agents need the rl extra; the heuristics and bounds run without it
        require_extra()
    out = check_output_dir(args.out or timestamped_dir("benchmark"), "--out", OUTPUT_FILES,
                           create_parents=args.out is None)
    new = is_new(out)  # a folder made by another command while this one runs is not written into
    if args.json is not None:
        check_output_file(args.json, "--json", folders=((out, "--out"),), outputs=OUTPUT_FILES,
                          inputs=[(m, "--model") for m in args.model or []])
    started = utc_now()
    labels = agent_labels(args.model or [], args.label)
    seeds = list(parse_seed_list(DEFAULT_SEEDS if args.seeds is None else args.seeds, "--seeds"))  # "" is refused
    env_kwargs = parse_env_kwargs(args.env_kwargs) if args.env_kwargs is not None else {}
    cells = benchmark_cells(args.env, args.mode, env_kwargs)
    if args.no_normalize and not args.model:  # it acts on models only: without one it would do nothing, silently
        raise ConfigError("--no-normalize needs --model")
    models = check_models(list(args.model or []), normalize=not args.no_normalize)
    device = check_device_flag(args.device, list(args.model or []))
    parts = [env_parts(cell) for cell in cells]  # a bad env kwarg fails here, before any model loads
    agents = load_agents(list(args.model or []), labels, device, models)
    planned = plan(cells, parts, agents)
    runs = [(run, fits) for run, fits in planned if fits or not agents]
    contention = args.contention_bound
    size = benchmark_estimate([(run.cell, len(fits)) for run, fits in runs], seeds, HEURISTIC_NAMES, contention)
    check_size(size, args.allow_large)
    quiet_notice("benchmark", size, args.quiet)
    with inference_threads(device if agents else None):
        for run, fits in runs:
            run_cell(run, fits, seeds, HEURISTIC_NAMES, contention, cell_progress(run.cell, len(seeds), args.quiet))
            if run.heuristics_cached and not args.quiet:
                print(f"{run.cell.short}: env heuristics from the cache ({len(HEURISTIC_NAMES)} × {len(seeds)} episodes)",
                      file=sys.stderr)
    scored: Scored = [(run, score_cell(run.results) if run.results is not None else None) for run, _ in planned]
    print(format_table(scored, seeds))
    board = format_leaderboard(scored)
    if board:
        print("\n" + board)
    meta = build_meta(args, seeds, started, None, env_kwargs, modes=MODES, heuristics=list(HEURISTIC_NAMES),
                      score=SCORE_DEFINITION, cells=[cell_meta(run, score) for run, score in scored],
                      agents=[{"label": a.label, "model": a.argument, "path": str(a.path),
                               "trained_on": None if a.trained is None else {"env_id": a.trained.env_id,
                                                                             "env_kwargs": a.trained.env_kwargs}}
                              for a in agents])
    with staged_writer(out, default_name=args.out is None, new=new) as stage:  # every file appears together, or none does
        write_outputs(scored, out, args.json, meta, stage)
    ran = sum(run.results is not None for run, _ in scored)
    extra = f"; {args.json}" if args.json is not None else ""
    print(f"wrote {', '.join(OUTPUT_FILES)} to {stage.folder}{extra} ({ran} of {len(scored)} cells run, "
          f"{format_duration(time.perf_counter() - began)})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from synergy_gym.cli import main as cli_main

    sys.exit(cli_main(["benchmark", *sys.argv[1:]]))
