"""``synergy-gym train``'s size guard: a run's memory and time, estimated before it writes anything.

Training runs for hours on purpose, so its time limit is :data:`TIME_LIMIT_S` (a week), not the
hour of ``compare``; its memory limit is :func:`synergy_gym.cli.guards.memory_limit`'s. Past either,
the run is refused with the estimate unless ``--allow-large``.

* **memory**: the process with PyTorch, ``n_envs`` environments (a simulation each), and the buffer
  the algorithm keeps: an on-policy rollout of ``n_steps × n_envs`` observations (with their masks,
  values and advantages), or DQN's replay buffer of ``buffer_size`` transitions (an observation and
  the next one, as Stable-Baselines3 stores them);
* **time**: ``timesteps`` at :data:`STEP_S` a step, plus the held-out evaluations (``eval_episodes``
  episodes every ``eval_freq`` steps, :mod:`synergy_gym.agents.eval_size`'s cost per decision).
* **the warm start** (a run that imitates from step 0): every imitated step's observation is kept
  (``bc_steps`` and ``dagger_steps`` per DAgger round), as a rollout keeps its own; collecting a step
  and each of the ``bc_epochs`` passes over it count as a training step (a PPO step includes several
  passes over its sample, so this is on the high side).

MaskablePPO on ``Synergy-small-scarce-v0`` with 4 environments trained at 699 steps/s on one core of a
2-core AMD EPYC VM, start-up included; :data:`STEP_S` rounds that up.
"""

from __future__ import annotations

from typing import Any

from synergy_gym.agents.eval_size import AGENT_DECISION_S, ENV_STEP_S, TORCH_BYTES, decisions_per_job
from synergy_gym.cli.guards import BASE_BYTES, Estimate, format_bytes, format_duration, memory_limit

#: The longest run trained without ``--allow-large``.
TIME_LIMIT_S = 7 * 24 * 3600.0
#: Seconds per training step (collecting it and learning from it).
STEP_S = 1 / 400
#: Bytes per float of a stored observation, and the arrays an on-policy rollout keeps besides it.
FLOAT_BYTES, ROLLOUT_ARRAYS = 4, 2.0
#: One environment beyond its simulation's arrays (its observation builder, wrappers).
ENV_BYTES = 8 * 1024**2


def imitated_steps(cfg: Any) -> int:
    """The steps a warm start from step 0 imitates: ``bc_steps``, and ``dagger_steps`` (default ``bc_steps``) a round."""
    if not cfg.imitates:
        return 0
    return int(cfg.bc_steps + cfg.dagger_rounds * (cfg.dagger_steps or cfg.bc_steps))


def train_estimate(cfg: Any, observation_floats: int, env_kwargs: dict[str, Any], warm_start: bool = True) -> Estimate:
    """The estimate for ``cfg`` (a TrainConfig); ``observation_floats``: one observation's size, mask included;
    ``warm_start``: the run imitates first (not a run resumed past step 0)."""
    from synergy_gym.cli.guards import simulation_bytes
    from synergy_gym.env.config import as_cluster

    jobs = int(env_kwargs.get("num_jobs", 1000))
    servers = as_cluster(env_kwargs.get("cluster", "default")).num_servers
    if cfg.algo == "dqn":
        buffer = 2.0 * cfg.buffer_size * observation_floats * FLOAT_BYTES
    else:
        buffer = ROLLOUT_ARRAYS * cfg.n_steps * cfg.n_envs * observation_floats * FLOAT_BYTES
    imitated = imitated_steps(cfg) if warm_start else 0
    buffer = max(buffer, ROLLOUT_ARRAYS * imitated * observation_floats * FLOAT_BYTES)
    memory = BASE_BYTES + TORCH_BYTES + cfg.n_envs * (ENV_BYTES + simulation_bytes(servers, jobs)) + buffer
    decisions = jobs * decisions_per_job(env_kwargs)
    evaluations = cfg.timesteps // cfg.eval_freq + 1
    seconds = ((cfg.timesteps + imitated * (1 + cfg.bc_epochs)) * STEP_S
               + evaluations * cfg.eval_episodes * decisions * (ENV_STEP_S + AGENT_DECISION_S))
    what = f"{cfg.timesteps:,} steps of {cfg.algo} with {cfg.n_envs} environment{'s' if cfg.n_envs != 1 else ''}"
    if imitated:
        what += f" after imitating {imitated:,} steps"
    return Estimate(what, memory, seconds)


def check_train_size(cfg: Any, allow_large: bool, warm_start: bool = True) -> None:
    """Refuse a run past the memory limit or :data:`TIME_LIMIT_S` unless ``allow_large`` (one line, the estimate)."""
    import gymnasium as gym
    from gymnasium import spaces

    from synergy_gym.agents.model_checks import effective_env_kwargs
    from synergy_gym.errors import SynergyGymError

    env = gym.make(cfg.env_id, **cfg.env_kwargs)
    try:
        floats = int(spaces.flatdim(env.observation_space))
    finally:
        env.close()
    estimate = train_estimate(cfg, floats, effective_env_kwargs(cfg.env_id, cfg.env_kwargs), warm_start)
    limit, limit_text = memory_limit()
    over_memory, over_time = estimate.memory_bytes > limit, estimate.seconds > TIME_LIMIT_S
    if allow_large or not (over_memory or over_time):
        return
    memory = f"about {format_bytes(estimate.memory_bytes)} of memory" + (f" (over {limit_text})" if over_memory else "")
    time = f"about {format_duration(estimate.seconds)}" + (
        f" (over the limit of {format_duration(TIME_LIMIT_S)} for training)" if over_time else "")
    raise SynergyGymError(f"{estimate.what} would need {memory} and {time}; pass --allow-large to run it anyway")
