"""A per-slot action head: every slot's levels are scored by one shared network (``action_head = "per_slot"``).

The environment's actions are ``slot · levels + level`` and a last action, stop.
SB3's default action head is one linear layer from the policy's latent vector to
all ``slots · levels + 1`` logits: each slot position has its own weights, so
"the job with the least run time left, wherever it sits" must be learnt once
per position. :class:`SlotScorer` instead scores each slot with one MLP over
that slot's embedding (:class:`synergy_gym.agents.features.SynergyExtractor`'s shared
per-slot MLP) joined with the state's context (the MLP over the cluster,
running jobs, demand, queue and time, and the slot embeddings' masked mean and
max), giving that slot's ``levels`` logits; a second MLP over the context gives
the stop logit. The policy is then equivariant to the order of the slots, as
the pointer-style heads of scheduling agents such as Decima (Mao et al.,
SIGCOMM 2019) are, and a comparison across slots (shortest first, best fit) is
a softmax over one learnt score.

The value function keeps SB3's MLP (``net_arch``) over all features. Used with
``MaskablePPO`` (:class:`MaskableSlotPolicy`), ``PPO`` and ``A2C``
(:class:`SlotPolicy`); models save and load as any SB3 model.
"""

from __future__ import annotations

from functools import partial
from typing import cast

import numpy as np
import torch
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.common.type_aliases import Schedule
from torch import nn

#: Hidden units of the per-slot and stop MLPs.
HEAD_HIDDEN = 64


class SlotScorer(nn.Module):
    """Logits ``(batch, slots · levels + 1)`` from ``SynergyExtractor`` features: a shared MLP per slot, one for stop."""

    def __init__(self, n_slots: int, n_levels: int, slot_dim: int, context_dim: int, hidden: int = HEAD_HIDDEN) -> None:
        super().__init__()
        self.n_slots, self.n_levels, self.slot_dim, self.context_dim = n_slots, n_levels, slot_dim, context_dim
        self.slot_head = nn.Sequential(nn.Linear(slot_dim + context_dim, hidden), nn.Tanh(), nn.Linear(hidden, n_levels))
        self.stop_head = nn.Sequential(nn.Linear(context_dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        batch = features.shape[0]
        context = features[:, : self.context_dim]
        slots = features[:, self.context_dim:].reshape(batch, self.n_slots, self.slot_dim)
        # slot_head applied to [slot, context] for every slot, with its first layer split: the context's
        # part (W_c · context) is computed once per state instead of once per slot (the same function
        # and parameters as slot_head(cat([slots, context], 2)), a fraction of the multiply-adds).
        first, activation, last = self.slot_head
        first = cast(nn.Linear, first)  # slot_head's first layer (built in __init__)
        hidden = (nn.functional.linear(slots, first.weight[:, : self.slot_dim], first.bias)
                  + nn.functional.linear(context, first.weight[:, self.slot_dim:]).unsqueeze(1))
        levels = last(activation(hidden)).reshape(batch, self.n_slots * self.n_levels)
        return torch.cat([levels, self.stop_head(context)], dim=1)


class _PerSlotHead:
    """Replaces the linear action head built by SB3's ``_build`` with :class:`SlotScorer` (and a new optimizer)."""

    action_net: nn.Module

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)  # type: ignore[misc]
        extractor = self.pi_features_extractor  # type: ignore[attr-defined]
        context_dim = extractor.global_dim + 2 * extractor.slot_dim
        if self.mlp_extractor.latent_dim_pi != extractor.features_dim:  # type: ignore[attr-defined]
            raise ValueError("the per-slot action head needs the policy's features unchanged: net_arch pi=[]")
        head = SlotScorer(extractor.n_slots, extractor.n_levels, extractor.slot_dim, context_dim)
        if self.action_space.n != extractor.n_slots * extractor.n_levels + 1:  # type: ignore[attr-defined]
            raise ValueError(f"the per-slot action head needs slots · levels + 1 actions, the space has "
                             f"{self.action_space.n}")  # type: ignore[attr-defined]
        if self.ortho_init:  # type: ignore[attr-defined]
            head.apply(partial(self.init_weights, gain=np.sqrt(2)))  # type: ignore[attr-defined]
            for last in (head.slot_head[-1], head.stop_head[-1]):  # small initial logits, as SB3's action head
                self.init_weights(last, gain=0.01)  # type: ignore[attr-defined]
        self.action_net = head
        self.optimizer = self.optimizer_class(  # type: ignore[attr-defined]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs  # type: ignore[attr-defined]
        )


class MaskableSlotPolicy(_PerSlotHead, MaskableMultiInputActorCriticPolicy):
    """MaskablePPO's ``MultiInputPolicy`` with the per-slot action head."""


class SlotPolicy(_PerSlotHead, MultiInputActorCriticPolicy):
    """PPO's and A2C's ``MultiInputPolicy`` with the per-slot action head (no masking)."""
