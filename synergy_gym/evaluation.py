"""Score a policy (an SB3 model or an environment heuristic) on the environment, seed by seed.

The seed *is* the workload seed: each episode starts with
``reset(seed=seed, options={"workload_seed": seed})``, so its jobs are
``env.unwrapped.workload_for_seed(seed)`` – the same for every policy evaluated
with the same ``env_id``, keyword arguments and seed, and the same jobs a
simulator policy gets from ``workload_for_seed`` (``baselines.sim_on_env``).
That makes per-seed differences between policies paired comparisons.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable, Iterable

import gymnasium as gym
import numpy as np
import pandas as pd

SUMMARY_KEYS = (
    "mean_jct_h", "median_jct_h", "p99_jct_h", "window_mean_jct_h", "window_median_jct_h",
    "window_p99_jct_h", "makespan_h", "jobs_finished", "jobs_unfinished", "jobs_total",
)
#: Counters of the final ``info`` (NaN in the row when an environment does not report them).
EPISODE_KEYS = ("episode_rounds", "decisions", "invalid_actions")


def _accepts_masks(policy: Any) -> bool:
    try:
        return "action_masks" in inspect.signature(policy.predict).parameters
    except (TypeError, ValueError):
        return False


def evaluate(
    policy: Any,
    env_id: str | Callable[..., gym.Env] = "Synergy-small-v0",
    seeds: Iterable[int] = (0,),
    name: str | None = None,
    deterministic: bool = True,
    keep_jcts: bool = False,
    **env_kwargs: Any,
) -> pd.DataFrame:
    """Run one episode per seed; one row per seed with the episode's JCT summary.

    ``seed`` is both the environment's seed and the workload seed
    (``reset(seed=seed, options={"workload_seed": seed})``): the episode runs on
    ``env.unwrapped.workload_for_seed(seed)``. With a fixed workload (``workload``
    or ``trace`` kwargs) every seed runs the same jobs.

    JCT statistics are over all jobs of the episode (``compare`` reports its
    measured window instead); in an episode cut off at ``max_rounds``
    (``terminated`` False) unfinished jobs count with their time so far. The
    row also holds the final ``info``'s ``decisions``, ``invalid_actions`` and
    ``episode_rounds`` (NaN if absent).

    With ``keep_jcts`` a column ``jct_h`` holds each episode's per-job JCTs (finished jobs).

    ``policy`` needs ``predict(obs, ..., deterministic=..., [action_masks=...])``
    returning ``(action, state)`` – SB3 models and :mod:`baselines.env_heuristics`
    both qualify. Masks are passed when ``predict`` accepts them.
    """
    import synergy_gym  # noqa: F401  (registers the environments)

    label = name or getattr(policy, "name", None) or type(policy).__name__
    masks = _accepts_masks(policy)
    rows = []
    env = gym.make(env_id, **env_kwargs) if isinstance(env_id, str) else env_id(**env_kwargs)
    try:
        for seed in seeds:
            started = time.perf_counter()
            obs, _ = env.reset(seed=int(seed), options={"workload_seed": int(seed)})
            ret, steps, done, info = 0.0, 0, False, {}
            terminated = truncated = False
            while not done:
                kwargs = {"deterministic": deterministic}
                if masks:
                    kwargs["action_masks"] = env.unwrapped.action_masks()
                action, _ = policy.predict(obs, **kwargs)
                obs, reward, terminated, truncated, info = env.step(np.asarray(action).item())
                ret += float(reward)
                steps += 1
                done = terminated or truncated
            row = {"policy": label, "seed": int(seed), "episode_return": ret, "steps": steps,
                   "terminated": bool(terminated), "wall_s": time.perf_counter() - started}
            row.update({k: info.get(k, np.nan) for k in (*SUMMARY_KEYS, *EPISODE_KEYS)})
            if keep_jcts:
                jobs = env.unwrapped.sim.jobs
                done_jobs = ~np.isnan(jobs.finish_s)
                row["jct_h"] = ((jobs.finish_s - jobs.arrival_s)[done_jobs] / 3600.0).tolist()
            rows.append(row)
    finally:
        env.close()
    return pd.DataFrame(rows)
