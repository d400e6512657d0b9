"""The training environments stepped one after another in the trainer's process: SB3's ``DummyVecEnv``, less copying.

:class:`InProcessVecEnv` is Stable-Baselines3's ``DummyVecEnv`` with two differences:

* the observations it returns are copies of its buffers made array by array (``DummyVecEnv``:
  ``copy.deepcopy`` of the dict of arrays: the same arrays, more slowly);
* the step's ``infos`` are shallow copies of the environments' info dicts, not ``copy.deepcopy``
  of them (a third of ``DummyVecEnv.step_wait``'s own time on ``Synergy-small-*``): every
  ``Synergy-*`` env returns a fresh info dict, lists and observation each step, and the callers
  (``VecNormalize``, ``Monitor``'s episode buffer, the callbacks) only read an info or replace
  a key of it, which a shallow copy keeps from the environment's own dict;
* the rewards' dtype is a parameter: ``float32`` as ``DummyVecEnv`` keeps them, or ``float64``,
  which is what ``SubprocVecEnv`` returns (``np.stack`` of the envs' Python floats). The
  normalisation's return statistics see the rewards in that dtype, so an in-process run with
  ``float64`` computes exactly what the same run in worker processes does (the same weights,
  statistics and evaluations; ``tests/agents/test_vec_env_choice.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn
from stable_baselines3.common.vec_env.util import dict_to_obs


class InProcessVecEnv(DummyVecEnv):
    """``DummyVecEnv`` with shallow-copied infos and rewards in ``reward_dtype`` (see the module)."""

    def __init__(self, env_fns: list[Callable[[], gym.Env]], reward_dtype: type[np.floating[Any]] = np.float32) -> None:
        super().__init__(env_fns)
        self.buf_rews = np.zeros((self.num_envs,), dtype=reward_dtype)

    def step_wait(self) -> VecEnvStepReturn:
        for env_idx, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env.step(self.actions[env_idx])
            self.buf_rews[env_idx] = reward
            done = terminated or truncated
            self.buf_dones[env_idx] = done
            info["TimeLimit.truncated"] = truncated and not terminated
            if done:  # keep the final observation, then start the next episode
                info["terminal_observation"] = obs
                obs, self.reset_infos[env_idx] = env.reset()
            self.buf_infos[env_idx] = info
            self._save_obs(env_idx, obs)
        infos = [dict(info) for info in self.buf_infos]
        return self._obs_from_buf(), np.copy(self.buf_rews), np.copy(self.buf_dones), infos

    def _obs_from_buf(self) -> VecEnvObs:
        return dict_to_obs(self.observation_space, OrderedDict((key, buf.copy()) for key, buf in self.buf_obs.items()))
