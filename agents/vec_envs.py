"""The training environments: one ``Synergy-*`` env per worker, wrapped as configured, vectorised and normalised.

:func:`make_vec_env` builds the ``n_envs`` training environments of a
:class:`~synergy_gym.agents.config.TrainConfig` (``seed + rank``): each is
``Monitor(HeuristicHint(SharedWorkload(HeuristicRelativeReward(env))))`` as the config asks
(:mod:`synergy_gym.agents.relative_reward`, :mod:`synergy_gym.agents.shared_workload`,
:mod:`synergy_gym.agents.heuristic_hint`),
in worker processes (SB3's ``SubprocVecEnv``) or in this process
(:class:`~synergy_gym.agents.inprocess_vec_env.InProcessVecEnv`, ``DummyVecEnv`` with less copying;
``vec_env = "auto"``: :func:`runs_in_process`), with observations (all keys but the masks) and rewards
normalised by ``VecNormalize``.
:func:`close_vec_env` closes them, also after Ctrl-C; :func:`check_env_kwargs` builds
the environment once so that a bad id or kwarg fails before a run writes anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from synergy_gym.agents.baseline_scores import best_heuristic, evaluate_baselines, heuristic_means
from synergy_gym.agents.config import BEST, TrainConfig
from synergy_gym.agents.heuristic_hint import HINT_KEY
from synergy_gym.env.scenarios import SCENARIOS
from synergy_gym.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from stable_baselines3.common.vec_env import VecEnv

    from synergy_gym.agents.relative_reward import HeuristicRunCache

#: Observation keys that are masks (and the heuristic's one-hot action): not normalised (read as 0/1).
MASK_KEYS = ("action_mask", "slot_mask", "running_mask", HINT_KEY)


def check_env_kwargs(cfg: TrainConfig) -> None:
    """Build the environment once, so a bad env id or kwarg fails before anything is written."""
    import synergy_gym  # noqa: F401  (registers the environments)

    try:
        gym.spec(cfg.env_id)
    except gym.error.Error:
        raise ConfigError(f"unknown env {cfg.env_id!r}; valid: {', '.join(SCENARIOS)}") from None
    gym.make(cfg.env_id, **cfg.env_kwargs).close()


def env_factory(env_id: str, env_kwargs: dict[str, Any], relative_to: str | None = None, shared_base: int | None = None,
                worker: bool = False, run_cache: HeuristicRunCache | None = None,
                hint_policy: str | None = None) -> Callable[[], gym.Env]:
    """A picklable env constructor: Monitor([HeuristicHint](SharedWorkload(HeuristicRelativeReward(env)))), as configured.

    The relative reward sits inside the shared seeds (it must see the workload seed the
    episode runs) and inside Monitor (``rollout/ep_rew_mean`` is then the relative return).
    With ``worker`` (SubprocVecEnv) Ctrl-C is ignored in the env's process: the main
    process saves the model and closes the workers. ``run_cache``: a
    :class:`~synergy_gym.agents.relative_reward.HeuristicRunCache` the environments made in this
    process share (DummyVecEnv).
    """

    def make() -> gym.Env:
        import signal

        from stable_baselines3.common.monitor import Monitor

        import synergy_gym  # noqa: F401

        if worker:  # a SubprocVecEnv worker: the main process handles Ctrl-C
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        env = gym.make(env_id, **env_kwargs)
        if relative_to is not None:
            from synergy_gym.agents.relative_reward import HeuristicRelativeReward

            env = HeuristicRelativeReward(env, relative_to, run_cache=run_cache)
        if shared_base is not None:
            from synergy_gym.agents.shared_workload import SharedWorkload

            env = SharedWorkload(env, shared_base)
        if hint_policy is not None:
            from synergy_gym.agents.heuristic_hint import HeuristicHint

            env = HeuristicHint(env, hint_policy)
        return Monitor(env)

    return make


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def runs_in_process(cfg: TrainConfig, cores: int | None = None) -> bool:
    """Whether the training envs run in this process: ``vec_env`` "dummy", one env, or "auto" on at most n_envs cores.

    With "auto" the envs get worker processes only when this process may run on more ``cores``
    (default: :func:`usable_cores`) than there are envs, so that every worker and the trainer has
    a core; on fewer, the workers would take turns on the same cores, and starting them (each
    imports the environment, Stable-Baselines3 and PyTorch) and passing every step through pipes
    costs more than stepping the envs here.
    """
    if cfg.vec_env == "dummy" or cfg.n_envs == 1:
        return True
    if cfg.vec_env == "subproc":
        return False
    return (usable_cores() if cores is None else cores) <= cfg.n_envs


def make_vec_env(cfg: TrainConfig, relative_to: str | None = None, first_episode: int = 0) -> VecEnv:
    """The training envs (``seed + rank``), normalised as configured.

    ``relative_to``: the env heuristic of ``reward = "heuristic_relative"`` (default
    ``cfg.relative_to``; ``"best"`` is resolved by scoring the heuristics on the evaluation seeds).
    ``first_episode``: with shared workloads, the k of the first episode (a resumed run's
    :func:`~synergy_gym.agents.shared_workload.resumed_episode`; 0 for a fresh run).
    """
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecNormalize

    from synergy_gym.agents.shared_workload import shared_seed_base

    if cfg.reward == "heuristic_relative":
        relative_to = relative_to or cfg.relative_to
        if relative_to == BEST:
            relative_to = best_heuristic(heuristic_means(evaluate_baselines(cfg)))
    else:
        relative_to = None
    shared_base = shared_seed_base(cfg.seed) + int(first_episode) if cfg.shared_workload else None
    vec: VecEnv
    if not runs_in_process(cfg):
        factory = env_factory(cfg.env_id, cfg.env_kwargs, relative_to, shared_base, worker=True,
                              hint_policy=cfg.hint_policy)
        vec = SubprocVecEnv([factory] * cfg.n_envs)
    else:
        from synergy_gym.agents.inprocess_vec_env import InProcessVecEnv
        from synergy_gym.agents.relative_reward import HeuristicRunCache

        run_cache = HeuristicRunCache() if relative_to is not None and shared_base is not None else None
        factory = env_factory(cfg.env_id, cfg.env_kwargs, relative_to, shared_base, run_cache=run_cache,
                              hint_policy=cfg.hint_policy)
        # In place of worker processes ("auto"): float64 rewards, as SubprocVecEnv returns them; otherwise
        # ("dummy", one env) float32, as DummyVecEnv keeps them.
        instead_of_workers = cfg.vec_env == "auto" and cfg.n_envs > 1
        vec = InProcessVecEnv([factory] * cfg.n_envs, reward_dtype=np.float64 if instead_of_workers else np.float32)
    vec.seed(cfg.seed)
    if cfg.normalize_obs or cfg.normalize_reward:
        observation_space = cast(spaces.Dict, vec.observation_space)  # every Synergy-* env observes a Dict
        keys = [k for k in observation_space.spaces if k not in MASK_KEYS]
        vec = VecNormalize(vec, norm_obs=cfg.normalize_obs, norm_reward=cfg.normalize_reward,
                           norm_obs_keys=keys, gamma=cfg.gamma)
    return vec


def close_vec_env(env: VecEnv, interrupted: bool = False) -> None:
    """Close the training envs; after Ctrl-C, without waiting for the step results of an interrupted rollout.

    SB3's ``SubprocVecEnv.close`` first receives the result of a pending ``step_async``
    from every worker. Ctrl-C can land inside ``step_wait`` after some of those results
    were already received, and receiving again from those workers then blocks forever:
    the training process hung instead of exiting. After an interruption the pending
    results are dropped (each worker finishes its step, then reads "close" and exits).
    """
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecEnvWrapper

    inner = env
    while isinstance(inner, VecEnvWrapper):  # VecNormalize and other wrappers
        inner = inner.venv
    if interrupted and isinstance(inner, SubprocVecEnv):
        inner.waiting = False
    try:
        env.close()
    except (OSError, EOFError):  # a worker that is already gone
        pass
