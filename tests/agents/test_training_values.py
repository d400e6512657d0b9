"""Values, not just shapes: the truncated relative return, the entropy coefficient updates use, the hyper-parameters
a model is built (and resumed) with, and GAE at λ strictly between 0 and 1.

Every expected value is computed here from its definition, not by the code under test.
"""

import gymnasium as gym
import numpy as np
import pytest

from synergy_gym.agents.relative_reward import HeuristicRelativeReward
from synergy_gym.baselines.env_heuristics import env_heuristics
from tests.agents.test_train_variance import first_workload_seed, run_episode

# -- the heuristic-relative reward of a truncated episode --------------------------------------------


def job_seconds_until(sim, now):
    """Σ_j max(0, min(now, f_j) − a_j): job time in the system up to ``now`` (a job not finished counts up to ``now``)."""
    finish = np.where(np.isfinite(sim.jobs.finish_s), sim.jobs.finish_s, np.inf)
    return float(np.clip(np.minimum(finish, now) - sim.jobs.arrival_s, 0.0, None).sum())


@pytest.mark.parametrize(("agent", "max_rounds"), [("fifo+tune", 60), ("tetris", 120)])
def test_truncated_relative_return_is_the_job_time_difference_up_to_the_end(agent, max_rounds):
    kwargs = {"num_jobs": 30, "max_rounds": max_rounds}
    env = HeuristicRelativeReward(gym.make("Synergy-small-scarce-v0", **kwargs), "srtf+tune")
    rewards, _, terminated = run_episode(env, env_heuristics()[agent], seed=0)
    sim = env.unwrapped.sim
    now = float(sim.now)
    assert not terminated and not np.isfinite(sim.jobs.finish_s).all()  # truncated with jobs in the system
    # The heuristic on the same workload, in an environment of its own, truncated as well.
    reference = gym.make("Synergy-small-scarce-v0", **kwargs)
    _, _, ref_terminated = run_episode(reference, env_heuristics()["srtf+tune"],
                                       options={"workload_seed": first_workload_seed(0)})
    ref_sim = reference.unwrapped.sim
    np.testing.assert_array_equal(ref_sim.jobs.arrival_s, sim.jobs.arrival_s)
    assert not ref_terminated and not np.isfinite(ref_sim.jobs.finish_s).all()  # its unfinished jobs count too
    heuristic_s = job_seconds_until(ref_sim, now)
    agent_s = job_seconds_until(sim, now)
    assert heuristic_s > 3600.0 * 10  # hours of job time, most of it of unfinished jobs
    expected = -(agent_s - heuristic_s) / env.unwrapped.cfg.reward_scale
    assert rewards.sum() == pytest.approx(expected, abs=1e-9)
    if agent == "tetris":
        assert expected < -0.1  # a scenario where the two differ, not only 0 = 0


# -- the entropy schedule: the coefficient each policy update uses -----------------------------------


def test_entropy_schedule_sets_the_coefficient_every_update_trains_with(tmp_path, monkeypatch):
    from sb3_contrib import MaskablePPO

    from synergy_gym.agents.train import train
    from tests.support.agent_runs import tiny_train_config

    used = []
    original = MaskablePPO.train

    def recording_train(self):
        used.append((self.num_timesteps, float(self.ent_coef)))
        return original(self)

    monkeypatch.setattr(MaskablePPO, "train", recording_train)
    cfg = tiny_train_config("Synergy-small-v0", timesteps=192, eval_freq=1000, n_epochs=1, ent_coef=0.02,
                            ent_coef_final=0.0)
    out = train(cfg, out=tmp_path / "run", log=None)
    # Linear from 0.02 at step 0 to 0 at step 192, set before each update (after 64, 128 and 192 steps).
    assert [step for step, _ in used] == [64, 128, 192]
    assert [value for _, value in used] == pytest.approx([0.02 * 2 / 3, 0.02 / 3, 0.0], abs=1e-12)
    # The saved model holds the last value.
    assert MaskablePPO.load(out / "last_model.zip", device="cpu").ent_coef == pytest.approx(0.0, abs=1e-12)


# -- hyper-parameters reaching the model ---------------------------------------------------------

#: Values of every hyper-parameter a run's config.json records, none TrainConfig's or SB3's default.
CHANGED = {"learning_rate": 1.7e-4, "gamma": 0.97, "max_grad_norm": 0.73, "n_steps": 24, "batch_size": 12,
           "n_epochs": 3, "gae_lambda": 0.83, "ent_coef": 0.037, "clip_range": 0.27, "vf_coef": 0.61,
           "target_kl": 0.043, "buffer_size": 777, "learning_starts": 55, "exploration_fraction": 0.31,
           "target_update_interval": 66, "train_freq": 3}
#: Other values again: the model a resumed run starts from was built with these.
SAVED = {"learning_rate": 5e-4, "gamma": 0.9, "max_grad_norm": 0.2, "n_steps": 16, "batch_size": 8, "n_epochs": 2,
         "gae_lambda": 0.7, "ent_coef": 0.005, "clip_range": 0.15, "vf_coef": 0.3, "target_kl": 0.2, "buffer_size": 500,
         "learning_starts": 20, "exploration_fraction": 0.5, "target_update_interval": 30, "train_freq": 2}
COMMON = ("learning_rate", "gamma", "max_grad_norm")
#: The settings each algorithm trains with (SB3's constructor arguments), written out here.
USED = {
    "maskable_ppo": (*COMMON, "n_steps", "batch_size", "n_epochs", "gae_lambda", "ent_coef", "clip_range", "vf_coef",
                     "target_kl"),
    "ppo": (*COMMON, "n_steps", "batch_size", "n_epochs", "gae_lambda", "ent_coef", "clip_range", "vf_coef", "target_kl"),
    "a2c": (*COMMON, "n_steps", "gae_lambda", "ent_coef", "vf_coef"),
    "dqn": (*COMMON, "buffer_size", "learning_starts", "batch_size", "exploration_fraction", "target_update_interval",
            "train_freq"),
}


def model_value(model, name):
    """The value ``model`` trains with for the setting ``name`` (schedules called, SB3's own types unwrapped)."""
    if name == "learning_rate":
        assert model.lr_schedule(1.0) == model.lr_schedule(0.3)  # constant
        return model.lr_schedule(1.0)
    if name == "clip_range":
        return model.clip_range(1.0)
    if name == "train_freq":
        assert model.train_freq.unit.value == "step"
        return model.train_freq.frequency
    if name == "n_steps":
        assert model.rollout_buffer.buffer_size == model.n_steps
    if name == "gae_lambda":
        assert model.rollout_buffer.gae_lambda == model.gae_lambda
    if name == "buffer_size":
        assert model.replay_buffer.buffer_size == model.buffer_size
    if name == "exploration_fraction":
        # ε falls linearly from its initial to its final value over that fraction of the run (progress 1 → 1 − f).
        f, start, end = model.exploration_fraction, model.exploration_initial_eps, model.exploration_final_eps
        assert model.exploration_schedule(1.0 - f / 2) == pytest.approx((start + end) / 2)
        assert model.exploration_schedule(1.0 - f) == pytest.approx(end)
    return getattr(model, name)


def tiny_config(algo, values, **extra):
    from synergy_gym.agents.config import TrainConfig

    return TrainConfig(algo=algo, env_id="Synergy-small-v0", env_kwargs={"num_jobs": 10}, n_envs=1, vec_env="dummy",
                       device="cpu", timesteps=1000, net_arch=[16], global_dim=16, slot_dim=8, **values, **extra)


def check_model(model, algo, values):
    for name in USED[algo]:
        assert model_value(model, name) == pytest.approx(values[name], rel=1e-12), (algo, name)


@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "a2c", "dqn"])
def test_every_recorded_setting_reaches_a_new_and_a_resumed_model(algo, tmp_path):
    from dataclasses import asdict

    from synergy_gym.agents.config import ALGOS, TrainConfig
    from synergy_gym.agents.models import build_model, resume_model
    from synergy_gym.agents.vec_envs import make_vec_env

    assert set(USED) == set(ALGOS)  # a new algorithm needs a row here
    defaults = asdict(TrainConfig())
    assert all(CHANGED[k] != defaults[k] != SAVED[k] != CHANGED[k] for k in CHANGED)
    cfg = tiny_config(algo, CHANGED)
    recorded = asdict(cfg)  # what config.json holds
    assert {k: recorded[k] for k in CHANGED} == CHANGED
    env = make_vec_env(cfg)
    try:
        check_model(build_model(cfg, env, "cpu", None), algo, CHANGED)
        # --resume: a model saved with other settings continues with the config's.
        saved = build_model(tiny_config(algo, SAVED), env, "cpu", None)
        check_model(saved, algo, SAVED)
        saved.save(tmp_path / "checkpoint.zip")
        check_model(resume_model(tmp_path / "checkpoint.zip", cfg, env, "cpu", tmp_path / "tb"), algo, CHANGED)
    finally:
        env.close()


# -- GAE at λ strictly between 0 and 1 -----------------------------------------------------------------


def test_gae_at_lambda_095_matches_the_discounted_sum_of_td_errors():
    from synergy_gym.agents.ppo_masked_minimal import gae

    gamma, lam = 0.99, 0.95
    rng = np.random.default_rng(7)
    steps, envs = 7, 2
    rewards, values = rng.normal(size=(steps, envs)), rng.normal(size=(steps, envs))
    next_value = rng.normal(size=envs)
    # dones[t] = 1: observation t began a new episode. Env 0: an episode ends after step 2 and after the last step;
    # env 1: one episode over the whole rollout, bootstrapped from next_value.
    dones = np.zeros((steps, envs))
    dones[3, 0] = 1.0
    next_done = np.array([1.0, 0.0])
    got = gae(rewards, values, dones, next_value, next_done, gamma, lam)

    expected = np.zeros((steps, envs))
    for e in range(envs):
        ends = [t + 1 < steps and dones[t + 1, e] == 1 or t + 1 == steps and next_done[e] == 1 for t in range(steps)]
        following = [next_value[e] if t + 1 == steps else values[t + 1, e] for t in range(steps)]
        td = [rewards[t, e] + (0.0 if ends[t] else gamma * following[t]) - values[t, e] for t in range(steps)]
        for t in range(steps):
            # A_t = Σ_k (γλ)^k δ_{t+k}, up to and including the episode's last step.
            total, k = 0.0, 0
            while True:
                total += (gamma * lam) ** k * td[t + k]
                if ends[t + k] or t + k + 1 == steps:
                    break
                k += 1
            expected[t, e] = total
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    # Spot checks written out: the step before the episode's end, and one whose sum crosses no end.
    d = rewards[:, 0] + gamma * np.append(values[1:, 0], next_value[0]) - values[:, 0]
    d[2] = rewards[2, 0] - values[2, 0]
    d[6] = rewards[6, 0] - values[6, 0]
    assert got[1, 0] == pytest.approx(d[1] + gamma * lam * d[2], rel=1e-12)
    assert got[0, 0] == pytest.approx(d[0] + gamma * lam * d[1] + (gamma * lam) ** 2 * d[2], rel=1e-12)
    assert got[4, 0] == pytest.approx(d[4] + gamma * lam * d[5] + (gamma * lam) ** 2 * d[6], rel=1e-12)
