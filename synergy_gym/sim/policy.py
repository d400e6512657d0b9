"""A scheduling policy: an ordering combined with an allocation mechanism."""

from __future__ import annotations

from dataclasses import dataclass

from synergy_gym.errors import ConfigError
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

    def __post_init__(self) -> None:
        for part, method, examples in (("ordering", "order", "an ordering such as FIFO(), SRTF() or LAS()"),
                                       ("mechanism", "allocate", "a mechanism such as FairShare(), Greedy() or Tune()")):
            value = getattr(self, part)
            if isinstance(value, type) or not callable(getattr(value, method, None)):
                if isinstance(value, type):
                    got = f"the class {value.__name__} (not an instance)"
                else:
                    got = repr(value) if value is None or isinstance(value, (str, int, float)) else f"a {type(value).__name__}"
                raise ConfigError(
                    f"SchedulingPolicy {part} must be {examples}, got {got}; "
                    "a policy by name ('fifo+tune') is built by synergy_gym.baselines.make_policy"
                )

    @property
    def name(self) -> str:
        return f"{self.ordering.name}+{self.mechanism.name}"
