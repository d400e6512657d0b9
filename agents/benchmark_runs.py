"""What ``synergy-gym benchmark`` runs in a cell: the agents that fit, every env heuristic (cached) and the bounds.

Every policy runs one episode per seed on the cell's workloads, exactly as ``synergy-gym evaluate``
runs them (:func:`synergy_gym.agents.evaluate.run_policies`), so per-seed differences are paired:

* ``agent``: each model whose observation and action spaces fit the cell's environment
  (:func:`plan_cell`; :func:`misfit` says why one does not, and the cell skips it);
* ``env``: every environment heuristic (:data:`synergy_gym.baselines.env_heuristics.HEURISTIC_NAMES`),
  ``random`` seeded with each episode's seed. Their rows are kept on disk and reused by later
  benchmarks on the same code, cell and seeds (:mod:`synergy_gym.agents.baseline_cache`);
* ``bound``: the no-waiting bound (:data:`synergy_gym.baselines.sim_on_env.NO_WAIT_BOUND`) and, if
  asked for (``--contention-bound``), the contention-aware bound
  :func:`synergy_gym.sim.contention_bound.contention_bound` (an LP per seed, minutes on the large
  scarce id; cached the same way) where it can be computed – where it cannot, the cell says why and goes on.

A cell in which no model fits runs nothing, unless there are no models at all (the heuristics and
the bounds alone: the leaderboard's other rows). :func:`benchmark_estimate` sizes the whole run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import pandas as pd

from synergy_gym.agents import baseline_cache
from synergy_gym.agents.baseline_cache import cache_key, cacheable, cached_scores
from synergy_gym.agents.benchmark_cells import Cell
from synergy_gym.agents.config import TrainConfig, first_line
from synergy_gym.agents.eval_size import CONTENTION_JOB_S, evaluation_estimate
from synergy_gym.agents.evaluate import PolicyProgress, run_policies
from synergy_gym.agents.model_checks import (
    check_model_spaces,
    check_stats_spaces,
    effective_env_kwargs,
    env_differences,
    env_space_parts,
)
from synergy_gym.agents.provenance import TrainedOn
from synergy_gym.baselines.sim_on_env import NO_WAIT_BOUND
from synergy_gym.cli.guards import Estimate
from synergy_gym.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from synergy_gym.agents.wrappers import AgentPolicy

#: The contention-aware bound's row name (source ``bound``).
CONTENTION_BOUND = "contention-bound"
#: ``random``'s seed in the cache key: each episode's own seed (as ``evaluate``), not one seed for all.
PER_EPISODE_SEED = -1
#: Columns of the rows kept in the cache (those the summary and ``episodes.csv`` read).
KEPT_COLUMNS = ("policy", "source", "seed", "mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h", "terminated",
                "wall_s")


@dataclass
class BenchAgent:
    """A loaded model: its row name, the ``--model`` argument, its path, the policy and what it was trained on."""

    label: str
    argument: str
    path: Path
    policy: AgentPolicy
    config: TrainConfig | None
    trained: TrainedOn | None

    def trained_here(self, cell: Cell) -> bool:
        """Whether the cell is the environment the model was trained in: the same id, mode and env kwargs (``--env-kwargs``
        included), compared as ``evaluate`` compares them (:func:`~synergy_gym.agents.model_checks.env_differences`:
        effective values, so a kwarg given at its default is no difference)."""
        if self.trained is None or self.trained.env_id is None:
            return False
        return env_differences(self.trained, cell.env_id, cell.env_kwargs) is None


@dataclass
class CellRun:
    """A cell: the models that run in it and those skipped (why), then what ran: every policy's rows per seed."""

    cell: Cell
    agents: list[str] = field(default_factory=list)  #: the labels of the models that ran
    skipped: list[tuple[str, str]] = field(default_factory=list)  #: (label, why) of the models that did not
    #: the labels of the models trained in this cell: its id, mode and env kwargs (:meth:`BenchAgent.trained_here`)
    trained_here: list[str] = field(default_factory=list)
    results: pd.DataFrame | None = None  #: one row per policy and seed (None: the cell did not run)
    heuristics_cached: bool = False  #: the env heuristics' rows came from the cache
    contention: str = "off"  #: the contention bound: "computed", "cached", "off" (not asked for), or why it is missing
    wall_s: float = 0.0


def env_parts(cell: Cell) -> dict[str, str]:
    """The cell's observation and action space parts (:func:`synergy_gym.agents.model_checks.env_space_parts`)."""
    return env_space_parts(cell.env_id, cell.env_kwargs)


def misfit(agent: BenchAgent, cell: Cell, parts: dict[str, str]) -> str | None:
    """Why the model does not fit the cell's environment (its spaces or its statistics), or None if it fits."""
    flag = f"{agent.label}:"
    try:
        check_model_spaces(agent.path, agent.policy.model, agent.config, cell.env_id, cell.env_kwargs, parts, flag=flag)
        check_stats_spaces(agent.path, agent.policy.vec_normalize, agent.policy.model, agent.config, cell.env_id,
                           cell.env_kwargs, parts, flag=flag)
    except ConfigError as exc:
        return str(exc).removeprefix(f"{flag} {agent.path}: ")
    return None


def plan_cell(cell: Cell, agents: list[BenchAgent], parts: dict[str, str]) -> tuple[CellRun, list[BenchAgent]]:
    """The cell's run (not yet run: the models that fit it and why the others do not), and the models that fit.

    ``parts``: the cell's space parts (:func:`env_parts`).
    """
    fits, skipped = [], []
    for agent in agents:
        why = misfit(agent, cell, parts)
        if why is None:
            fits.append(agent)
        else:
            skipped.append((agent.label, why))
    return CellRun(cell, [a.label for a in fits], skipped, [a.label for a in fits if a.trained_here(cell)]), fits


def in_cache(cell: Cell, seeds: list[int], names: tuple[str, ...]) -> bool:
    """Whether the rows of ``names`` (env heuristics, or the contention bound) on this cell and seeds are cached."""
    # the module's folder, as cached_scores uses
    folder = baseline_cache.cache_folder() if cacheable(cell.env_kwargs, cell.env_id) else None
    return folder is not None and (folder / cache_key(cell.env_id, cell.env_kwargs, seeds, list(names),
                                                      PER_EPISODE_SEED)).is_file()


def _kept(frame: pd.DataFrame) -> pd.DataFrame:
    """The :data:`KEPT_COLUMNS` of a frame of rows, as plain Python values (JSON for the cache)."""
    out = frame[list(KEPT_COLUMNS)].copy()
    out["seed"] = out["seed"].astype(int)
    out["terminated"] = out["terminated"].astype(bool)
    for column in ("mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h", "wall_s"):
        out[column] = out[column].astype(float)
    return out.reset_index(drop=True)


def heuristic_rows(cell: Cell, seeds: list[int], names: tuple[str, ...],
                   progress: PolicyProgress | None) -> tuple[pd.DataFrame, bool]:
    """Every env heuristic's rows in the cell (from the cache when there), and whether they came from it."""
    cached = in_cache(cell, seeds, names)

    def score() -> dict[str, pd.DataFrame]:
        results, _ = run_policies(cell.env_id, cell.env_kwargs, seeds, env_names=names, progress=progress)
        return {name: _kept(results[results["policy"] == name]) for name in names}

    frames = cached_scores(score, cell.env_id, cell.env_kwargs, seeds, list(names), PER_EPISODE_SEED)
    return pd.concat([frames[name] for name in names], ignore_index=True), cached


def contention_rows(cell: Cell, seeds: list[int],
                    progress: PolicyProgress | None) -> tuple[pd.DataFrame | None, str]:
    """The contention bound's rows (one per seed), cached; None and why where it cannot be computed."""
    try:
        from synergy_gym.sim.contention_bound import contention_bound
    except ImportError as exc:
        return None, f"unavailable: {first_line(exc)}"
    cached = in_cache(cell, seeds, (CONTENTION_BOUND,))

    def score() -> dict[str, pd.DataFrame]:
        episode = progress("bound", CONTENTION_BOUND) if progress is not None else None
        env = gym.make(cell.env_id, **cell.env_kwargs)
        base: Any = env.unwrapped  # a SynergyEnv: its workloads, cluster and round settings
        rows = []
        try:
            for i, seed in enumerate(seeds):
                started = time.perf_counter()
                bound = contention_bound(base.workload_for_seed(seed), base.cluster, round_s=base.sim_config.round_s,
                                         timing=base.sim_config.timing)
                rows.append({"policy": CONTENTION_BOUND, "source": "bound", "seed": int(seed),
                             "mean_jct_h": float(bound.mean_jct_h), "median_jct_h": float("nan"),
                             "p99_jct_h": float("nan"), "makespan_h": float("nan"), "terminated": True,
                             "wall_s": time.perf_counter() - started})
                if episode is not None:
                    episode(i + 1, len(seeds))
        finally:
            env.close()
        return {CONTENTION_BOUND: pd.DataFrame(rows, columns=list(KEPT_COLUMNS))}

    try:
        frames = cached_scores(score, cell.env_id, cell.env_kwargs, seeds, [CONTENTION_BOUND], PER_EPISODE_SEED)
    except Exception as exc:  # the bound is optional: any failure of its LP is reported, not raised
        return None, f"failed: {type(exc).__name__}: {first_line(exc)}"
    return frames[CONTENTION_BOUND], "cached" if cached else "computed"


def run_cell(run: CellRun, fits: list[BenchAgent], seeds: list[int], heuristics: tuple[str, ...],
             contention: bool = False, progress: PolicyProgress | None = None) -> None:
    """Run the planned cell (:func:`plan_cell`): the models that fit, every env heuristic, the bounds; fills ``run``."""
    started = time.perf_counter()
    cell = run.cell
    ran, _ = run_policies(cell.env_id, cell.env_kwargs, seeds, sim_names=(NO_WAIT_BOUND,),
                          agents=[a.policy for a in fits], progress=progress)
    env_rows, run.heuristics_cached = heuristic_rows(cell, seeds, heuristics, progress)
    frames = [_kept(ran), env_rows]
    if contention:
        bound, run.contention = contention_rows(cell, seeds, progress)
        frames += [bound] if bound is not None else []
    run.results = pd.concat(frames, ignore_index=True)
    run.wall_s = time.perf_counter() - started


def benchmark_estimate(runs: list[tuple[Cell, int]], seeds: list[int], heuristics: tuple[str, ...],
                       contention: bool) -> Estimate:
    """The time and memory of the whole benchmark: ``runs`` are the cells that run, each with the models that fit it.

    Each cell as ``evaluate`` estimates it (:func:`synergy_gym.agents.eval_size.evaluation_estimate`), rows in the
    cache costing nothing, and the contention bound's LPs as ``evaluate`` estimates them
    (:data:`~synergy_gym.agents.eval_size.CONTENTION_JOB_S` per job and seed).
    """
    seconds, memory, episodes, jobs = 0.0, 0.0, 0, 0
    for cell, agents in runs:
        kwargs = effective_env_kwargs(cell.env_id, cell.env_kwargs)
        cell_jobs = int(kwargs.get("num_jobs", 1000))
        names = () if in_cache(cell, seeds, heuristics) else heuristics
        part = evaluation_estimate(kwargs, len(seeds), agents, names, (NO_WAIT_BOUND,))
        bound = contention and not in_cache(cell, seeds, (CONTENTION_BOUND,))
        seconds += part.seconds + (len(seeds) * cell_jobs * CONTENTION_JOB_S if bound else 0.0)
        memory = max(memory, part.memory_bytes)
        jobs = max(jobs, cell_jobs)
        episodes += len(seeds) * (agents + len(heuristics) + 1)
    what = f"{len(runs)} cell{'s' if len(runs) != 1 else ''}, {episodes:,} episodes of up to {jobs:,} jobs"
    return Estimate(what, memory, seconds)
