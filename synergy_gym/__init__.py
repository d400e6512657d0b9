"""synergy-gym: a multi-tenant GPU cluster simulator with Synergy's scheduling policies.

The simulator core: cluster, model profiles, workloads, orderings, allocation
mechanisms, the round-based :class:`Simulator` and the paper's workload
generator (:class:`SyntheticWorkload`). Named baseline policies are in
``baselines``; loaders of replay files and real traces in ``traces``.

Importing the package registers the Gymnasium environments ``Synergy-v0`` and
``Synergy-small-v0`` (``gym.make("synergy_gym:Synergy-v0")`` imports it for you).
"""

from synergy_gym.allocation import FairShare, Greedy, Tune
from synergy_gym.cluster import ClusterSpec, cluster_preset, load_cluster
from synergy_gym.errors import ConfigError, SynergyGymError, UnknownNameError, WorkloadError
from synergy_gym.evaluation import evaluate
from synergy_gym.generator import SyntheticWorkload
from synergy_gym.harness import CaseResult, WorkloadCase, run_cases
from synergy_gym.metrics import RunSummary, SimulationResult
from synergy_gym.ordering import FIFO, LAS, SRTF
from synergy_gym.policy import SchedulingPolicy
from synergy_gym.profiles import ModelProfile, ModelZoo
from synergy_gym.simulator import SimulationConfig, Simulator
from synergy_gym.workload import Workload

__version__ = "0.1.0"


def _register_envs() -> None:
    """Register ``Synergy-v0`` and ``Synergy-small-v0`` with Gymnasium (idempotent)."""
    import gymnasium

    envs = {
        # The paper's cluster (128 GPUs) at 9 jobs/hour.
        "Synergy-v0": {"cluster": "default", "jobs_per_hour": 9.0, "num_jobs": 1000, "max_rounds": 10_000},
        # A quarter of it (32 GPUs) at the same load per GPU, for fast training.
        "Synergy-small-v0": {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 300, "max_rounds": 4_000},
    }
    for env_id, kwargs in envs.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="synergy_gym.env:SynergyEnv", kwargs=kwargs)


_register_envs()

__all__ = [
    "CaseResult", "ClusterSpec", "ConfigError", "FIFO", "FairShare", "Greedy", "LAS", "ModelProfile",
    "ModelZoo", "RunSummary", "SRTF", "SchedulingPolicy", "SimulationConfig", "SimulationResult",
    "Simulator", "SynergyGymError", "SyntheticWorkload", "Tune", "UnknownNameError", "Workload", "WorkloadCase",
    "WorkloadError", "cluster_preset", "evaluate", "load_cluster", "run_cases",
]
