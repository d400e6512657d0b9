"""Imitation warm start: behaviour cloning of an env heuristic before reinforcement learning.

With ``bc_steps`` > 0 (and ``bc_policy`` an env heuristic, default ``fifo+tune``) a
training run first fits the policy of an actor-critic model to the heuristic's
actions, and its value function to the heuristic's discounted returns, on
``bc_steps`` steps of the training environments (:func:`behaviour_clone`); reinforcement
learning then starts from there. See :class:`synergy_gym.agents.config.TrainConfig`
for the settings (``bc_epochs``, ``bc_learning_rate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from synergy_gym.agents.config import TrainConfig
from synergy_gym.baselines.env_heuristics import env_heuristics

if TYPE_CHECKING:  # pragma: no cover
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs


def behaviour_clone(model: BaseAlgorithm, env: VecEnv, cfg: TrainConfig) -> dict[str, float]:
    """Warm start: fit the policy to the env heuristic ``bc_policy`` and the value function to its returns.

    Runs the heuristic (:mod:`synergy_gym.baselines.env_heuristics`, reading the raw,
    unnormalised observations and masks) for ``bc_steps`` steps in the training
    environments, then does ``bc_epochs`` passes of supervised learning –
    cross-entropy on its actions (with the action masks for MaskablePPO) and
    squared error on the discounted (normalised) returns – with the policy's own
    optimiser at ``bc_learning_rate``. Returns the number of samples, the last minibatch's loss and the
    fraction of samples whose most likely action is the heuristic's.
    """
    import torch

    if cfg.bc_policy is None:
        raise ValueError("behaviour cloning needs an env heuristic to imitate (bc_policy)")
    heuristic = env_heuristics(seed=cfg.seed)[cfg.bc_policy]
    steps = max(1, cfg.bc_steps // cfg.n_envs)
    raw = getattr(env, "get_original_obs", None)  # VecNormalize: the observations before normalisation
    obs = _dict_observation(env.reset())
    observations, masks, actions, rewards, dones = [], [], [], [], []
    for _ in range(steps):
        plain = raw() if raw is not None else obs
        mask = np.asarray(plain["action_mask"]) > 0
        action, _ = heuristic.predict(plain, action_masks=mask)
        observations.append({k: v.copy() for k, v in obs.items()})
        masks.append(mask)
        actions.append(np.asarray(action, dtype=np.int64).reshape(cfg.n_envs))
        step_obs, reward, done, _ = env.step(actions[-1])
        obs = _dict_observation(step_obs)
        rewards.append(reward)
        dones.append(done)
    returns = np.zeros((steps, cfg.n_envs), dtype=np.float32)
    running: np.ndarray = np.zeros(cfg.n_envs, dtype=np.float32)
    for t in reversed(range(steps)):
        running = rewards[t] + cfg.gamma * running * (1.0 - dones[t])
        returns[t] = running
    batch_obs = {k: np.concatenate([o[k] for o in observations]) for k in observations[0]}
    batch_mask = np.concatenate(masks)
    batch_action = np.concatenate(actions)
    batch_ret = returns.reshape(-1)
    policy: Any = model.policy  # an actor-critic policy (MaskablePPO's: get_distribution takes the masks)
    maskable = cfg.algo == "maskable_ppo"
    device = policy.device

    def distribution(idx):
        obs_t = {k: torch.as_tensor(v[idx], device=device) for k, v in batch_obs.items()}
        dist = policy.get_distribution(obs_t, action_masks=batch_mask[idx]) if maskable else policy.get_distribution(obs_t)
        return obs_t, dist

    rng = np.random.default_rng(cfg.seed)
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
