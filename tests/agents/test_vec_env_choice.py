"""Where the training envs run (vec_env auto / subproc / dummy) and that in-process envs step exactly as the others."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

from synergy_gym.agents import vec_envs
from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.inprocess_vec_env import InProcessVecEnv
from synergy_gym.agents.vec_envs import env_factory, make_vec_env, runs_in_process

KWARGS = {"num_jobs": 12}


def test_auto_runs_in_process_unless_there_is_a_core_for_every_env():
    cfg = TrainConfig(n_envs=4)
    assert cfg.vec_env == "auto"
    assert runs_in_process(cfg, cores=1) and runs_in_process(cfg, cores=4)
    assert not runs_in_process(cfg, cores=5)
    assert not runs_in_process(TrainConfig(n_envs=4, vec_env="subproc"), cores=1)
    assert runs_in_process(TrainConfig(n_envs=4, vec_env="dummy"), cores=64)
    assert runs_in_process(TrainConfig(n_envs=1, vec_env="subproc"), cores=64)  # one env never gets a worker


def rollout(vec, steps: int = 120) -> list:
    """Every step's (obs, rewards, dones, infos) of ``vec`` taking each env's last valid action but one."""
    vec.seed(3)
    out = [vec.reset()]
    for _ in range(steps):
        masks = np.stack(vec.env_method("action_masks"))
        out.append(vec.step(np.array([int(np.flatnonzero(m)[-2]) if m.sum() > 1 else 0 for m in masks])))
    vec.close()
    return out


def assert_same(a: list, b: list, reward_dtype) -> None:
    assert len(a) == len(b)
    for first, second in zip(a, b):
        if isinstance(first, tuple):  # a step
            (obs_a, rew_a, done_a, info_a), (obs_b, rew_b, done_b, info_b) = first, second
            assert rew_a.dtype == rew_b.dtype == reward_dtype
            np.testing.assert_array_equal(rew_a, rew_b)
            np.testing.assert_array_equal(done_a, done_b)
            assert [sorted(i) for i in info_a] == [sorted(i) for i in info_b]
            for i_a, i_b in zip(info_a, info_b):
                for key in i_a:
                    if key == "terminal_observation":
                        for k in i_a[key]:
                            np.testing.assert_array_equal(i_a[key][k], i_b[key][k])
                    elif key != "episode":  # Monitor's episode record holds its wall time
                        assert i_a[key] == i_b[key], key
        else:
            obs_a, obs_b = first, second
        for key in obs_a:
            assert obs_a[key].dtype == obs_b[key].dtype
            np.testing.assert_array_equal(obs_a[key], obs_b[key])


def test_in_process_envs_step_as_dummy_vec_env_with_float32_rewards():
    factory = env_factory("Synergy-small-v0", KWARGS)
    plain = rollout(DummyVecEnv([factory] * 3))
    ours = rollout(InProcessVecEnv([factory] * 3))
    assert any(step[2].any() for step in plain[1:])  # episodes ended and restarted
    assert_same(ours, plain, np.float32)


def test_in_process_infos_are_the_callers_own():
    vec = InProcessVecEnv([env_factory("Synergy-small-v0", KWARGS)] * 2)
    vec.reset()
    masks = np.stack(vec.env_method("action_masks"))
    _, _, _, infos = vec.step(np.array([int(np.flatnonzero(m)[-1]) for m in masks]))
    infos[0]["added"] = 1
    assert "added" not in vec.buf_infos[0]
    obs = vec._obs_from_buf()
    assert all(obs[k] is not vec.buf_obs[k] for k in obs)
    vec.close()


@pytest.mark.slow
def test_auto_on_few_cores_steps_exactly_as_worker_processes(monkeypatch):
    """vec_env "auto" on as many cores as envs: in this process, with the normalised observations and rewards of subproc."""
    monkeypatch.setattr(vec_envs, "usable_cores", lambda: 2)
    settings = {"env_id": "Synergy-small-v0", "env_kwargs": KWARGS, "n_envs": 2, "device": "cpu"}
    auto = make_vec_env(TrainConfig(**settings))
    assert isinstance(auto, VecNormalize) and isinstance(auto.venv, InProcessVecEnv)
    workers = make_vec_env(TrainConfig(**settings, vec_env="subproc"))
    assert isinstance(workers.venv, SubprocVecEnv)
    in_process, in_workers = rollout(auto), rollout(workers)
    assert any(step[2].any() for step in in_workers[1:])
    assert_same(in_process, in_workers, np.float32)  # VecNormalize returns float32 rewards
    # The raw rewards it normalised: float64 from the workers and here alike (DummyVecEnv: float32).
    assert auto.get_original_reward().dtype == workers.get_original_reward().dtype == np.float64
    for key in auto.obs_rms:
        np.testing.assert_array_equal(auto.obs_rms[key].mean, workers.obs_rms[key].mean)
        np.testing.assert_array_equal(auto.obs_rms[key].var, workers.obs_rms[key].var)
    assert (auto.ret_rms.mean, auto.ret_rms.var) == (workers.ret_rms.mean, workers.ret_rms.var)
