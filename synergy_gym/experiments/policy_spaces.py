"""Whether a policy decides in the environment's spaces, checked before an episode runs.

A policy that states the spaces it was made for – ``observation_space`` and ``action_space``, as SB3's models
and :class:`synergy_gym.agents.wrappers.AgentPolicy` do – gets one line naming the first difference from the
environment's (a pretrained ``Synergy-small-v0`` policy on ``preemptive=True``, say), instead of an error from deep
inside the model after the episode has started. Only shapes are compared: bounds may differ between settings
that leave a model's inputs alike.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from synergy_gym.errors import ConfigError


def space_difference(policy_space: gym.Space, env_space: gym.Space) -> str | None:
    """The first difference in shape between two spaces, in words (``'queue' of shape (32, 12), the environment's
    (8, 12)``); None where a policy made for ``policy_space`` can decide in ``env_space``."""
    if type(policy_space) is not type(env_space):
        return f"{policy_space} where the environment has {env_space}"
    if isinstance(policy_space, gym.spaces.Discrete) and isinstance(env_space, gym.spaces.Discrete):
        same = policy_space.n == env_space.n
        return None if same else f"Discrete({policy_space.n}), the environment's Discrete({env_space.n})"
    if isinstance(policy_space, gym.spaces.Dict) and isinstance(env_space, gym.spaces.Dict):
        missing = [key for key in policy_space.spaces if key not in env_space.spaces]
        if missing:
            return f"key {missing[0]!r}, which the environment's observations lack"
        for key, space in policy_space.spaces.items():
            difference = space_difference(space, env_space.spaces[key])
            if difference is not None:
                return f"{key!r}: {difference}"
        return None
    if policy_space.shape != env_space.shape:
        return f"shape {policy_space.shape}, the environment's {env_space.shape}"
    return None


def check_policy_spaces(policy: Any, env: gym.Env, label: str) -> None:
    """One line (:class:`~synergy_gym.errors.ConfigError`) where ``policy`` states an observation or action space
    that differs from ``env``'s; nothing for a policy that states none (the env heuristics, a plain function)."""
    for kind in ("action_space", "observation_space"):
        space = getattr(policy, kind, None)
        if not isinstance(space, gym.Space):
            continue
        difference = space_difference(space, getattr(env, kind))
        if difference is not None:
            raise ConfigError(f"evaluate(): {label} was made for another {kind.replace('_', ' ')} than this "
                              f"environment's ({difference}); evaluate it with the env id and kwargs it was trained on")
