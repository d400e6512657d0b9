"""An agent that starts exactly at an env heuristic: the heuristic's next action as an observation, and a logit bias.

Imitation brings a policy near its teacher but not onto it: in the preemptive mode, with about
1,900 decisions an episode, the imitated ``tetris+greedy`` stays 2–5 % behind the heuristic
(docs/training.md), and PPO then has to win back the imitation's errors before it can find a
gain. With ``hint_policy`` (a :class:`~synergy_gym.agents.config.TrainConfig` setting, per-slot
action head only) the policy sees the heuristic's choice itself:

* :class:`HeuristicHint` (a Gymnasium wrapper on each training env) adds the observation key
  ``"hint"``: a one-hot vector over the actions, 1 at the action the env heuristic ``hint_policy``
  takes in this state (computed from the observation and its mask alone, as the heuristic always
  decides: the agent has no information the heuristic lacks);
* the per-slot head (:class:`~synergy_gym.agents.slot_policy.SlotScorer`) adds ``hint_weight`` ×
  that vector to its logits; ``hint_weight`` is a learnt parameter that starts at the config's value.

At the start the deterministic policy is the heuristic, exactly (its learnt logits start near 0), and
the stochastic one departs from it with a probability set by ``hint_weight``; PPO learns where to depart.
A model trained so keeps ``hint_policy`` in its policy settings, and
:class:`~synergy_gym.agents.wrappers.AgentPolicy` computes the hint again for every observation it is
given (:func:`with_hint`), so that ``evaluate``, ``benchmark`` and the validation in training run the
environment as it is. :func:`departures` counts a policy's departures in one episode
(``python -m synergy_gym.agents.hint_departures`` for run folders).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from synergy_gym.errors import ConfigError

#: The observation key of the heuristic's action (one-hot over the actions).
HINT_KEY = "hint"


def hint_heuristic(name: str) -> Any:
    """The env heuristic ``name`` as the hint's source; refused for one that draws random numbers (``random``)."""
    from synergy_gym.baselines.env_heuristics import NAMED_HEURISTICS, RandomValid, env_heuristic

    usable = {n: h for n in NAMED_HEURISTICS if not isinstance(h := env_heuristic(n), RandomValid)}
    if not isinstance(name, str) or name not in usable:
        raise ConfigError(f"hint_policy must be a deterministic env heuristic ({', '.join(usable)}), got {name!r}")
    return usable[name]


def with_hint(heuristic: Any, observation: dict[str, np.ndarray], action_masks: np.ndarray | None = None
              ) -> dict[str, np.ndarray]:
    """``observation`` (one, or a batch with a leading dimension) with :data:`HINT_KEY` added: the one-hot action
    ``heuristic`` takes there under ``action_masks`` (default: the observation's ``action_mask``)."""
    mask = np.asarray(action_masks if action_masks is not None else observation["action_mask"])
    actions, _ = heuristic.predict(observation, action_masks=mask)
    hint = np.zeros(mask.shape, dtype=np.float32)
    if mask.ndim == 1:
        hint[int(actions)] = 1.0
    else:
        hint[np.arange(mask.shape[0]), np.asarray(actions, dtype=np.int64)] = 1.0
    return {**observation, HINT_KEY: hint}


class HeuristicHint(gym.ObservationWrapper):
    """Adds :data:`HINT_KEY`, the env heuristic ``policy``'s next action (one-hot), to every observation."""

    def __init__(self, env: gym.Env, policy: str) -> None:
        super().__init__(env)
        self.heuristic = hint_heuristic(policy)
        inner = env.observation_space
        if not isinstance(inner, spaces.Dict) or HINT_KEY in inner.spaces or "action_mask" not in inner.spaces:
            raise ConfigError(f"hint_policy needs a Synergy-* environment's Dict observation, got {inner}")
        n = int(inner["action_mask"].shape[0])  # type: ignore[index]
        self.observation_space = spaces.Dict({**inner.spaces, HINT_KEY: spaces.Box(0.0, 1.0, (n,), np.float32)})

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return with_hint(self.heuristic, observation)


def model_hint(model: Any) -> str | None:
    """The ``hint_policy`` a model was trained with (its policy's setting), None for a model without one."""
    kwargs = getattr(model, "policy_kwargs", None) or {}
    return kwargs.get("hint_policy") or None


def env_observation_space(model: Any) -> gym.Space:
    """The observations ``model`` decides on as the environment gives them: its own observation space, less the
    heuristic's action (:data:`HINT_KEY`) that a model trained with ``hint_policy`` observes and
    :class:`~synergy_gym.agents.wrappers.AgentPolicy` adds."""
    space = model.observation_space
    if model_hint(model) is not None and isinstance(space, spaces.Dict):
        return spaces.Dict({key: sub for key, sub in space.spaces.items() if key != HINT_KEY})
    return space


class DepartureCount(NamedTuple):
    """What :func:`departures` counted in one episode."""

    departed: int  # decisions that were not the heuristic's in the same state
    decisions: int
    mean_jct_h: float
    kinds: Counter[str]  # the departures by what the policy did where the heuristic did something else


def departures(policy: Any, heuristic: Any, env: gym.Env, seed: int, deterministic: bool = True) -> DepartureCount:
    """One episode of ``policy`` (``predict`` as SB3's: an :class:`~synergy_gym.agents.wrappers.AgentPolicy`, say) on
    the workload of ``seed`` in ``env``, run by :func:`synergy_gym.evaluate` (a stochastic one with torch seeded by
    ``seed``): how many of its decisions were not ``heuristic``'s in the same state, of how many, the episode's
    mean JCT in hours, and the departures by kind (``"admit for preempt"``: the policy admitted a job where the
    heuristic preempted one; the kinds of :meth:`synergy_gym.env.masks.ActionLayout.kind`)."""
    from synergy_gym.experiments.evaluation import evaluate

    counted = _Departures(policy, heuristic, env.unwrapped.layout)  # type: ignore[attr-defined]
    row = evaluate(counted, lambda: env, seeds=[seed], name="policy", deterministic=deterministic).iloc[0]
    return DepartureCount(sum(counted.kinds.values()), int(row["decisions"]), float(row["mean_jct_h"]), counted.kinds)


class _Departures:
    """``policy``'s decisions, counting by kind those that are not ``heuristic``'s in the same state."""

    def __init__(self, policy: Any, heuristic: Any, layout: Any) -> None:
        self.policy, self.heuristic, self.layout = policy, heuristic, layout
        self.kinds: Counter[str] = Counter()

    def predict(self, observation: dict[str, np.ndarray], deterministic: bool = True,
                action_masks: np.ndarray | None = None) -> tuple[Any, None]:
        action, _ = self.policy.predict(observation, deterministic=deterministic, action_masks=action_masks)
        hint = int(self.heuristic.predict(observation, action_masks=action_masks)[0])
        if int(action) != hint:
            self.kinds[f"{self.layout.kind(int(action))} for {self.layout.kind(hint)}"] += 1
        return action, None
