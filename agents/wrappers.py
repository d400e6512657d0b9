"""A trained Stable-Baselines3 model as a policy for ``synergy_gym.evaluate``.

No action wrapper is needed for training: the environment accepts every action
in its ``Discrete`` space (with ``invalid_action="fallback"``, its default, a
masked action falls back to a valid one and counts in
``info["invalid_action"]``). MaskablePPO reads :meth:`SynergyEnv.action_masks`;
PPO, A2C and DQN learn from the fallback.
"""

from __future__ import annotations

from typing import Any

from synergy_gym.agents.heuristic_hint import env_observation_space, hint_heuristic, model_hint, with_hint


class AgentPolicy:
    """A trained model as a policy for ``synergy_gym.evaluate`` (SB3's ``predict`` signature).

    Adds the heuristic's next action to the observations of a model trained with ``hint_policy``,
    normalises them with the run's ``VecNormalize`` statistics (if any) and passes the action masks
    to models whose ``predict`` takes them
    (MaskablePPO). The action is returned as the model chose it: one outside
    the mask (from a model without masking) is the environment's to resolve,
    exactly as in training. :meth:`batch_predictor` decides many observations in one
    forward pass, with the same actions (:mod:`synergy_gym.agents.batched_policy`).
    """

    def __init__(self, model: Any, vec_normalize: Any | None, name: str = "agent") -> None:
        self.model = model
        self.vec_normalize = vec_normalize
        self.name = name
        self.masked = "action_masks" in model.predict.__code__.co_varnames
        hint = model_hint(model)
        #: The env heuristic whose next action the model observes (``hint_policy``), or None.
        self.hint = hint_heuristic(hint) if hint is not None else None

    @property
    def observation_space(self) -> Any:
        """The observations the model decides on, as the environment gives them (without the hint key it adds)."""
        return env_observation_space(self.model)

    @property
    def action_space(self) -> Any:
        """The actions the model chooses among (the environment's ``Discrete`` space it was trained in)."""
        return self.model.action_space

    def observe(self, observation, action_masks=None):
        """What the model observes: ``observation`` (one or a batch) with its heuristic's action, if it has one
        (:mod:`synergy_gym.agents.heuristic_hint`), normalised with the run's statistics, if any."""
        if self.hint is not None:
            observation = with_hint(self.hint, observation, action_masks)
        return self.vec_normalize.normalize_obs(observation) if self.vec_normalize is not None else observation

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True, action_masks=None):
        obs = self.observe(observation, action_masks)
        if self.masked:
            return self.model.predict(obs, state=state, episode_start=episode_start, deterministic=deterministic,
                                      action_masks=action_masks)
        return self.model.predict(obs, state=state, episode_start=episode_start, deterministic=deterministic)

    def batch_predictor(self, deterministic: bool = True):
        """Decisions for a batch of observations (``synergy_gym.evaluate``'s episodes side by side); None where only
        one at a time is exact (:func:`synergy_gym.agents.batched_policy.batch_predictor`)."""
        from synergy_gym.agents.batched_policy import batch_predictor

        return batch_predictor(self, deterministic)
