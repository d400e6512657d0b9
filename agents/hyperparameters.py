"""Hyper-parameters that cannot work together, and settings that will have no effect.

:func:`check_hyperparameters` refuses a :class:`~synergy_gym.agents.config.TrainConfig` whose settings
cannot train as asked – each rule is a one-line :class:`~synergy_gym.errors.ConfigError` naming the
settings, their values and the rule:

* PPO (``maskable_ppo``, ``ppo``): a rollout holds ``n_steps`` × ``n_envs`` steps and the minibatches
  are cut from it, so ``batch_size`` may not exceed it; advantages are normalised per minibatch, so
  both the rollout and ``batch_size`` need at least 2 steps (Stable-Baselines3 asserts as much);
  ``clip_range`` must be below 1 (the probability ratio is clipped to [1 − clip_range, 1 + clip_range]);
* DQN: ``batch_size`` at most ``buffer_size`` (a batch is drawn from the replay buffer), and
  ``learning_starts``, ``train_freq`` and ``target_update_interval`` below ``timesteps`` (else the
  network, or its target, is never updated);
* the env kwarg ``invalid_action="raise"`` only with ``maskable_ppo``: the other algorithms sample
  masked actions too, and the first one would end the run.

The ranges of single settings (positive sizes, ``gamma`` and ``gae_lambda`` in (0, 1], …) are checked
by :meth:`TrainConfig.validate` itself. :func:`inert_settings` lists settings that are valid but will
do nothing in the run as configured (an ``eval_freq`` or ``checkpoint_freq`` beyond the run's steps, …);
``synergy-gym train`` shows them as ``note:`` lines.
"""

from __future__ import annotations

from typing import Any

from synergy_gym.errors import ConfigError

#: Algorithms whose minibatches are cut from one rollout (and normalise advantages per minibatch).
PPO_FAMILY = ("maskable_ppo", "ppo")
#: Algorithms that collect rollouts of ``n_steps`` × ``n_envs`` steps.
ON_POLICY = ("maskable_ppo", "ppo", "a2c")


def check_hyperparameters(cfg: Any) -> None:
    """Refuse settings that cannot work together (see the module); ``cfg`` is a ``TrainConfig``."""
    rollout = cfg.n_steps * cfg.n_envs
    if cfg.algo in PPO_FAMILY:
        if rollout < 2:
            raise ConfigError(f"n_steps × n_envs = {cfg.n_steps} × {cfg.n_envs} = {rollout}: a PPO rollout needs at least "
                              "2 steps (advantages are normalised over each minibatch)")
        if cfg.batch_size < 2:
            raise ConfigError(f"batch_size {cfg.batch_size}: PPO needs minibatches of at least 2 steps "
                              "(advantages are normalised over each minibatch)")
        if cfg.batch_size > rollout:
            raise ConfigError(f"batch_size {cfg.batch_size:,} is larger than a rollout, n_steps × n_envs = "
                              f"{cfg.n_steps:,} × {cfg.n_envs} = {rollout:,} steps, from which PPO's minibatches are cut; "
                              "lower batch_size or raise n_steps or n_envs")
        if cfg.clip_range >= 1:
            raise ConfigError(f"clip_range {cfg.clip_range!r} must be below 1 (PPO clips the probability ratio to "
                              "[1 − clip_range, 1 + clip_range])")
    if str(cfg.env_kwargs.get("invalid_action", "")).lower() == "raise" and cfg.algo != "maskable_ppo":
        raise ConfigError(f"env_kwargs invalid_action='raise' needs action masking (maskable_ppo): {cfg.algo} also "
                          "samples masked actions, and the first would end the run; use invalid_action='fallback' "
                          "(the default) or algo maskable_ppo")
    if cfg.algo == "dqn":
        if cfg.batch_size > cfg.buffer_size:
            raise ConfigError(f"batch_size {cfg.batch_size:,} is larger than the replay buffer, buffer_size "
                              f"{cfg.buffer_size:,}, that DQN's batches are drawn from")
        for name in ("learning_starts", "train_freq", "target_update_interval"):
            if getattr(cfg, name) >= cfg.timesteps:
                what = "its target network" if name == "target_update_interval" else "the network"
                raise ConfigError(f"{name} {getattr(cfg, name):,} is not below timesteps {cfg.timesteps:,}: "
                                  f"DQN would never update {what}")


def inert_settings(cfg: Any) -> list[str]:
    """Settings of ``cfg`` that are valid but will have no effect in the run as configured (one line each)."""
    notes = []
    if cfg.eval_freq > cfg.timesteps:
        notes.append(f"eval_freq {cfg.eval_freq:,} is above timesteps {cfg.timesteps:,}: only the final evaluation runs")
    if cfg.stop_on_stall_after is not None and cfg.stop_on_stall_after >= cfg.timesteps:
        notes.append(f"stop_on_stall_after {cfg.stop_on_stall_after:,} is not below timesteps {cfg.timesteps:,}: "
                     "training never stops early")
    rollout = cfg.n_steps * cfg.n_envs
    if cfg.algo in ON_POLICY and cfg.timesteps < rollout:
        notes.append(f"timesteps {cfg.timesteps:,} is less than one rollout (n_steps × n_envs = {rollout:,}): "
                     f"training runs one whole rollout, {rollout:,} steps")
    if cfg.checkpoint_freq and cfg.checkpoint_freq >= cfg.timesteps:
        notes.append(f"checkpoint_freq {cfg.checkpoint_freq:,} is not below timesteps {cfg.timesteps:,}: "
                     "no periodic checkpoint is saved")
    if cfg.dagger_rounds and not cfg.imitates:
        notes.append(f"dagger_rounds {cfg.dagger_rounds} has no effect without a warm start (bc_steps and bc_policy)")
    if cfg.target_kl is not None and cfg.algo not in PPO_FAMILY:
        notes.append(f"target_kl applies to PPO only, not {cfg.algo}")
    return notes
