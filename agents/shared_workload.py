"""Shared workloads across the environments of a rollout (the "input-driven" setting of Mao et al., ICLR 2019).

With ``shared_workload = true`` each training environment resets its k-th episode
with ``options={"workload_seed": base + k}``, the same ``base`` for all of them, so
environment i's k-th episode runs the same jobs for every i: the returns of the
environments' k-th episodes differ only through the agent's actions (and, with
``sensitivity="profiled"``, the profiling noise), not through the arrival process.

What this does and does not do with Stable-Baselines3: SB3's advantage baseline is
the value function, which cannot see the future arrivals, so sharing seeds alone
does not subtract the workload's part of the return. Mao et al.'s input-dependent
baseline (the mean return of the rollouts on the same input sequence) needs the
returns of every environment's k-th episode before any of them can be used, which
SB3's per-step rollout buffer does not allow without a custom algorithm. The
workload term is removed instead by ``reward = "heuristic_relative"``
(:mod:`synergy_gym.agents.relative_reward`): the baseline for a workload is the return of a
fixed heuristic on that same workload, subtracted step by step. The two combine:
shared seeds make the environments' relative returns directly comparable.

``base`` (:func:`shared_seed_base`) is ``SHARED_SEED_BASE + 1,000,000 · seed``:
far from the held-out (1,000,000…) and validation (2,000,000…) seeds, and
different for each training seed. A run resumed from a checkpoint at step N, saved with n
environments, continues at k = N // n (:func:`resumed_episode`): each episode takes at least one
step, so every environment's episodes before the checkpoint had k < N / n, and the continuation
trains on no shared workload it trained on before (with the same number of environments).
"""

from __future__ import annotations

import gymnasium as gym

#: Workload seeds of shared training episodes start here (10,000,000 + 1,000,000 · training seed).
SHARED_SEED_BASE = 10_000_000
SEEDS_PER_TRAINING_SEED = 1_000_000


def shared_seed_base(seed: int) -> int:
    """The first workload seed of a training run with ``seed`` (its k-th episodes use base + k)."""
    return SHARED_SEED_BASE + SEEDS_PER_TRAINING_SEED * int(seed)


def resumed_episode(steps: int, n_envs: int) -> int:
    """The first k of a run resumed at step ``steps`` of a checkpoint trained with ``n_envs`` environments: its steps
    per environment, past every episode those environments started before it (0 for a fresh run)."""
    return int(steps) // max(1, int(n_envs))


class SharedWorkload(gym.Wrapper):
    """Reset the k-th episode with ``options={"workload_seed": base + k}`` (unless the caller gives one)."""

    def __init__(self, env: gym.Env, base: int) -> None:
        super().__init__(env)
        if int(base) < 0:
            raise ValueError(f"base must be a non-negative workload seed, got {base!r}")
        self.base = int(base)
        self.episode = 0

    @property
    def next_workload_seed(self) -> int:
        return self.base + self.episode

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        options = dict(options or {})
        if "workload_seed" not in options:
            options["workload_seed"] = self.next_workload_seed
            self.episode += 1
        obs, info = self.env.reset(seed=seed, options=options)
        info = dict(info)
        info["workload_seed"] = options["workload_seed"]
        return obs, info
