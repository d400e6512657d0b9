"""A feature extractor for the environment's Dict observation (Stable-Baselines3).

Each slot (a waiting job whose GPUs fit now) is described by its features in
``slots`` (flat: slots × ``SLOT_FEATURES``), its part of ``slot_levels`` (flat) (CPUs, GB and speed-up of every
allocation level) and its levels' part of ``action_mask`` (which levels can be
honoured). One MLP, shared by all slots, turns that into a slot embedding;
empty slots (``slot_mask`` 0) are zeroed. The features are

* the slot embeddings pooled over the filled slots – masked mean and masked
  max – a summary that does not depend on the order or number of slots;
* the slot embeddings in slot order (zeros for empty slots), so that the
  policy's action head – SB3's default, a linear layer over the ``net_arch``
  MLP over these features – can tell which slot to pick: actions are
  ``slot · levels + level``;
* an MLP over the rest of the state: ``cluster``, ``running``, ``demand``,
  ``queue_rest`` and ``time``.

Works with MaskablePPO, PPO, A2C and DQN (``MultiInputPolicy``) on any device,
and with any ``max_queue`` and level set (``levels="grid"`` too), in every mode (the running
rows of ``redecide="changes"``: :class:`SynergyExtractor`).
"""

from __future__ import annotations

import torch
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from synergy_gym.agents.heuristic_hint import HINT_KEY
from synergy_gym.env.observation import LEVEL_FEATURES, RUNNING_SLOT_FEATURES, SLOT_FEATURES

#: The observation keys outside the slots, joined by one MLP.
GLOBAL_KEYS = ("cluster", "running", "demand", "queue_rest", "time")


def _length(space: spaces.Space) -> int:
    """The length of a flat observation part (its first dimension)."""
    if space.shape is None:
        raise ValueError(f"expected a Box observation part, got {space}")
    return int(space.shape[0])


def _pool(rows: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked mean and max over ``rows`` (batch, n, dim) where ``mask`` (batch, n, 1) is true (zeros when none is)."""
    count = mask.sum(dim=1)
    mean = rows.sum(dim=1) / count.clamp(min=1)
    top = rows.masked_fill(~mask, float("-inf")).max(dim=1).values
    return mean, torch.where(count > 0, top, torch.zeros_like(top))


class SynergyExtractor(BaseFeaturesExtractor):
    """Shared per-slot MLP, masked mean/max pooling and ordered slot embeddings, plus an MLP over the rest.

    With ``preemptive=True, redecide="changes"`` the observation also has running rows
    (``running_slots``, ``running_mask``): a second shared MLP embeds each, pooled (mean, max)
    into the context and kept in row order after the slots; ``slot_fits`` joins each slot's
    inputs when present. Features: context, slot mean and max, [row mean and max], slots, [rows], and last,
    unchanged, an env heuristic's next action where the observation has it (``"hint"``:
    :mod:`synergy_gym.agents.heuristic_hint`).
    """

    def __init__(self, observation_space: spaces.Dict, global_dim: int = 128, slot_dim: int = 32,
                 attention_heads: int = 0) -> None:
        n_slots = _length(observation_space["slot_mask"])
        slot_features = len(SLOT_FEATURES)
        n_levels = _length(observation_space["slot_levels"]) // (n_slots * len(LEVEL_FEATURES))
        keys = observation_space.spaces
        n_running = _length(observation_space["running_mask"]) if "running_mask" in keys else 0
        self.with_fits = "slot_fits" in keys
        pooled = 2 + (2 if n_running else 0)
        #: Length of the heuristic's one-hot action at the end of the features (0: the observation has none).
        self.n_hint = _length(observation_space[HINT_KEY]) if HINT_KEY in keys else 0
        super().__init__(observation_space,
                         features_dim=global_dim + (pooled + n_slots + n_running) * slot_dim + self.n_hint)
        self.n_slots, self.n_levels, self.n_running = n_slots, n_levels, n_running
        self.global_dim, self.slot_dim = global_dim, slot_dim
        #: Features before the slot embeddings: the context the action head joins to each slot and row.
        self.context_dim = global_dim + pooled * slot_dim
        per_slot = slot_features + n_levels * len(LEVEL_FEATURES) + n_levels * (2 if self.with_fits else 1)
        global_in = sum(_length(observation_space[k]) for k in GLOBAL_KEYS)
        self.global_net = nn.Sequential(nn.Linear(global_in, global_dim), nn.ReLU(),
                                        nn.Linear(global_dim, global_dim), nn.ReLU())
        self.slot_net = nn.Sequential(nn.Linear(per_slot, slot_dim), nn.ReLU(), nn.Linear(slot_dim, slot_dim), nn.ReLU())
        self.row_net = (nn.Sequential(nn.Linear(len(RUNNING_SLOT_FEATURES), slot_dim), nn.ReLU(),
                                      nn.Linear(slot_dim, slot_dim), nn.ReLU()) if n_running else None)
        if attention_heads and slot_dim % attention_heads:
            raise ValueError(f"attention_heads {attention_heads} must divide slot_dim {slot_dim}")
        #: One self-attention layer over the slot and row embeddings (a residual update), so that each
        #: job's embedding can depend on the others' (their ranks, what they need): None without it.
        self.attend = nn.MultiheadAttention(slot_dim, attention_heads, batch_first=True) if attention_heads else None

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        batch, q, n_levels = obs["slots"].shape[0], self.n_slots, self.n_levels
        level_mask = obs["action_mask"][:, : q * n_levels].reshape(batch, q, n_levels)
        parts = [obs["slots"].reshape(batch, q, -1), obs["slot_levels"].reshape(batch, q, -1), level_mask]
        if self.with_fits:
            parts.append(obs["slot_fits"].reshape(batch, q, n_levels))
        mask = (obs["slot_mask"] > 0.5).unsqueeze(-1)  # (batch, q, 1)
        slots = self.slot_net(torch.cat(parts, dim=2)) * mask
        rows = row_mask = None
        if self.row_net is not None:
            row_mask = (obs["running_mask"] > 0.5).unsqueeze(-1)
            rows = self.row_net(obs["running_slots"].reshape(batch, self.n_running, -1)) * row_mask
        if self.attend is not None:
            slots, rows = self._attend(slots, mask, rows, row_mask)
        context = [self.global_net(torch.cat([obs[k] for k in GLOBAL_KEYS], dim=1)), *_pool(slots, mask)]
        ordered = [slots.reshape(batch, -1)]
        if rows is not None and row_mask is not None:
            context.extend(_pool(rows, row_mask))
            ordered.append(rows.reshape(batch, -1))
        if self.n_hint:
            if HINT_KEY not in obs:
                raise ValueError("this model was trained with hint_policy: its observations need the heuristic's action "
                                 "(key 'hint'); run it as synergy_gym.agents.wrappers.AgentPolicy (load_agent, evaluate, "
                                 "benchmark), which adds it")
            ordered.append(obs[HINT_KEY])
        return torch.cat(context + ordered, dim=1)

    def _attend(self, slots: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor | None,
                row_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Slots and rows updated by self-attention over all of them (filled ones only), residually."""
        assert self.attend is not None
        q = slots.shape[1]
        tokens, present = slots, mask
        if rows is not None and row_mask is not None:
            tokens, present = torch.cat([slots, rows], dim=1), torch.cat([mask, row_mask], dim=1)
        ignore = ~present.squeeze(-1)
        ignore[ignore.all(dim=1), 0] = False  # a state with no job at all attends to token 0 (its output is zeroed)
        attended, _ = self.attend(tokens, tokens, tokens, key_padding_mask=ignore, need_weights=False)
        tokens = (tokens + attended) * present
        return tokens[:, :q], (tokens[:, q:] if rows is not None else None)
