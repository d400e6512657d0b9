"""synergy-gym: a multi-tenant GPU cluster simulator with Synergy's scheduling policies.

The simulator core: cluster, model profiles, workloads, orderings, allocation
mechanisms, the round-based :class:`Simulator` and the paper's workload
generator (:class:`SyntheticWorkload`). Named baseline policies are in
``baselines``; loaders of replay files and real traces in ``traces``.

Importing the package registers the Gymnasium environments of
:data:`SCENARIOS` – ``Synergy-v0``, ``Synergy-small-v0``, ``Synergy-scarce-v0`` and
``Synergy-small-scarce-v0`` (``gym.make("synergy_gym:Synergy-v0")`` imports it for you).
"""

from synergy_gym.env.scenarios import SCENARIOS, Scenario, register_envs
from synergy_gym.errors import ConfigError, SynergyGymError, UnknownNameError, WorkloadError
from synergy_gym.experiments.evaluation import TruncatedEpisodesWarning, evaluate
from synergy_gym.experiments.harness import CaseResult, WorkloadCase, run_cases
from synergy_gym.sim.allocation import FairShare, Greedy, Tune
from synergy_gym.sim.cluster import ClusterSpec, cluster_preset, load_cluster
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.generator import SyntheticWorkload
from synergy_gym.sim.metrics import RunSummary, SimulationResult
from synergy_gym.sim.ordering import FIFO, LAS, SRTF
from synergy_gym.sim.policy import SchedulingPolicy
from synergy_gym.sim.profiles import ModelProfile, ModelZoo
from synergy_gym.sim.simulator import Simulator
from synergy_gym.sim.workload import Workload

__version__ = "0.1.0"


register_envs()

__all__ = [
    "CaseResult", "ClusterSpec", "ConfigError", "FIFO", "FairShare", "Greedy", "LAS", "ModelProfile",
    "ModelZoo", "RunSummary", "SCENARIOS", "SRTF", "Scenario", "SchedulingPolicy", "SimulationConfig", "SimulationResult",
    "Simulator", "SynergyGymError", "SyntheticWorkload", "TruncatedEpisodesWarning", "Tune", "UnknownNameError", "Workload",
    "WorkloadCase", "WorkloadError", "cluster_preset", "evaluate", "load_cluster", "run_cases",
]
