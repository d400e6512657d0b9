"""Imitation warm start: behaviour cloning of an env heuristic, then DAgger, before reinforcement learning.

With ``bc_steps`` > 0 (and ``bc_policy`` an env heuristic, default ``fifo+tune``) a
training run first fits the policy of an actor-critic model to the heuristic's
actions, and its value function to the discounted returns, on ``bc_steps`` steps of
the training environments in which the heuristic acts (:func:`behaviour_clone`). With
``dagger_rounds`` > 0 it then runs DAgger (Ross, Gordon and Bagnell, AISTATS 2011):
each round the *policy* acts (its most likely actions) for ``dagger_steps`` steps, the heuristic labels the states
the policy reached with its own actions, and the policy is fitted again on every state
so far – so it learns what the heuristic would do after its own mistakes, which plain
imitation never shows it (its errors compound over an episode's decisions). Reinforcement
learning then starts from there. See :class:`synergy_gym.agents.config.TrainConfig` for
the settings (``bc_epochs``, ``bc_learning_rate``, ``dagger_rounds``, ``dagger_steps``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from synergy_gym.agents.config import TrainConfig
from synergy_gym.baselines.env_heuristics import env_heuristic

if TYPE_CHECKING:  # pragma: no cover
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs


@dataclass
class _Samples:
    """Labelled states: the (normalised) observations, masks, the heuristic's actions and the discounted returns."""

    observations: list[dict[str, np.ndarray]] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    returns: list[np.ndarray] = field(default_factory=list)

    def batch(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        keys = self.observations[0]
        obs = {k: np.concatenate([o[k] for o in self.observations]) for k in keys}
        return obs, np.concatenate(self.masks), np.concatenate(self.actions), np.concatenate(self.returns)


def behaviour_clone(model: BaseAlgorithm, env: VecEnv, cfg: TrainConfig) -> dict[str, float]:
    """Warm start: fit the policy to the env heuristic ``bc_policy`` and the value function to the returns.

    Runs the heuristic (:mod:`synergy_gym.baselines.env_heuristics`, reading the raw,
    unnormalised observations and masks) for ``bc_steps`` steps in the training
    environments and does ``bc_epochs`` passes of supervised learning – cross-entropy on its
    actions (with the action masks for MaskablePPO) and squared error on the discounted
    (normalised) returns – with the policy's own optimiser at ``bc_learning_rate``; then
    ``dagger_rounds`` rounds of DAgger (module docstring). Returns the number of samples, the
    last minibatch's loss, the fraction of samples whose most likely action is the heuristic's
    and, after DAgger, the share of the policy's own actions in its last round that were the
    heuristic's (``dagger_agreement``).
    """
    if cfg.bc_policy is None:
        raise ValueError("behaviour cloning needs an env heuristic to imitate (bc_policy)")
    heuristic = env_heuristic(cfg.bc_policy, seed=cfg.seed)
    data = _Samples()
    obs = _dict_observation(env.reset())
    obs, _ = _collect(model, env, cfg, heuristic, obs, max(1, cfg.bc_steps // cfg.n_envs), data, policy_acts=False)
    stats = _fit(model, data, cfg)
    for _ in range(cfg.dagger_rounds):
        steps = max(1, (cfg.dagger_steps or cfg.bc_steps) // cfg.n_envs)
        obs, agreement = _collect(model, env, cfg, heuristic, obs, steps, data, policy_acts=True)
        stats = {**_fit(model, data, cfg), "dagger_agreement": agreement}
    return stats


def _collect(model: BaseAlgorithm, env: VecEnv, cfg: TrainConfig, heuristic: Any, obs: dict[str, np.ndarray],
             steps: int, data: _Samples, policy_acts: bool) -> tuple[dict[str, np.ndarray], float]:
    """Step the environments ``steps`` times from ``obs`` – the heuristic acting, or the policy (``policy_acts``) –
    adding every state with the heuristic's action and the discounted return from it; returns the last observation
    and the share of steps whose action was the heuristic's."""
    raw = getattr(env, "get_original_obs", None)  # VecNormalize: the observations before normalisation
    masks, labels, rewards, dones = [], [], [], []
    agree = 0
    for _ in range(steps):
        plain = raw() if raw is not None else obs
        mask = np.asarray(plain["action_mask"]) > 0
        label, _ = heuristic.predict(plain, action_masks=mask)
        label = np.asarray(label, dtype=np.int64).reshape(cfg.n_envs)
        action = _policy_actions(model, obs, mask, cfg) if policy_acts else label
        agree += int((action == label).sum())
        data.observations.append({k: v.copy() for k, v in obs.items()})
        masks.append(mask)
        labels.append(label)
        step_obs, reward, done, _ = env.step(action)
        obs = _dict_observation(step_obs)
        rewards.append(reward)
        dones.append(done)
    returns = np.zeros((steps, cfg.n_envs), dtype=np.float32)
    running: np.ndarray = np.zeros(cfg.n_envs, dtype=np.float32)
    for t in reversed(range(steps)):
        running = rewards[t] + cfg.gamma * running * (1.0 - dones[t])
        returns[t] = running
    data.masks.extend(masks)
    data.actions.extend(labels)
    data.returns.append(returns.reshape(-1))
    return obs, agree / (steps * cfg.n_envs)


def _policy_actions(model: BaseAlgorithm, obs: dict[str, np.ndarray], mask: np.ndarray, cfg: TrainConfig) -> np.ndarray:
    """The policy's most likely actions for a batch of (normalised) observations (within the masks for MaskablePPO):
    the states it reaches as it is evaluated."""
    policy: Any = model.policy
    if cfg.algo == "maskable_ppo":
        action, _ = policy.predict(obs, action_masks=mask, deterministic=True)
    else:
        action, _ = policy.predict(obs, deterministic=True)
    return np.asarray(action, dtype=np.int64).reshape(cfg.n_envs)


def _fit(model: BaseAlgorithm, data: _Samples, cfg: TrainConfig) -> dict[str, float]:
    """``bc_epochs`` passes of supervised learning on every sample so far; the samples, last loss and accuracy."""
    import torch

    batch_obs, batch_mask, batch_action, batch_ret = data.batch()
    policy: Any = model.policy  # an actor-critic policy (MaskablePPO's: get_distribution takes the masks)
    maskable = cfg.algo == "maskable_ppo"
    device = policy.device

    def distribution(idx):
        obs_t = {k: torch.as_tensor(v[idx], device=device) for k, v in batch_obs.items()}
        dist = policy.get_distribution(obs_t, action_masks=batch_mask[idx]) if maskable else policy.get_distribution(obs_t)
        return obs_t, dist

    rng = np.random.default_rng(cfg.seed + len(data.returns) - 1)  # the warm start: cfg.seed, as before DAgger
    n = batch_action.shape[0]
    rates = [group["lr"] for group in policy.optimizer.param_groups]
    for group in policy.optimizer.param_groups:
        group["lr"] = cfg.bc_learning_rate or cfg.learning_rate
    loss_value = float("nan")
    policy.set_training_mode(True)
    for _ in range(cfg.bc_epochs):
        for idx in np.array_split(rng.permutation(n), max(1, n // cfg.batch_size)):
            obs_t, dist = distribution(idx)
            values = policy.predict_values(obs_t).flatten()
            ret = torch.as_tensor(batch_ret[idx], device=device)
            target = torch.as_tensor(batch_action[idx], device=device)
            loss = -dist.log_prob(target).mean() + cfg.vf_coef * torch.nn.functional.mse_loss(values, ret)
            policy.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            policy.optimizer.step()
            loss_value = float(loss.detach())
    for group, rate in zip(policy.optimizer.param_groups, rates):
        group["lr"] = rate
    policy.set_training_mode(False)
    agree = 0
    with torch.no_grad():
        for idx in np.array_split(np.arange(n), max(1, n // 1024)):
            _, dist = distribution(idx)
            agree += int((dist.mode().cpu().numpy() == batch_action[idx]).sum())
    return {"bc_samples": n, "bc_final_loss": loss_value, "bc_accuracy": agree / n}


def _dict_observation(obs: VecEnvObs) -> dict[str, np.ndarray]:
    """The training environments' batch of observations: a dict of arrays (every Synergy env observes a Dict)."""
    if not isinstance(obs, dict):
        raise TypeError(f"behaviour cloning needs Dict observations, got {type(obs).__name__}")
    return obs
