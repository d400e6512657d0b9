"""The Gymnasium environment's rewards, determinism, pickling, vector envs and workload seeds."""

import pickle

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym import ConfigError
from synergy_gym.env import SynergyEnv
from synergy_gym.env.levels import DEMAND_LEVEL
from synergy_gym.env.observation import (
    SLOT_FEATURES,
    slot_arrays,
)
from tests.support.env_episodes import MODES, SMALL, L, Q, assert_same_obs, run_episode

# -- rewards, seeds, workloads -----------------------------------------------------------------


@pytest.mark.parametrize("preemptive", MODES)
@pytest.mark.parametrize("actions, scale", [("valid", 3600.0), ("any", 60.0), (DEMAND_LEVEL, 3600.0)])
def test_episode_return_is_minus_total_jct_over_the_reward_scale(preemptive, actions, scale):
    kwargs = {**SMALL, "multigpu": True, "jobs_per_hour": 3.0, "max_rounds": 100_000}
    env = SynergyEnv(**kwargs, preemptive=preemptive, reward_scale=scale)
    _, rewards, infos, _ = run_episode(env, seed=1, actions=actions)
    jobs = env.sim.jobs
    jct_s = jobs.finish_s - jobs.arrival_s
    final = infos[-1]
    assert final["jobs_finished"] == final["jobs_total"] == 60 and final["jobs_unfinished"] == 0
    assert np.isclose(sum(rewards), -np.sum(jct_s) / scale, rtol=1e-9, atol=0.0)
    assert all(r <= 0 for r in rewards)
    assert final["mean_jct_h"] == pytest.approx(np.mean(jct_s) / 3600.0)
    assert {"median_jct_h", "p99_jct_h", "makespan_h", "window_mean_jct_h", "decisions", "invalid_actions"} <= set(final)
    assert final["decisions"] == len(rewards)
    assert final["invalid_actions"] == sum(bool(i["invalid_action"]) for i in infos[1:])
    reported = np.concatenate([i["finished_jct_h"] for i in infos[1:]])
    ids = np.concatenate([i["finished_job_ids"] for i in infos[1:]])
    assert sorted(ids.tolist()) == sorted(jobs.job_id.tolist())
    assert np.sort(reported) == pytest.approx(np.sort(jct_s / 3600.0))


@pytest.mark.parametrize("preemptive", MODES)
def test_same_seed_gives_identical_streams(preemptive):
    kwargs = {**SMALL, "multigpu": True, "jobs_per_hour": 3.0, "preemptive": preemptive}
    a, b = SynergyEnv(**kwargs), gym.make("Synergy-small-v0", **kwargs)
    for actions in ("any", "valid"):
        obs_a, rew_a, inf_a, _ = run_episode(a, seed=7, actions=actions)
        obs_b, rew_b, inf_b, _ = run_episode(b, seed=7, actions=actions)
        assert rew_a == rew_b and len(obs_a) == len(obs_b)
        for x, y in zip(obs_a, obs_b):
            assert_same_obs(x, y)
        assert [i.get("finished_job_ids") for i in inf_a] == [i.get("finished_job_ids") for i in inf_b]
        # The same env, reset again with the same seed, repeats itself.
        _, rew_again, _, _ = run_episode(a, seed=7, actions=actions)
        assert rew_again == rew_a
    _, rew_c, _, _ = run_episode(a, seed=8, actions="valid")
    assert rew_c != rew_a


@pytest.mark.parametrize("preemptive", MODES)
def test_pickle_mid_episode_continues_identically(preemptive):
    # Few slots, so that the queue beyond them (whose work left the observation sums) is long.
    env = SynergyEnv(**{**SMALL, "multigpu": True, "jobs_per_hour": 3.0, "max_queue": 4}, preemptive=preemptive)
    run_episode(env, seed=2, actions="any", max_steps=40)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.sim is not env.sim
    np.testing.assert_array_equal(clone.action_masks(), env.action_masks())
    np.testing.assert_array_equal(clone.slot_jobs, env.slot_jobs)
    rng = np.random.default_rng(5)
    done, steps = False, 0
    while not done:
        a = int(rng.integers(env.action_space.n))
        oa, ra, ta, ua, ia = env.step(a)
        ob, rb, tb, ub, ib = clone.step(a)
        assert (ra, ta, ua) == (rb, tb, ub) and ia == ib
        assert_same_obs(oa, ob)
        done = ta or ua
        steps += 1
    assert ta and steps > 20
    np.testing.assert_array_equal(env.sim.jobs.finish_s, clone.sim.jobs.finish_s)


def test_a_pickled_job_table_keeps_its_progress_views():
    # JobTable.executed/start_s/attained_s/last_end_s are views of .progress; pickling re-binds them.
    env = SynergyEnv(**SMALL, preemptive=True)
    run_episode(env, seed=2, actions=DEMAND_LEVEL, max_steps=40)
    jobs = pickle.loads(pickle.dumps(env)).sim.jobs
    assert jobs.executed.any()  # progress was made before pickling
    for name in ("executed", "start_s", "attained_s", "last_end_s"):
        column = getattr(jobs, name)
        assert np.shares_memory(column, jobs.progress), name
        before = column.copy()
        jobs.progress[:] += 1.0  # writes through the table are seen by the column
        np.testing.assert_array_equal(column, before + 1.0, err_msg=name)
    again = pickle.loads(pickle.dumps(jobs))  # and the table alone
    for name in ("executed", "start_s", "attained_s", "last_end_s"):
        assert np.shares_memory(getattr(again, name), again.progress), name
        np.testing.assert_array_equal(getattr(again, name), getattr(jobs, name), err_msg=name)


def _make_small():
    return SynergyEnv(**SMALL)


def _make_small_preemptive():
    return SynergyEnv(**SMALL, preemptive=True, redecide="every_event")  # the default mode's spaces


@pytest.mark.slow  # about 5 s, almost all of it starting the worker processes
def test_stable_baselines_subproc_vec_env():
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    def run(vec_cls):
        vec = vec_cls([_make_small, _make_small_preemptive])
        try:
            vec.seed(3)
            obs = vec.reset()
            assert obs["slots"].shape == (2, Q * len(SLOT_FEATURES)) and obs["action_mask"].shape == (2, Q * L + 1)
            assert slot_arrays(obs)[0].shape == (2, Q, len(SLOT_FEATURES))
            rng = np.random.default_rng(0)
            trace = []
            for _ in range(150):
                masks = np.stack(vec.env_method("action_masks"))
                np.testing.assert_array_equal(masks, obs["action_mask"] > 0)
                actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
                obs, rewards, _, infos = vec.step(actions)
                assert np.all(np.isfinite(rewards)) and np.all(rewards <= 0)
                trace.append((rewards.astype(np.float32).tolist(), [tuple(i["finished_job_ids"]) for i in infos]))
            return trace
        finally:
            vec.close()

    assert run(SubprocVecEnv) == run(DummyVecEnv)


def test_gymnasium_async_vector_env_accepts_any_action():
    vec = gym.vector.AsyncVectorEnv([_make_small, _make_small_preemptive])
    try:
        obs, _ = vec.reset(seed=1)
        assert obs["slot_levels"].shape == (2, Q * L * 3) and slot_arrays(obs)[1].shape == (2, Q, L, 3)
        vec.action_space.seed(0)
        invalid = 0
        for _ in range(60):
            obs, rewards, _, _, info = vec.step(vec.action_space.sample())  # unmasked samples fall back
            assert obs["slots"].shape == (2, Q * len(SLOT_FEATURES)) and np.all(rewards <= 0)
            invalid += int(np.sum(info["invalid_action"]))
        assert invalid > 0
    finally:
        vec.close()


def test_rllib_style_config_dict():
    class EnvContext(dict):  # RLlib passes a dict subclass with worker attributes
        worker_index = 1
        vector_index = 0

    config = EnvContext(
        {"cluster": "small", "num_jobs": 30, "jobs_per_hour": 2, "preemptive": True, "levels": "grid", "max_queue": 8}
    )
    env = SynergyEnv(config)
    assert env.cfg.num_jobs == 30 and env.cluster.total_gpus == 32 and env.cfg.preemptive
    assert env.action_space.n == 2 * 8 * 45 + env.cfg.max_running + 1  # admissions, ahead, running rows, stop
    assert SynergyEnv(config, num_jobs=30, round_s=300.0).cfg.num_jobs == 30  # kwargs add to the dict, equal values fine
    with pytest.raises(ConfigError, match="config sets num_jobs=30, but a keyword argument sets num_jobs=12"):
        SynergyEnv(config, num_jobs=12)  # a key set differently in both: refused, not silently overridden
    _, _, infos, _ = run_episode(env, seed=0)
    assert infos[-1]["jobs_finished"] == 30
    with pytest.raises(ConfigError, match="env kwarg 'kernels' was removed"):
        SynergyEnv({"cluster": "small", "kernels": "numpy"})


def test_reset_on_a_workload_seed_runs_workload_for_seed():
    env = SynergyEnv(**{**SMALL, "multigpu": True})
    w = env.workload_for_seed(1_000_003)
    env.reset(seed=5, options={"workload_seed": 1_000_003})
    jobs = env.sim.jobs
    for name in ("job_id", "model", "gpus", "arrival_s", "iter_time_s", "total_iters"):
        np.testing.assert_array_equal(getattr(jobs, name), getattr(w, name), err_msg=name)
    other = env.workload_for_seed(1_000_004)
    assert not np.array_equal(other.arrival_s, w.arrival_s)
    assert np.array_equal(env.workload_for_seed(1_000_003).arrival_s, w.arrival_s)  # a pure function of the seed
    # Independent of the env's own seed; the env's stream of actions/levels is unaffected.
    a = run_episode(SynergyEnv(**SMALL), seed=1, options={"workload_seed": 9})[1]
    b = run_episode(SynergyEnv(**SMALL), seed=2, options={"workload_seed": 9}, rng_seed=0)[1]
    assert a == b


@pytest.mark.parametrize("seed", [5, 7])
def test_exact_timing_truncates_after_max_rounds_not_before(seed):
    # With timing="exact" the clock stops mid-round at completions; a round under way counted as whole
    # (rounded to the nearest) ended these episodes about 0.4 rounds before max_rounds.
    import gymnasium as gym

    from synergy_gym.baselines.env_heuristics import env_heuristics

    policy = env_heuristics()["fifo+tune"]
    env = gym.make("Synergy-small-v0", num_jobs=60, timing="exact", max_rounds=15, jobs_per_hour=20)
    obs, _ = env.reset(seed=seed, options={"workload_seed": seed})
    terminated = truncated = False
    while not (terminated or truncated):
        action, _ = policy.predict(obs, action_masks=env.unwrapped.action_masks())
        obs, _, terminated, truncated, info = env.step(int(action))
    sim = env.unwrapped.sim
    elapsed = (sim.now - sim.first_round_s) / sim.config.round_s
    assert truncated and elapsed >= 15 - 1e-9 and info["episode_rounds"] == int(np.floor(elapsed + 1e-9)) == 15
