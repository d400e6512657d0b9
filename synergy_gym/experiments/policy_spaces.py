"""Whether a policy decides in the environment's spaces, checked before an episode runs.

A trained network depends on the kinds, shapes and sizes of its observation and action spaces
(:func:`spaces_parts`), not on their bounds, so a model can be evaluated on another load or cluster of the same
shape. A policy that states the spaces it was made for – ``observation_space`` and ``action_space``, as SB3's
models and :class:`synergy_gym.agents.wrappers.AgentPolicy` do – gets one line naming the first difference from
the environment's (a pretrained ``Synergy-small-v0`` policy on ``preemptive=True``, say), instead of an error from
deep inside the model after the episode has started.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from synergy_gym.errors import ConfigError


def space_parts(space: gym.Space, prefix: str = "") -> dict[str, str]:
    """Each part of a (Dict) space by name, by kind and shape: ``{"slots": "Box(352,)", "action_mask": "Box(161,)",
    …}``; a space that is no Dict is the one part ``"observation"``."""
    if isinstance(space, spaces.Dict):
        parts: dict[str, str] = {}
        for key, sub in space.spaces.items():
            parts.update(space_parts(sub, f"{prefix}{key}."))
        return parts
    if isinstance(space, spaces.Discrete):
        desc = f"Discrete({int(space.n)})"
    else:
        desc = f"{type(space).__name__}{tuple(space.shape) if space.shape is not None else ''}"
    return {prefix[:-1] if prefix else "observation": desc}


def spaces_parts(observation_space: gym.Space, action_space: gym.Space) -> dict[str, str]:
    """:func:`space_parts` of an observation space, plus ``"action"``: the action space's."""
    return {**space_parts(observation_space), "action": space_parts(action_space)["observation"]}


def parts_difference(policy: dict[str, str], env: dict[str, str]) -> str | None:
    """The first difference between a policy's :func:`spaces_parts` and an environment's, in words, the action first
    (``action: Discrete(161), the environment's Discrete(353)``); None where they are alike."""
    for key in sorted(policy.keys() | env.keys(), key=lambda k: (k != "action", k)):
        if key not in env:
            return f"observation key {key!r}, which the environment's observations lack"
        if key not in policy:
            return f"observation key {key!r}, which the policy was not made for"
        if policy[key] != env[key]:
            return f"{key}: {policy[key]}, the environment's {env[key]}"
    return None


def check_policy_spaces(policy: Any, env: gym.Env, label: str) -> None:
    """One line (:class:`~synergy_gym.errors.ConfigError`) where ``policy`` states an observation and action space
    that differ from ``env``'s; nothing for a policy that states none (the env heuristics, a plain function)."""
    observation_space, action_space = (getattr(policy, kind, None) for kind in ("observation_space", "action_space"))
    if not (isinstance(observation_space, gym.Space) and isinstance(action_space, gym.Space)):
        return
    difference = parts_difference(spaces_parts(observation_space, action_space),
                                  spaces_parts(env.observation_space, env.action_space))
    if difference is None:
        return
    lacked = "environment's observations lack" in difference  # a key that a wrapper of the model may add
    wrapper = (" – or in the wrapper it was trained in, which adds that key (synergy_gym.agents.wrappers.AgentPolicy "
               "adds the 'hint' of a model trained with hint_policy)") if lacked else ""
    raise ConfigError(f"evaluate(): {label} was made for other spaces than this environment's ({difference}); "
                      f"evaluate it with the env id and kwargs it was trained on{wrapper}")


def checked_maker(policy: Any, make: Callable[[], gym.Env], label: str) -> Callable[[], gym.Env]:
    """``make`` (a function making the environment), checking each environment it makes against ``policy``'s spaces
    (:func:`check_policy_spaces`) before it is used."""
    def make_checked() -> gym.Env:
        env = make()
        try:
            check_policy_spaces(policy, env, label)
        except ConfigError:
            env.close()
            raise
        return env

    return make_checked
