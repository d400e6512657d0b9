"""One-line errors for realistic slips in :class:`~synergy_gym.sim.simulator.Simulator`'s arguments.

A preset's name for the cluster, a workload's spec not yet built, a policy's name, a dict of settings:
each is refused at construction with the call that makes the right object, before anything runs.
"""

from __future__ import annotations

from synergy_gym.errors import ConfigError, WorkloadError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.policy import SchedulingPolicy
from synergy_gym.sim.workload import Workload


def check_simulator_arguments(cluster: object, workload: object, policy: object, config: object) -> None:
    """A one-line error for a realistic slip in :class:`Simulator`'s arguments (a name, a spec, a dict)."""
    if not isinstance(cluster, ClusterSpec):
        hint = f"; use cluster_preset({cluster!r}) or load_cluster({cluster!r})" if isinstance(cluster, str) else ""
        raise ConfigError(f"Simulator: cluster must be a ClusterSpec, got {_shown(cluster)}{hint}")
    if not isinstance(workload, Workload):
        hint = "; call its .build() (or .stream() for an open-ended run)" if hasattr(workload, "build") else ""
        raise WorkloadError(f"Simulator: workload must be a Workload, got {_shown(workload)}{hint}")
    if not isinstance(policy, SchedulingPolicy):
        hint = f"; use synergy_gym.baselines.make_policy({policy!r})" if isinstance(policy, str) else ""
        raise ConfigError(f"Simulator: policy must be a SchedulingPolicy, got {_shown(policy)}{hint}")
    if config is not None and not isinstance(config, SimulationConfig):
        hint = "; use SimulationConfig(**settings)" if isinstance(config, dict) else ""
        raise ConfigError(f"Simulator: config must be a SimulationConfig, got {_shown(config)}{hint}")


def _shown(value: object) -> str:
    """``'small'`` for a string (and ``None``), else the type: ``a SyntheticWorkload``."""
    return repr(value) if value is None or isinstance(value, str) else f"a {type(value).__name__}"
