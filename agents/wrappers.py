"""Adapters between Stable-Baselines3 algorithms and the environment's action masks.

MaskablePPO (sb3-contrib) honours :meth:`SynergyEnv.action_masks`. PPO, A2C and
DQN cannot: :class:`InvalidActionToFair` maps an action the mask forbids to
action 0 (the fair share, always valid) and counts it in
``info["invalid_action"]``. :class:`AgentPolicy` does the same at evaluation
time and applies the run's observation normalisation.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from synergy_gym.env import FAIR_ACTION


class InvalidActionToFair(gym.Wrapper):
    """Replace masked actions by the fair share (for algorithms without masking)."""

    def step(self, action):
        a = int(np.asarray(action).item())
        invalid = not self.env.unwrapped.action_masks()[a]
        obs, reward, terminated, truncated, info = self.env.step(FAIR_ACTION if invalid else a)
        info["invalid_action"] = invalid
        return obs, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        return self.env.unwrapped.action_masks()


class AgentPolicy:
    """A trained model as a policy for ``synergy_gym.evaluate``.

    Normalises observations with the run's ``VecNormalize`` statistics (if any),
    passes action masks to models that take them and maps a forbidden action of
    the others to the fair share, as in training.
    """

    def __init__(self, model: Any, vec_normalize: Any | None, name: str = "agent") -> None:
        self.model = model
        self.vec_normalize = vec_normalize
        self.name = name
        self.masked = "action_masks" in model.predict.__code__.co_varnames

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True, action_masks=None):
        obs = self.vec_normalize.normalize_obs(observation) if self.vec_normalize is not None else observation
        if self.masked:
            action, state = self.model.predict(obs, deterministic=deterministic, action_masks=action_masks)
        else:
            action, state = self.model.predict(obs, deterministic=deterministic)
        if action_masks is not None and not np.asarray(action_masks)[int(np.asarray(action).item())]:
            action = np.array(FAIR_ACTION)
        return action, state
