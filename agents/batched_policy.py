"""A model's deterministic decisions for many observations at once: one forward pass a batch.

:func:`synergy_gym.evaluate` runs the episodes of its seeds side by side when a policy
offers ``batch_predictor(deterministic)`` (:class:`~synergy_gym.agents.wrappers.AgentPolicy`
does, through :func:`batch_predictor`): each round it stacks the observations of the
episodes still running and asks for all their actions in one call. The model is put in
evaluation mode once; each call normalises the whole batch with the ``VecNormalize``
statistics, runs the policy network once under ``torch.no_grad()``, masks the logits
(MaskablePPO: invalid actions' logits set to sb3-contrib's −1e8) and takes the most
probable action, as Stable-Baselines3's ``predict(..., deterministic=True)`` does
(``argmax`` of the softmax of the masked, normalised logits).

Exactly the actions of one observation at a time. The normalisation is elementwise and
gives the same bits for a batch as for one row; the network's matrix products do not: on
the CPU a batch of rows is multiplied by other kernels than one row, and a logit can differ
in its last bits (measured: at most 3e-6 on logits up to 21, one or two units in the last
place). An argmax can only change where the two best valid logits are that close, so a row
whose two best valid logits are within :data:`TIE_TOLERANCE` × (1 + its largest |logit|) –
a thousand times the differences measured – is decided again one observation at a time,
by the model's own ``predict``. Per-seed JCTs are therefore bit-identical to
one-at-a-time evaluation (``tests/agents/test_batched_eval.py``).

Batched: deterministic decisions of actor-critic models (MaskablePPO, PPO, A2C, with either
action head) on a ``Discrete`` action space. Anything else (DQN, sampled actions) gets
``None`` and runs one observation at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: A row whose two best valid logits are within this × (1 + its largest |logit|) is decided one observation at a time.
TIE_TOLERANCE = 1e-4
#: sb3-contrib's logit for a masked action (``MaskableCategorical.apply_masking``).
MASKED_LOGIT = -1e8

#: ``predict(observations, action_masks) -> actions``: stacked observations (one row per episode), masks ``(rows, n)``.
BatchPredict = Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray]


def batch_predictor(agent: Any, deterministic: bool) -> BatchPredict | None:
    """The decisions of ``agent`` (an :class:`~synergy_gym.agents.wrappers.AgentPolicy`) for a batch of observations;
    None where only one at a time is exact (see the module)."""
    from gymnasium import spaces
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from stable_baselines3.common.policies import ActorCriticPolicy

    policy = agent.model.policy
    if not deterministic or not isinstance(policy, (ActorCriticPolicy, MaskableActorCriticPolicy)):
        return None
    if not isinstance(policy.action_space, spaces.Discrete) or int(policy.action_space.n) < 2:
        return None
    policy.set_training_mode(False)  # once: nothing trains during an evaluation
    return _Predictor(agent, policy)


class _Predictor:
    """One forward pass for a batch; rows too close to a tie decided again by ``agent.predict``."""

    def __init__(self, agent: Any, policy: Any) -> None:
        self.agent, self.policy = agent, policy
        #: Rows decided again one at a time (too close to a tie to trust the batch's last bits).
        self.redone = 0

    def logits(self, observations: dict[str, np.ndarray], action_masks: np.ndarray | None = None) -> Any:
        """The action head's logits ``(rows, actions)`` for the raw observations (as the agent observes them:
        normalised, with its heuristic's action if it has one), as a tensor."""
        import torch
        from stable_baselines3.common.policies import BasePolicy

        policy = self.policy
        normalised = self.agent.observe(observations, action_masks)
        with torch.no_grad():
            tensors, _ = policy.obs_to_tensor(normalised)
            # As the policies' get_distribution: BasePolicy's extract_features, the actor's latent, the action head.
            features = BasePolicy.extract_features(policy, tensors, policy.pi_features_extractor)
            return policy.action_net(policy.mlp_extractor.forward_actor(features))

    def __call__(self, observations: dict[str, np.ndarray], action_masks: np.ndarray) -> np.ndarray:
        import torch

        agent = self.agent
        logits = self.logits(observations, action_masks)
        with torch.no_grad():
            masked = logits
            if agent.masked:
                keep = torch.as_tensor(action_masks, dtype=torch.bool, device=logits.device).reshape(logits.shape)
                masked = torch.where(keep, logits, torch.tensor(MASKED_LOGIT, dtype=logits.dtype, device=logits.device))
            actions = torch.distributions.Categorical(logits=masked).probs.argmax(dim=1)
            best = masked.topk(2, dim=1).values
            close = (best[:, 0] - best[:, 1]) <= TIE_TOLERANCE * (1.0 + logits.abs().max(dim=1).values)
            result = actions.cpu().numpy().astype(np.int64)
            rows = torch.nonzero(close).flatten().cpu().numpy()
        for i in rows:
            one = {key: value[i] for key, value in observations.items()}
            action, _ = agent.predict(one, deterministic=True, action_masks=action_masks[i])
            result[i] = np.asarray(action).item()
        self.redone += len(rows)
        return result
