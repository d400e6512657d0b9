"""Episodes finished by a base heuristic: how the rollouts of :mod:`synergy_gym.baselines` score a state."""

from __future__ import annotations

from typing import Any

import numpy as np

from synergy_gym.baselines.env_heuristics import EnvHeuristic


def total_jct_s(env: Any) -> float:
    """Sum of the JCTs (seconds) of the jobs that have arrived; an unfinished one counts with its time so far.

    The same jobs and convention as the episode summary's ``mean_jct_h``
    (:func:`synergy_gym.env.summary.episode_summary`): at the end of an episode it is
    ``mean_jct_h · 3600 · jobs counted``.
    """
    sim = env.unwrapped.sim
    jobs = sim.jobs
    arrived = jobs.arrival_s <= sim.now
    finish = np.where(np.isnan(jobs.finish_s), sim.now, jobs.finish_s)
    return float((finish - jobs.arrival_s)[arrived].sum())


def base_action(base: EnvHeuristic, env: Any, obs: dict[str, np.ndarray]) -> int:
    """The base heuristic's action in ``env``'s current state (``obs`` its observation)."""
    action, _ = base.predict(obs, action_masks=env.unwrapped.action_masks())
    return int(np.asarray(action).item())


def finish_with_base(env: Any, obs: dict[str, np.ndarray], base: EnvHeuristic) -> tuple[float, dict[str, Any]]:
    """Run ``env`` (already mid-episode, ``obs`` its observation) to the end with ``base``: (total JCT s, final info)."""
    u = env.unwrapped
    while True:
        obs, _, terminated, truncated, info = u.step(base_action(base, u, obs))
        if terminated or truncated:
            return total_jct_s(u), info


def base_episode(env: Any, base: EnvHeuristic, seed: int) -> tuple[float, float]:
    """The base heuristic's episode on workload ``seed``: (mean JCT h from the final info, total JCT s)."""
    obs, _ = env.reset(seed=int(seed), options={"workload_seed": int(seed)})
    total, info = finish_with_base(env, obs, base)
    return float(info["mean_jct_h"]), total
