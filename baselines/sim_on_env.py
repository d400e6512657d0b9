"""The simulator's named policies on exactly the environment's workloads.

``synergy-gym evaluate`` compares environment heuristics and agents (which act
through :class:`~synergy_gym.env.SynergyEnv`) with the simulator's own policies
(``fifo+tune``, ``fifo+opt``, …, :mod:`synergy_gym.baselines.registry`). For a paired
comparison both must run the same jobs on the same cluster with the same round
mechanics, so :func:`simulate_on_env` takes everything from the environment:

* the jobs: ``env.unwrapped.workload_for_seed(seed)`` – the workload of
  ``reset(options={"workload_seed": seed})``, which ``synergy_gym.evaluate`` uses;
* the cluster: ``env.unwrapped.cluster``;
* the simulator settings (``round_s``, ``placement``, ``timing``, ``sensitivity``,
  no round log): ``env.unwrapped.sim_config``; with ``sensitivity="profiled"``
  the episode's own profiling draw (the config of the env reset with that seed);
* the statistics: :func:`synergy_gym.env.summary.episode_summary`, the env's
  end-of-episode summary – JCT (finish − arrival) over all jobs of the episode,
  its 99th percentile, and the makespan (last finish − first arrival).

``no-wait-bound`` is the no-waiting bound (:mod:`synergy_gym.sim.bounds`) and
``contention-bound`` the contention-aware bound (:mod:`synergy_gym.sim.contention_bound`: a
linear program per seed, whose solve time is the row's ``wall_s``) on the same workloads, both
reported with ``source`` "bound"; the contention bound has only a mean JCT (its p99, median and
makespan are NaN, and it has no per-job JCTs or jobs). The simulator runs every job to
completion; it has no ``max_rounds`` (an env episode is truncated there).
Synergy-OPT (``*+opt``) solves an integer program per round: a few seconds per
300-job episode on 32 GPUs, about 10 s per 1,000-job episode on 128 GPUs
(measured on one core); each row's ``wall_s`` says.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, cast

import gymnasium as gym
import numpy as np
import pandas as pd

from synergy_gym.baselines.registry import make_policy, policy_names
from synergy_gym.env import SynergyEnv
from synergy_gym.env.calls import shown, whole_number
from synergy_gym.env.summary import episode_summary
from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.experiments.evaluation import check_env_id_argument, check_run_options, env_maker, job_frame
from synergy_gym.sim.bounds import no_wait_jct_s, no_wait_start_s
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.contention_bound import contention_bound
from synergy_gym.sim.metrics import summarise_jcts
from synergy_gym.sim.simulator import Simulator
from synergy_gym.sim.workload import Workload

#: Not a policy: every job at its demand from the round boundary after its arrival (``timing="exact"``: from its
#: arrival), never waiting (:func:`synergy_gym.sim.bounds.no_wait_jct_s`) – a lower bound on what any policy here can
#: reach where each job's demand is its fastest point (the model zoo's are; a trace's below the fair share is not).
NO_WAIT_BOUND = "no-wait-bound"
#: Not a policy: the contention-aware bound (:func:`synergy_gym.sim.contention_bound.contention_bound`, default
#: settings and the environment's round length and timing) – a lower bound on every policy's mean JCT that counts
#: the cluster's capacity.
CONTENTION_BOUND = "contention-bound"
#: The bounds, which ``--sim-policies`` and ``--baselines`` take as simulator policies (source "bound").
BOUNDS: tuple[str, ...] = (NO_WAIT_BOUND, CONTENTION_BOUND)
#: The simulator policies ``synergy-gym evaluate --baselines all`` runs by default, and the bounds.
SIM_POLICIES: tuple[str, ...] = ("fifo+fair", "fifo+tune", "fifo+opt", "srtf+tune", "tetris+greedy", *BOUNDS)


def _bound_finish_s(workload: Workload, cluster: ClusterSpec, config: SimulationConfig) -> np.ndarray:
    """When each job finishes under the no-waiting bound (:func:`synergy_gym.sim.bounds.no_wait_jct_s` after its arrival)."""
    return workload.arrival_s + no_wait_jct_s(workload, cluster, config.round_s, config.timing)


def _bound_jobs(workload: Workload, finish_s: np.ndarray, config: SimulationConfig) -> pd.DataFrame:
    """The no-waiting bound's jobs (:func:`synergy_gym.experiments.evaluation.job_frame`).

    Each starts where :func:`synergy_gym.sim.bounds.no_wait_jct_s` starts it (the first round
    boundary at or after its arrival, or with ``timing="exact"`` its arrival) and finishes at ``finish_s``.
    """
    start = no_wait_start_s(np.asarray(workload.arrival_s, dtype=float), config.round_s, config.timing)
    return job_frame(workload, start_s=start, finish_s=finish_s)


def _bound_summary(workload: Workload, finish_s: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
    """The no-waiting bound's episode summary (the keys of the env's) and per-job JCTs in hours."""
    stats = summarise_jcts(workload.arrival_s, finish_s, np.ones(len(workload), dtype=bool))
    summary = {
        "mean_jct_h": stats.mean_h, "median_jct_h": stats.median_h, "p99_jct_h": stats.p99_h,
        "makespan_h": float(finish_s.max() - workload.arrival_s[0]) / 3600.0,
        "jobs_finished": len(workload), "jobs_unfinished": 0, "jobs_total": len(workload),
    }
    return summary, (finish_s - workload.arrival_s) / 3600.0


def _contention_row(workload: Workload, cluster: ClusterSpec, config: SimulationConfig) -> dict[str, Any]:
    """The contention bound's row: its mean JCT (the other statistics NaN) and its solve time as ``wall_s``."""
    bound = contention_bound(workload, cluster, round_s=config.round_s, timing=config.timing)
    nan = float("nan")
    return {"mean_jct_h": bound.mean_jct_h, "median_jct_h": nan, "p99_jct_h": nan, "makespan_h": nan,
            "jobs_finished": len(workload), "jobs_unfinished": 0, "jobs_total": len(workload), "wall_s": bound.solve_s}


def _checked_seeds(seeds: Iterable[int]) -> list[int]:
    """``seeds`` as ints, each a non-negative integer or a whole float (1.7, or a bool, is refused, not rounded)."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise ConfigError(f"simulate_on_env(): seeds must be a list of non-negative integers, got {shown(seeds)}")
    checked = []
    for seed in seeds:
        whole = whole_number(seed)
        if whole is None or whole < 0:
            raise ConfigError(f"simulate_on_env(): seeds must be non-negative integers, got {shown(seed)}")
        checked.append(whole)
    if not checked:  # as evaluate() refuses them: a frame without columns
        raise ConfigError("simulate_on_env(): seeds must be a non-empty list of non-negative integers, got an empty one")
    return checked


def simulate_on_env(
    policy: str,
    env_id: str | Callable[..., gym.Env] = "Synergy-small-v0",
    seeds: Iterable[int] = (0,),
    keep_jcts: bool = False,
    keep_jobs: bool = False,
    on_episode: Callable[[int, int], None] | None = None,
    **env_kwargs: Any,
) -> pd.DataFrame:
    """Run the simulator policy named ``policy`` on the env's workload of each seed; one row per seed.

    Rows have the columns of ``synergy_gym.evaluate`` that a simulator run has
    (``policy``, ``seed``, the JCT summary, ``episode_rounds``, ``wall_s``);
    with ``keep_jcts`` a column ``jct_h`` holds each episode's per-job JCTs, with
    ``keep_jobs`` a column ``jobs`` each episode's jobs (:func:`synergy_gym.experiments.evaluation.job_frame`
    of the simulator's job table; for the bound, each job starts at the first round boundary
    at or after its arrival, or with ``timing="exact"`` at its arrival; the contention bound has
    none, and no JCTs). A fresh policy object runs each seed. ``on_episode(done, total)`` is told
    after each seed (for a progress display).
    ``seeds`` must be non-negative integers (NumPy integers too, not bools): anything else is a
    :class:`~synergy_gym.errors.ConfigError` before any work.
    """
    import synergy_gym  # noqa: F401  (registers the environments)

    policy = policy.strip().lower() if isinstance(policy, str) else policy  # as make_policy reads it, for the rows too
    if policy not in BOUNDS:
        try:
            make_policy(policy)  # an unknown name fails before any work
        except UnknownNameError:
            raise UnknownNameError("simulator policy", policy, (*policy_names(), *BOUNDS)) from None
    seeds = _checked_seeds(seeds)
    check_env_id_argument("simulate_on_env()", env_id)
    check_run_options("simulate_on_env()", on_episode, keep_jcts=keep_jcts, keep_jobs=keep_jobs)
    env = env_maker("simulate_on_env()", env_id, env_kwargs)()
    try:
        base = cast(SynergyEnv, env.unwrapped)
        rows: list[dict[str, Any]] = []
        for seed in seeds:
            if rows and on_episode is not None:
                on_episode(len(rows), len(seeds))
            config = base.sim_config
            if base.cfg.sensitivity == "profiled":  # the episode's profiling draw comes from the env's np_random
                env.reset(seed=seed, options={"workload_seed": seed})
                assert base.sim is not None
                config = base.sim.config
            started = time.perf_counter()
            row: dict[str, Any]
            if policy == CONTENTION_BOUND:
                row = {"policy": policy, "seed": seed, "terminated": True,
                       **_contention_row(base.workload_for_seed(seed), base.cluster, config)}
                if keep_jcts:
                    row["jct_h"] = []
                rows.append(row)
                continue
            if policy == NO_WAIT_BOUND:
                workload = base.workload_for_seed(seed)
                finish_s = _bound_finish_s(workload, base.cluster, config)
                summary, jct_h = _bound_summary(workload, finish_s)
                row = {"policy": policy, "seed": seed, "terminated": True, "wall_s": time.perf_counter() - started, **summary}
                if keep_jcts:
                    row["jct_h"] = jct_h.tolist()
                if keep_jobs:
                    row["jobs"] = _bound_jobs(workload, finish_s, config)
                rows.append(row)
                continue
            sim = Simulator(base.cluster, base.workload_for_seed(seed), make_policy(policy), config)
            sim.run()
            row = {"policy": policy, "seed": seed, "terminated": bool(sim.done), "wall_s": time.perf_counter() - started}
            row.update(episode_summary(sim))
            if keep_jcts:
                jobs = sim.jobs
                done = ~np.isnan(jobs.finish_s)
                row["jct_h"] = ((jobs.finish_s - jobs.arrival_s)[done] / 3600.0).tolist()
            if keep_jobs:
                row["jobs"] = job_frame(sim.jobs)
            rows.append(row)
        if on_episode is not None:
            on_episode(len(rows), len(seeds))
    finally:
        env.close()
    return pd.DataFrame(rows)
