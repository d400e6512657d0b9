"""The Gymnasium environment Synergy-v0 / Synergy-small-v0."""

import pickle

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from baselines import make_policy
from synergy_gym import ClusterSpec, ConfigError, Simulator, UnknownNameError
from synergy_gym.env import DEMAND_ACTION, FAIR_ACTION, SynergyEnv
from synergy_gym.generator import SyntheticWorkload
from traces.replay import write_workload_csv

SMALL = {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 60, "max_rounds": 4000}


def random_episode(env, seed, rng_seed=0, max_steps=None):
    """Random masked actions; returns (observations, rewards, infos)."""
    rng = np.random.default_rng(rng_seed)
    obs, info = env.reset(seed=seed)
    observations, rewards, infos = [obs], [], [info]
    done, steps = False, 0
    while not done and (max_steps is None or steps < max_steps):
        valid = np.flatnonzero(env.unwrapped.action_masks())
        obs, reward, terminated, truncated, info = env.step(int(valid[rng.integers(valid.size)]))
        observations.append(obs)
        rewards.append(reward)
        infos.append(info)
        done = terminated or truncated
        steps += 1
    return observations, rewards, infos


@pytest.mark.parametrize("env_id", ["Synergy-v0", "Synergy-small-v0"])
def test_env_checkers_pass(env_id):
    from gymnasium.utils.env_checker import check_env as gym_check
    from stable_baselines3.common.env_checker import check_env as sb3_check

    gym_check(gym.make(env_id).unwrapped, skip_render_check=True)
    sb3_check(gym.make(env_id).unwrapped, warn=True)


def test_registered_defaults_and_module_prefix():
    small = gym.make("synergy_gym:Synergy-small-v0").unwrapped
    assert small.cluster.total_gpus == 32 and small.cfg.num_jobs == 300 and small.cfg.jobs_per_hour == 2.25
    big = gym.make("Synergy-v0").unwrapped
    assert big.cluster.total_gpus == 128 and big.cfg.num_jobs == 1000 and big.cfg.max_rounds == 10_000
    # The same shapes for every cluster size: one agent runs on both.
    assert small.observation_space == big.observation_space and small.action_space == big.action_space


def _run_constant(env, action, seed=None):
    env.reset(seed=seed)
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    assert terminated
    return env.unwrapped.sim.jobs


def _simulate(env, policy_name):
    u = env.unwrapped
    return Simulator(u.cluster, u.sim.jobs.workload, make_policy(policy_name)).run().jobs["jct_s"].to_numpy()


@pytest.mark.parametrize("order, actions", [("fifo", (1, 0)), ("las", (1, 0)), ("srtf", (1,))])
def test_constant_actions_reproduce_tune_and_fair_on_a_generated_workload(order, actions):
    env = gym.make("Synergy-small-v0", num_jobs=120, order=order)
    for action in actions:
        policy = f"{order}+tune" if action == DEMAND_ACTION else f"{order}+fair"
        jobs = _run_constant(env, action, seed=3)
        np.testing.assert_array_equal(jobs.finish_s - jobs.arrival_s, _simulate(env, policy))


def test_constant_actions_reproduce_tune_and_fair_on_a_replayed_multigpu_workload(tmp_path):
    w = SyntheticWorkload(jobs_per_hour=3, seed=4, num_jobs=150, multigpu=True, max_gpus=32).build()
    assert (w.gpus > 1).any()
    path = write_workload_csv(w, tmp_path / "w.csv", ClusterSpec(num_servers=4))
    env = gym.make("Synergy-small-v0", workload=str(path))
    for action, policy in ((DEMAND_ACTION, "fifo+tune"), (FAIR_ACTION, "fifo+fair")):
        jobs = _run_constant(env, action)
        np.testing.assert_array_equal(jobs.finish_s - jobs.arrival_s, _simulate(env, policy))


def test_replaying_the_reference_workload_matches_the_simulator(shared_dir):
    path = shared_dir / "synergy" / "reference_workloads" / "workload_single_gpu_load5.csv"
    env = gym.make("Synergy-v0", workload=str(path), max_rounds=100_000)
    jobs = _run_constant(env, DEMAND_ACTION)
    np.testing.assert_array_equal(jobs.finish_s - jobs.arrival_s, _simulate(env, "fifo+tune"))


def test_episode_return_is_minus_total_jct():
    env = gym.make("Synergy-small-v0", **SMALL)
    _, rewards, infos = random_episode(env, seed=1)
    jobs = env.unwrapped.sim.jobs
    assert sum(rewards) == pytest.approx(-np.sum(jobs.finish_s - jobs.arrival_s) / 3600.0, rel=1e-9)
    final = infos[-1]
    assert final["jobs_finished"] == final["jobs_total"] == 60
    assert final["mean_jct_h"] == pytest.approx(np.mean(jobs.finish_s - jobs.arrival_s) / 3600.0)
    assert {"median_jct_h", "p99_jct_h", "makespan_h", "window_mean_jct_h"} <= set(final)
    reported = np.concatenate([i["finished_jct_h"] for i in infos[1:]])
    assert np.sort(reported) == pytest.approx(np.sort((jobs.finish_s - jobs.arrival_s) / 3600.0))


def test_same_seed_gives_identical_streams():
    a, b = gym.make("Synergy-small-v0", **SMALL), gym.make("Synergy-small-v0", **SMALL)
    obs_a, rew_a, _ = random_episode(a, seed=7)
    obs_b, rew_b, _ = random_episode(b, seed=7)
    assert rew_a == rew_b and len(obs_a) == len(obs_b)
    for x, y in zip(obs_a, obs_b):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key])
    _, rew_c, _ = random_episode(a, seed=8)
    assert rew_c != rew_a


def test_pickle_mid_episode_continues_identically():
    env = SynergyEnv(**SMALL)
    random_episode(env, seed=2, max_steps=25)
    clone = pickle.loads(pickle.dumps(env))
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    done = False
    while not done:
        va, vb = np.flatnonzero(env.action_masks()), np.flatnonzero(clone.action_masks())
        np.testing.assert_array_equal(va, vb)
        oa, ra, ta, ua, _ = env.step(int(va[rng_a.integers(va.size)]))
        ob, rb, tb, ub, _ = clone.step(int(vb[rng_b.integers(vb.size)]))
        assert ra == rb and ta == tb and ua == ub
        np.testing.assert_array_equal(oa["job"], ob["job"])
        done = ta or ua


def test_vector_envs():
    from stable_baselines3.common.vec_env import SubprocVecEnv

    def make():
        return SynergyEnv(**SMALL)

    vec = SubprocVecEnv([make] * 4)
    try:
        vec.seed(3)
        obs = vec.reset()
        assert obs["job"].shape == (4, 14)
        for _ in range(40):
            masks = np.stack(vec.env_method("action_masks"))
            actions = np.array([np.flatnonzero(m)[0] for m in masks])
            obs, rewards, dones, infos = vec.step(actions)
            assert np.all(np.isfinite(rewards))
    finally:
        vec.close()
    async_env = gym.vector.AsyncVectorEnv([make] * 2)
    try:
        obs, _ = async_env.reset(seed=1)
        for _ in range(20):
            obs, rewards, term, trunc, _ = async_env.step(np.array([1, 0]))
            assert obs["job"].shape == (2, 14)
    finally:
        async_env.close()


def test_maskable_ppo_trains_a_few_steps(tmp_path):
    from sb3_contrib import MaskablePPO

    model = MaskablePPO("MultiInputPolicy", SynergyEnv(**SMALL), n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(128)
    df = synergy_gym.evaluate(model, "Synergy-small-v0", seeds=[0], name="ppo", num_jobs=40)
    assert df.loc[0, "terminated"] and df.loc[0, "jobs_finished"] == 40


def test_invalid_actions_raise_naming_the_action_and_mask():
    env = SynergyEnv(**SMALL)
    env.reset(seed=0)
    mask = env.action_masks()
    with pytest.raises(ValueError, match=r"action 99 is out of range: valid actions are 0\.\.46"):
        env.step(99)
    masked = int(np.flatnonzero(~mask)[0])
    with pytest.raises(ValueError, match=rf"action {masked} is masked for job \d+; valid actions: \[0, 1, "):
        env.step(masked)
    with pytest.raises(ValueError, match="not a single integer"):
        env.step(1.5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"order": "lifo"}, "unknown order 'lifo'"),
        ({"num_jobs": 0}, "env kwarg num_jobs must be a positive integer, got 0"),
        ({"jobs_per_hour": -2}, "env kwarg jobs_per_hour must be a positive number, got -2"),
        ({"max_rounds": 1.5}, "env kwarg max_rounds must be a positive integer"),
        ({"flavour": "vanilla"}, "unknown env kwarg 'flavour'"),
        ({"cluster": {"num_servers": 0}}, "num_servers must be a positive integer, got 0"),
        ({"render_mode": "human"}, "unknown render_mode 'human'"),
    ],
)
def test_bad_kwargs_fail_in_the_constructor(kwargs, message):
    with pytest.raises((ConfigError, UnknownNameError), match=message):
        SynergyEnv(**kwargs)


def test_rllib_style_config_dict():
    env = SynergyEnv({"cluster": "small", "num_jobs": 30, "jobs_per_hour": 2})
    assert env.cfg.num_jobs == 30 and env.cluster.total_gpus == 32


def test_action_mask_keeps_only_honourable_preferences():
    env = SynergyEnv(**SMALL)
    zoo = env.zoo
    mask = env.masks.for_model(zoo.index("alexnet"), 1)
    grid = [(c, m) for c in zoo.cpu_grid for m in zoo.mem_grid]
    allowed = {grid[k] for k in range(len(grid)) if mask[2 + k]}
    assert mask[FAIR_ACTION] and mask[DEMAND_ACTION]
    assert (12.0, 125.0) in allowed and (3.0, 62.5) in allowed
    assert all(c >= 3 and m >= 62.5 for c, m in allowed)  # below fair in either is slower than fair
    # 8 GPUs on an 8-GPU server: no more than 24 CPUs / 500 GB in all, i.e. 3 and 62.5 per GPU.
    eight = env.masks.for_model(zoo.index("alexnet"), 8)
    assert {grid[k] for k in range(len(grid)) if eight[2 + k]} == {(3.0, 62.5)}
    language = env.masks.for_model(zoo.index("gnmt"), 1)
    assert language[2:].sum() == len(grid)  # flat profile: every point is as fast as fair


def test_defer_keeps_a_job_out_and_gives_up_after_max_defer_rounds():
    env = SynergyEnv(**SMALL, allow_defer=True, max_defer_rounds=3)
    assert env.action_space.n == 48
    env.reset(seed=0)
    first = env.current_job
    rounds = []
    for _ in range(3):
        assert env.current_job == first
        rounds.append(env.sim.rounds_elapsed)
        env.step(env.defer_action)
    assert rounds == [0, 1, 2]
    assert env.current_job != first and env.preference_of(first) == DEMAND_ACTION  # admitted at its demand without asking
    while env.sim.rounds_elapsed <= 3:
        env.step(DEMAND_ACTION)
    assert env.sim.jobs.start_s[first] == env.sim.first_round_s + 3 * 300


def test_reconsider_every_asks_again():
    env = SynergyEnv(cluster="small", num_jobs=5, jobs_per_hour=100, reconsider_every=4)
    env.reset(seed=0)
    asked = []
    while env.current_job >= 0:
        asked.append((env.current_job, env.sim.rounds_elapsed))
        env.step(DEMAND_ACTION)
    first_job_rounds = [r for j, r in asked if j == asked[0][0]]
    assert len(first_job_rounds) >= 2 and first_job_rounds[1] - first_job_rounds[0] >= 4


def test_truncation_at_max_rounds():
    env = SynergyEnv(cluster="small", num_jobs=200, jobs_per_hour=20, max_rounds=30)
    _, _, infos = random_episode(env, seed=0)
    final = infos[-1]
    assert env.current_job == -1 and final["episode_rounds"] == 30
    assert final["jobs_finished"] < 200 and final["jobs_unfinished"] > 0
    # Unfinished jobs count with their time so far, so the mean covers every arrived job.
    jobs = env.sim.jobs
    arrived = jobs.arrival_s <= env.sim.now
    end = np.where(np.isnan(jobs.finish_s), env.sim.now, jobs.finish_s)
    assert final["mean_jct_h"] == pytest.approx(np.mean((end - jobs.arrival_s)[arrived]) / 3600)


def test_render_modes():
    env = SynergyEnv(**SMALL, render_mode="ansi")
    env.reset(seed=0)
    env.step(DEMAND_ACTION)
    text = env.render()
    assert "server" in text and "deciding job" in text and len(text.splitlines()) == 2 + 4 + 1
    rgb = SynergyEnv(**SMALL, render_mode="rgb_array")
    rgb.reset(seed=0)
    img = rgb.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3


def test_evaluate_scores_baselines_on_identical_workloads():
    from baselines.env_policies import env_baselines

    results = {name: synergy_gym.evaluate(p, "Synergy-small-v0", seeds=[0, 1], num_jobs=80) for name, p in env_baselines().items()}
    for df in results.values():
        assert df["jobs_total"].tolist() == [80, 80] and df["terminated"].all()
    # Identical workloads: fair and tune differ only in allocation, so tune is never worse on these seeds.
    assert (results["tune"]["mean_jct_h"] <= results["fair"]["mean_jct_h"] + 1e-9).all()


def test_profiled_sensitivity_in_the_env():
    env = SynergyEnv(**SMALL, sensitivity="profiled", profile_noise=0.05)
    _, rewards, infos = random_episode(env, seed=4)
    assert infos[-1]["jobs_finished"] == 60 and np.isfinite(sum(rewards))
    assert env.sim.jobs.belief is not None
    obs, _ = env.reset(seed=4)
    j = env.current_job
    expected = np.minimum(env.sim.jobs.belief[j].reshape(-1) / env.obs_builder.tput_scale, 1.0)
    np.testing.assert_allclose(obs["job_sensitivity"], expected, rtol=1e-6)
    with pytest.raises(UnknownNameError, match="unknown sensitivity 'guessed'"):
        SynergyEnv(sensitivity="guessed")


def test_profiled_masks_follow_each_episodes_estimates():
    env = SynergyEnv(cluster="small", num_jobs=40, sensitivity="profiled", profile_noise=0.3)
    for seed in (1, 2):
        env.reset(seed=seed)
        while env.current_job >= 0:
            fresh = env.masks.from_estimates(env.sim.jobs, env.current_job)  # rebuilt from this episode's estimates
            np.testing.assert_array_equal(env.action_masks(), fresh)
            env.step(DEMAND_ACTION)
