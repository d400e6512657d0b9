"""synergy-gym: a multi-tenant GPU cluster simulator with Synergy's scheduling policies.

The simulator core: cluster, model profiles, workloads, orderings, allocation
mechanisms and the round-based :class:`Simulator`. Named baseline policies are
in ``baselines``; workload generators and loaders in ``traces``.
"""

from synergy_gym.allocation import FairShare, Greedy, Tune
from synergy_gym.cluster import ClusterSpec, cluster_preset, load_cluster
from synergy_gym.errors import ConfigError, SynergyGymError, UnknownNameError, WorkloadError
from synergy_gym.harness import CaseResult, WorkloadCase, run_cases
from synergy_gym.metrics import RunSummary, SimulationResult
from synergy_gym.ordering import FIFO, LAS, SRTF
from synergy_gym.policy import SchedulingPolicy
from synergy_gym.profiles import ModelProfile, ModelZoo
from synergy_gym.simulator import SimulationConfig, Simulator
from synergy_gym.workload import Workload

__version__ = "0.1.0"

__all__ = [
    "CaseResult", "ClusterSpec", "ConfigError", "FIFO", "FairShare", "Greedy", "LAS", "ModelProfile",
    "ModelZoo", "RunSummary", "SRTF", "SchedulingPolicy", "SimulationConfig", "SimulationResult",
    "Simulator", "SynergyGymError", "Tune", "UnknownNameError", "Workload", "WorkloadCase",
    "WorkloadError", "cluster_preset", "load_cluster", "run_cases",
]
