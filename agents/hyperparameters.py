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
* ``hint_policy`` only with the per-slot action head, and a deterministic env heuristic; ``hint_credit``
  ``"departures"`` only with ``hint_policy``;
* the env kwarg ``invalid_action="raise"`` only with ``maskable_ppo``: the other algorithms sample
  masked actions too, and the first one would end the run.

The ranges of single settings (positive sizes, ``gamma`` and ``gae_lambda`` in (0, 1], …) are checked
by :meth:`TrainConfig.validate` itself. :func:`inert_settings` lists settings that are valid but will
do nothing in the run as configured (an ``eval_freq`` or ``checkpoint_freq`` beyond the run's steps, a
setting of another algorithm changed from its default – ``n_epochs`` or ``clip_range`` with ``a2c`` –,
``relative_to`` with the absolute reward, …); ``synergy-gym train`` shows them as ``note:`` lines.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from synergy_gym.errors import ConfigError
from synergy_gym.sim.validation import is_number

#: Algorithms whose minibatches are cut from one rollout (and normalise advantages per minibatch).
PPO_FAMILY = ("maskable_ppo", "ppo")
#: Algorithms that collect rollouts of ``n_steps`` × ``n_envs`` steps.
ON_POLICY = ("maskable_ppo", "ppo", "a2c")
#: Settings only some algorithms train with (every one uses learning_rate, gamma and max_grad_norm): the algorithms,
#: and how a note names them.
ALGORITHM_SETTINGS: dict[str, tuple[tuple[str, ...], str]] = {
    **{name: (ON_POLICY, "the actor-critic algorithms") for name in ("n_steps", "gae_lambda", "ent_coef", "vf_coef")},
    **{name: (PPO_FAMILY, "PPO") for name in ("n_epochs", "clip_range", "target_kl")},
    "batch_size": ((*PPO_FAMILY, "dqn"), "PPO, DQN and the warm start"),
    **{name: (("dqn",), "DQN") for name in ("buffer_size", "learning_starts", "exploration_fraction",
                                             "target_update_interval", "train_freq")},
}


#: The largest ``hint_weight``: far above any logit difference the network learns (at 20 the stochastic policy
#: departs from the heuristic about once in 10⁷ decisions), far below float32's range.
MAX_HINT_WEIGHT = 1_000
#: ``hint_credit``: which steps PPO's policy loss counts (every one, or those that departed from the hint).
HINT_CREDITS: tuple[str, ...] = ("all", "departures")


def check_number(name: str, value: Any) -> None:
    """Refuse a ``value`` of setting ``name`` that is not a finite number."""
    if not is_number(value) or (isinstance(value, float) and not math.isfinite(value)):  # (an int is finite)
        raise ConfigError(f"{name} must be a finite number, got {value!r}")


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
    if isinstance(cfg.hint_policy, str) and cfg.hint_policy.lower() == "none":
        cfg.hint_policy = None
    if cfg.hint_policy is not None:
        from synergy_gym.agents.heuristic_hint import hint_heuristic

        hint_heuristic(cfg.hint_policy)
        if cfg.action_head != "per_slot":
            raise ConfigError(f"hint_policy {cfg.hint_policy!r} needs action_head 'per_slot' (its logits take the hint), "
                              f"got {cfg.action_head!r}")
    if cfg.hint_credit not in HINT_CREDITS:
        raise ConfigError(f"hint_credit must be one of {', '.join(map(repr, HINT_CREDITS))}, got {cfg.hint_credit!r}")
    if cfg.hint_credit == "departures" and cfg.hint_policy is None:
        raise ConfigError("hint_credit 'departures' needs a hint_policy (its departures are the steps PPO learns from)")
    check_number("hint_weight", cfg.hint_weight)
    if not 0 <= cfg.hint_weight <= MAX_HINT_WEIGHT:  # negative: anything but the heuristic; huge: inf in float32
        raise ConfigError(f"hint_weight must be from 0 to {MAX_HINT_WEIGHT:,} (the hint's weight in the logits), "
                          f"got {cfg.hint_weight!r}")
    if cfg.algo == "dqn":
        if cfg.batch_size > cfg.buffer_size:
            raise ConfigError(f"batch_size {cfg.batch_size:,} is larger than the replay buffer, buffer_size "
                              f"{cfg.buffer_size:,}, that DQN's batches are drawn from")
        for name in ("learning_starts", "train_freq", "target_update_interval"):
            if getattr(cfg, name) >= cfg.timesteps:
                what = "its target network" if name == "target_update_interval" else "the network"
                raise ConfigError(f"{name} {getattr(cfg, name):,} is not below timesteps {cfg.timesteps:,}: "
                                  f"DQN would never update {what}")


def inert_settings(cfg: Any, start: int = 0) -> list[str]:
    """Settings of ``cfg`` that are valid but will have no effect in the run as configured (one line each); ``start``:
    the step a resumed run continues from."""
    notes = []
    if cfg.eval_freq > cfg.timesteps:
        notes.append(f"eval_freq {cfg.eval_freq:,} is above timesteps {cfg.timesteps:,}: only the final evaluation runs")
    if cfg.stop_on_stall_after is not None and cfg.stop_on_stall_after >= cfg.timesteps:
        notes.append(f"stop_on_stall_after {cfg.stop_on_stall_after:,} is not below timesteps {cfg.timesteps:,}: "
                     "training never stops early")
    rollout = cfg.n_steps * cfg.n_envs
    if cfg.algo in ON_POLICY and 0 < cfg.timesteps - start < rollout:
        left = f"timesteps {cfg.timesteps:,}" if not start else (
            f"the {cfg.timesteps - start:,} steps left to timesteps {cfg.timesteps:,} (resumed at step {start:,})")
        notes.append(f"{left} {'is' if not start else 'are'} less than one rollout (n_steps × n_envs = {rollout:,}): "
                     f"training runs one whole rollout, {rollout:,} steps" + (f", to step {start + rollout:,}" * bool(start)))
    if cfg.checkpoint_freq and cfg.checkpoint_freq >= cfg.timesteps:
        notes.append(f"checkpoint_freq {cfg.checkpoint_freq:,} is not below timesteps {cfg.timesteps:,}: "
                     "no periodic checkpoint is saved")
    defaults = {f.name: f.default for f in fields(cfg)}
    if cfg.dagger_rounds and not cfg.imitates:
        notes.append(f"dagger_rounds {cfg.dagger_rounds} has no effect without a warm start (bc_steps and bc_policy)")
    if not cfg.imitates:
        why = "bc_steps is 0 (--bc-steps N imitates for N steps)" if not cfg.bc_steps else "bc_policy is none"
        for name in ("bc_policy", "bc_epochs", "bc_learning_rate"):
            value = getattr(cfg, name)
            if value is not None and value != defaults[name]:
                notes.append(f"{name} {value!r} has no effect without a warm start: {why}")
    if not cfg.dagger_rounds and cfg.dagger_steps != defaults["dagger_steps"]:
        notes.append(f"dagger_steps {cfg.dagger_steps:,} has no effect with dagger_rounds 0")
    for name, (algos, who) in ALGORITHM_SETTINGS.items():
        used = cfg.algo in algos or (name == "batch_size" and cfg.imitates)  # the warm start's minibatches
        if not used and getattr(cfg, name) != defaults[name]:
            notes.append(f"{name} applies to {who} only, not {cfg.algo}")
    if cfg.hint_policy is None and cfg.hint_weight != defaults["hint_weight"]:
        notes.append(f"hint_weight {cfg.hint_weight!r} has no effect without hint_policy")
    if cfg.reward != "heuristic_relative" and cfg.relative_to != defaults["relative_to"]:
        notes.append(f"relative_to {cfg.relative_to!r} has no effect with reward {cfg.reward!r}: only the reward "
                     "heuristic_relative compares with a heuristic")
    return notes
