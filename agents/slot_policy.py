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

With ``hint_policy`` (:mod:`synergy_gym.agents.heuristic_hint`) the features end with an env heuristic's
next action, one-hot, and the head adds a learnt ``hint_weight`` × that vector to its logits: the policy
starts at the heuristic and learns where to depart from it.

The value function keeps SB3's MLP (``net_arch``) over all features. Used with
``MaskablePPO`` (:class:`MaskableSlotPolicy`), ``PPO`` and ``A2C``
(:class:`SlotPolicy`); models save and load as any SB3 model.
"""

from __future__ import annotations

from functools import partial
from typing import Any, cast

import numpy as np
import torch
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.common.type_aliases import Schedule
from torch import nn

#: Hidden units of the per-slot and stop MLPs.
HEAD_HIDDEN = 64


class SlotScorer(nn.Module):
    """Logits from ``SynergyExtractor`` features: a shared MLP per slot (and per running row), one for stop.

    Default mode: ``(batch, slots · levels + 1)``. With running rows (``n_running`` > 0,
    ``redecide="changes"``) each slot gets ``2 · levels`` logits – its admissions, then its
    admissions ahead of the running jobs – and each row one preemption logit: ``(batch, slots ·
    levels [admit] + slots · levels [ahead] + rows + 1)``, the environment's action layout.
    ``n_hint`` > 0: the features' last ``n_hint`` values are a heuristic's one-hot action, added to the
    logits × the parameter ``hint_weight`` (initially ``hint_weight``).
    """

    def __init__(
        self, n_slots: int, n_levels: int, slot_dim: int, context_dim: int, hidden: int = HEAD_HIDDEN, n_running: int = 0,
        n_hint: int = 0, hint_weight: float = 0.0,
    ) -> None:
        super().__init__()
        self.n_hint = n_hint
        self.hint_weight = nn.Parameter(torch.tensor(float(hint_weight))) if n_hint else None
        self.n_slots, self.n_levels, self.slot_dim, self.context_dim = n_slots, n_levels, slot_dim, context_dim
        self.n_running = n_running
        per_slot = n_levels * (2 if n_running else 1)
        self.slot_head = nn.Sequential(nn.Linear(slot_dim + context_dim, hidden), nn.Tanh(), nn.Linear(hidden, per_slot))
        self.stop_head = nn.Sequential(nn.Linear(context_dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.row_head = (nn.Sequential(nn.Linear(slot_dim + context_dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))
                         if n_running else None)

    @staticmethod
    def _per_row(head: nn.Sequential, rows: torch.Tensor, context: torch.Tensor, slot_dim: int) -> torch.Tensor:
        """``head`` applied to [row, context] for every row, with its first layer split: the context's part
        (W_c · context) is computed once per state instead of once per row (the same function and
        parameters as head(cat([rows, context], 2)), a fraction of the multiply-adds)."""
        first, activation, last = head
        first = cast(nn.Linear, first)  # the head's first layer (built in __init__)
        hidden = (nn.functional.linear(rows, first.weight[:, :slot_dim], first.bias)
                  + nn.functional.linear(context, first.weight[:, slot_dim:]).unsqueeze(1))
        return last(activation(hidden))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if self.hint_weight is None:
            return self._logits(features)
        hint = features[:, -self.n_hint :]
        return self._logits(features[:, : -self.n_hint]) + self.hint_weight * hint

    def _logits(self, features: torch.Tensor) -> torch.Tensor:
        batch, q, n_levels = features.shape[0], self.n_slots, self.n_levels
        context = features[:, : self.context_dim]
        end = self.context_dim + q * self.slot_dim
        slots = features[:, self.context_dim : end].reshape(batch, q, self.slot_dim)
        levels = self._per_row(self.slot_head, slots, context, self.slot_dim)
        if self.row_head is None:
            return torch.cat([levels.reshape(batch, q * n_levels), self.stop_head(context)], dim=1)
        rows = features[:, end:].reshape(batch, self.n_running, self.slot_dim)
        preempt = self._per_row(self.row_head, rows, context, self.slot_dim).reshape(batch, self.n_running)
        admit, ahead = levels[..., :n_levels].reshape(batch, -1), levels[..., n_levels:].reshape(batch, -1)
        return torch.cat([admit, ahead, preempt, self.stop_head(context)], dim=1)


class _PerSlotHead:
    """Replaces the linear action head built by SB3's ``_build`` with :class:`SlotScorer` (and a new optimizer)."""

    action_net: nn.Module

    def __init__(self, *args: Any, hint_policy: str | None = None, hint_weight: float = 0.0, **kwargs: Any) -> None:
        #: The env heuristic whose next action the observation carries (``"hint"``), and its logits' initial weight.
        self.hint_policy, self.hint_weight = hint_policy, float(hint_weight)
        super().__init__(*args, **kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()  # type: ignore[misc]
        if self.hint_policy:
            data.update(hint_policy=self.hint_policy, hint_weight=self.hint_weight)
        return data

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)  # type: ignore[misc]
        extractor = self.pi_features_extractor  # type: ignore[attr-defined]
        if self.mlp_extractor.latent_dim_pi != extractor.features_dim:  # type: ignore[attr-defined]
            raise ValueError("the per-slot action head needs the policy's features unchanged: net_arch pi=[]")
        if bool(self.hint_policy) != bool(extractor.n_hint):
            raise ValueError(f"hint_policy {self.hint_policy!r} needs the observation key 'hint' (HeuristicHint), and "
                             f"the key needs a hint_policy; the observation {'has' if extractor.n_hint else 'lacks'} it")
        n_running = extractor.n_running
        head = SlotScorer(extractor.n_slots, extractor.n_levels, extractor.slot_dim, extractor.context_dim,
                          n_running=n_running, n_hint=extractor.n_hint, hint_weight=self.hint_weight)
        admissions = extractor.n_slots * extractor.n_levels * (2 if n_running else 1)
        if extractor.n_hint not in (0, admissions + n_running + 1):
            raise ValueError(f"the hint has {extractor.n_hint} actions, the head {admissions + n_running + 1}")
        if self.action_space.n != admissions + n_running + 1:  # type: ignore[attr-defined]
            raise ValueError(f"the per-slot action head needs {admissions + n_running + 1} actions (slots · levels"
                             f"{' · 2 + running rows' if n_running else ''} + 1), the space has "
                             f"{self.action_space.n}")  # type: ignore[attr-defined]
        if self.ortho_init:  # type: ignore[attr-defined]
            head.apply(partial(self.init_weights, gain=np.sqrt(2)))  # type: ignore[attr-defined]
            lasts = [head.slot_head[-1], head.stop_head[-1]] + ([head.row_head[-1]] if head.row_head is not None else [])
            for last in lasts:  # small initial logits, as SB3's action head
                self.init_weights(last, gain=0.01)  # type: ignore[attr-defined]
        self.action_net = head
        self.optimizer = self.optimizer_class(  # type: ignore[attr-defined]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs  # type: ignore[attr-defined]
        )


class MaskableSlotPolicy(_PerSlotHead, MaskableMultiInputActorCriticPolicy):
    """MaskablePPO's ``MultiInputPolicy`` with the per-slot action head."""


class SlotPolicy(_PerSlotHead, MultiInputActorCriticPolicy):
    """PPO's and A2C's ``MultiInputPolicy`` with the per-slot action head (no masking)."""
