"""The Gymnasium environment ``Synergy-v0``, split by concern (as Jumanji's environments are).

* :mod:`.env` – :class:`SynergyEnv`, the API and the decision loop, a thin adapter over the
  simulator and its round planner;
* :mod:`.config` – :class:`EnvConfig`, the keyword arguments;
* :mod:`.source` – where an episode's jobs come from (a workload source object);
* :mod:`.observation` – the observation space and its features;
* :mod:`.masks` – valid actions and :class:`MaskedDiscrete`;
* :mod:`.render` – ``ansi`` and ``rgb_array`` rendering.
"""

from synergy_gym.env.config import EnvConfig
from synergy_gym.env.env import SynergyEnv
from synergy_gym.env.masks import DEMAND_ACTION, FAIR_ACTION, MaskedDiscrete
from synergy_gym.env.observation import JOB_FEATURES, QUEUE_FEATURES
from synergy_gym.env.source import FixedWorkload, GeneratedWorkloads, WorkloadSource

__all__ = [
    "DEMAND_ACTION", "EnvConfig", "FAIR_ACTION", "FixedWorkload", "GeneratedWorkloads", "JOB_FEATURES",
    "MaskedDiscrete", "QUEUE_FEATURES", "SynergyEnv", "WorkloadSource",
]
