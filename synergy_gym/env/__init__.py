"""The Gymnasium environment ``Synergy-v0``, split by concern (as Jumanji's environments are).

* :mod:`.env` – :class:`SynergyEnv`, the API and the decision loop, a thin adapter over the
  simulator and its round planner;
* :mod:`.config` – :class:`EnvConfig`, the keyword arguments;
* :mod:`.source` – where an episode's jobs come from (a workload source object);
* :mod:`.observation` – the observation space and its features;
* :mod:`.masks` – the action layout (slot × level, stop), valid actions and the fallback;
* :mod:`.render` – ``ansi`` and ``rgb_array`` rendering;
* :mod:`.calls` – the errors of the API's misuse (a call before ``reset()``, a bad argument).
"""

from synergy_gym.env.config import EnvConfig
from synergy_gym.env.env import SynergyEnv, make_synergy_env
from synergy_gym.env.masks import ActionLayout
from synergy_gym.env.observation import LEVEL_FEATURES, SLOT_FEATURES
from synergy_gym.env.source import FixedWorkload, GeneratedWorkloads, WorkloadSource

__all__ = [
    "ActionLayout", "EnvConfig", "FixedWorkload", "GeneratedWorkloads", "LEVEL_FEATURES", "SLOT_FEATURES",
    "SynergyEnv", "WorkloadSource", "make_synergy_env",
]
