"""A scheduling policy: an ordering combined with an allocation mechanism."""

from __future__ import annotations

from dataclasses import dataclass

from synergy_gym.sim.allocation import AllocationMechanism
from synergy_gym.sim.ordering import Ordering


@dataclass(frozen=True)
class SchedulingPolicy:
    """What the simulator runs each round: ``ordering`` ranks, ``mechanism`` allocates.

    Named policies (``fifo+tune``, ``srtf+fair``, …) are built by
    ``synergy_gym.baselines.make_policy``.
    """

    ordering: Ordering
    mechanism: AllocationMechanism

    @property
    def name(self) -> str:
        return f"{self.ordering.name}+{self.mechanism.name}"
