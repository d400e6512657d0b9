"""Simple policies for the Gymnasium environment, with Stable-Baselines3's ``predict`` signature.

``synergy_gym.evaluate`` scores them exactly like trained models:

* :class:`ConstantPolicy` – always the same action; action 0 (fair share)
  reproduces ``<order>+fair`` through the environment, action 1 (best-case
  demand) reproduces ``<order>+tune``;
* :class:`RandomMaskedPolicy` – a uniformly random valid action.

``baselines.env_policies`` names the allocation baselines built from them.
Observations may be single or batched (as from a vector env); the action mask
comes from ``action_masks`` or else ``obs["action_mask"]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from synergy_gym.env import DEMAND_ACTION, FAIR_ACTION


def _batch_size(obs: Any) -> int | None:
    mask = obs["action_mask"] if isinstance(obs, dict) else np.asarray(obs)
    mask = np.asarray(mask)
    return mask.shape[0] if mask.ndim == 2 else None


class ConstantPolicy:
    """Always the same action."""

    def __init__(self, action: int, name: str) -> None:
        self.action = int(action)
        self.name = name

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True, action_masks=None):
        n = _batch_size(observation)
        if n is None:
            return np.array(self.action), None
        return np.full(n, self.action), None


def fair_share_policy() -> ConstantPolicy:
    """Always the fair share: ``<order>+fair`` through the environment."""
    return ConstantPolicy(FAIR_ACTION, "fair")


def tune_policy() -> ConstantPolicy:
    """Always the best-case demand: ``<order>+tune`` through the environment."""
    return ConstantPolicy(DEMAND_ACTION, "tune")


class RandomMaskedPolicy:
    """A uniformly random valid action (seeded)."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True, action_masks=None):
        mask = np.asarray(action_masks if action_masks is not None else observation["action_mask"]) > 0
        if mask.ndim == 1:
            valid = np.flatnonzero(mask)
            return np.array(valid[self.rng.integers(valid.size)]), None
        return np.array([row[self.rng.integers(row.size)] for row in map(np.flatnonzero, mask)]), None


def env_baselines(seed: int | None = 0) -> dict[str, Any]:
    """The allocation baselines the environment can express, by name: fair, tune, random."""
    return {"fair": fair_share_policy(), "tune": tune_policy(), "random": RandomMaskedPolicy(seed)}
