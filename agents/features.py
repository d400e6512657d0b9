"""A feature extractor for the environment's Dict observation.

The waiting jobs (``queue``, ``max_queue`` slots of equal features) go through
one shared MLP; the slot embeddings are pooled – masked mean and masked max over
the valid slots (``queue_mask``) – so the network does not depend on the order
or number of waiting jobs. The result is joined with an MLP over the current
job, its sensitivity matrix, the cluster, time and the action mask.
"""

from __future__ import annotations

import torch
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

_JOB_KEYS = ("job", "job_sensitivity", "cluster", "time", "action_mask")


class SynergyExtractor(BaseFeaturesExtractor):
    def __init__(self, observation_space: spaces.Dict, job_dim: int = 128, slot_dim: int = 32) -> None:
        slots = observation_space["queue_mask"].shape[0]
        per_slot = observation_space["queue"].shape[0] // slots
        super().__init__(observation_space, features_dim=job_dim + 2 * slot_dim)
        self.slots, self.per_slot = slots, per_slot
        job_in = sum(observation_space[k].shape[0] for k in _JOB_KEYS)
        self.job_net = nn.Sequential(nn.Linear(job_in, job_dim), nn.ReLU(), nn.Linear(job_dim, job_dim), nn.ReLU())
        self.slot_net = nn.Sequential(nn.Linear(per_slot, slot_dim), nn.ReLU(), nn.Linear(slot_dim, slot_dim), nn.ReLU())

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        job = self.job_net(torch.cat([obs[k] for k in _JOB_KEYS], dim=1))
        slots = self.slot_net(obs["queue"].reshape(-1, self.slots, self.per_slot))
        mask = obs["queue_mask"].unsqueeze(-1)
        count = mask.sum(dim=1)
        mean = (slots * mask).sum(dim=1) / count.clamp(min=1.0)
        masked = slots.masked_fill(mask <= 0, float("-inf")).max(dim=1).values
        top = torch.where(count > 0, masked, torch.zeros_like(masked))
        return torch.cat([job, mean, top], dim=1)
