"""How the simulator runs (:class:`SimulationConfig`): round length, placement, timing, sensitivity."""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import Literal

from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.sim.ledger import PLACEMENTS, Placement
from synergy_gym.sim.profiling import SENSITIVITIES, ProfilerConfig
from synergy_gym.sim.validation import check_flag, check_positive

#: A time within this many rounds of a round boundary is taken to be at it (the boundary's floating value and the
#: simulator's clock, a running sum of rounds, may each differ from ``k · round_s`` by a few ulps): the simulator's
#: boundaries and the bounds' release times (:func:`~synergy_gym.sim.bounds.round_release_s`) use it alike.
BOUNDARY_TOLERANCE = 1e-9

Timing = Literal["round", "exact"]
TIMINGS: tuple[str, ...] = ("round", "exact")


@dataclass(frozen=True)
class SimulationConfig:
    """How the simulator runs (the cluster and workload are given separately)."""

    round_s: float = 300.0
    placement: Placement = "first_fit"
    timing: Timing = "round"
    #: Jobs not run for this long are served first by orderings with a guard.
    starvation_s: float = 1000 * 3600.0
    #: Check after every round that no server is over any capacity.
    debug: bool = False
    #: Keep the per-round utilisation log (``SimulationResult.rounds``); the
    #: Gymnasium environment turns it off. Without it the summary's ``mean_gpu_util``,
    #: ``mean_cpu_util``, ``mean_mem_util`` and ``mean_throughput`` are NaN (nothing was recorded).
    record_rounds: bool = True
    #: ``"true"``: policies see the model zoo's measured sensitivity; ``"profiled"``:
    #: they see each job's estimate from optimistic profiling (``profiler``) while
    #: jobs still progress at their true throughput.
    sensitivity: str = "true"
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)
    #: Removed: the compiled kernels of :mod:`synergy_gym.sim.kernels` are always used.
    kernels: InitVar[str | None] = None

    def __post_init__(self, kernels: str | None) -> None:
        if kernels is not None:
            raise ConfigError(f"SimulationConfig(kernels=...) was removed: {kernels_removed()}")
        for name in ("round_s", "starvation_s"):
            object.__setattr__(self, name, float(check_positive(name, getattr(self, name), unit="seconds")))
        for name in ("debug", "record_rounds"):
            object.__setattr__(self, name, check_flag(name, getattr(self, name)))
        if not isinstance(self.profiler, ProfilerConfig):
            hint = "; use ProfilerConfig(**settings)" if isinstance(self.profiler, dict) else ""
            raise ConfigError(f"profiler must be a ProfilerConfig, got a {type(self.profiler).__name__}{hint}")
        if self.placement not in PLACEMENTS:
            raise UnknownNameError("placement", self.placement, PLACEMENTS)
        if self.timing not in TIMINGS:
            raise UnknownNameError("timing", self.timing, TIMINGS)
        if self.sensitivity not in SENSITIVITIES:
            raise UnknownNameError("sensitivity", self.sensitivity, SENSITIVITIES)


def kernels_removed() -> str:
    """Why the ``kernels`` setting is gone (the message of its removal error)."""
    return (
        "the compiled kernels are always used (numba; without numba installed, the same code runs as plain Python)"
    )
