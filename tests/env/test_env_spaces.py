"""The Gymnasium environment's registration and spaces: the checkers, shapes shared across ids, bounds along episodes."""


import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym import SCENARIOS
from synergy_gym.env import SynergyEnv
from synergy_gym.env.config import as_cluster, same_env_kwarg
from synergy_gym.env.levels import LevelTable
from synergy_gym.env.observation import (
    CLUSTER_FEATURES,
    DEMAND_FEATURES,
    LEVEL_FEATURES,
    QUEUE_REST_FEATURES,
    RESOURCE_HIGH,
    RUNNING_FEATURES,
    RUNNING_SLOT_FEATURES,
    SLOT_FEATURES,
    SPEEDUP_HIGH,
    slot_arrays,
)
from tests.support.env_episodes import ENV_IDS, MODES, SMALL, L, Q, run_episode

# -- registration and spaces -------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_env_checkers_pass_on_every_registered_id_without_a_warning(env_id):
    import warnings

    from gymnasium.utils.env_checker import check_env as gym_check
    from stable_baselines3.common.env_checker import check_env as sb3_check

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for preemptive in (False, True):
            gym_check(gym.make(env_id, num_jobs=12, preemptive=preemptive).unwrapped, skip_render_check=True)
            sb3_check(gym.make(env_id, num_jobs=12, preemptive=preemptive).unwrapped, warn=True)
    assert not [str(w.message) for w in caught]


def test_observation_space_bounds_are_finite():
    space = SynergyEnv(**SMALL).observation_space
    infinite = [k for k, s in space.spaces.items() if not (np.all(np.isfinite(s.low)) and np.all(np.isfinite(s.high)))]
    assert not infinite, f"observation keys with an infinite bound: {infinite}"
    assert np.all(space["demand"].low == 0.0) and np.all(space["demand"].high == 1.0)
    # The level features' bounds are constants (the same for every cluster), repeated per slot and level.
    high = space["slot_levels"].high.reshape(Q, L, len(LEVEL_FEATURES))
    np.testing.assert_array_equal(high, np.broadcast_to([RESOURCE_HIGH, RESOURCE_HIGH, SPEEDUP_HIGH], high.shape))
    assert space["running"].high[1] == SPEEDUP_HIGH


@pytest.mark.parametrize("preemptive", MODES)
def test_sb3_checker_gives_no_warning(preemptive):
    import warnings

    from stable_baselines3.common.env_checker import check_env as sb3_check

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check(SynergyEnv(**{**SMALL, "num_jobs": 12}, preemptive=preemptive), warn=True)
        sb3_check(SynergyEnv(**{**SMALL, "num_jobs": 12}, levels="grid", max_queue=3, preemptive=preemptive), warn=True)


def test_registered_ids_use_their_scenarios_and_share_the_spaces():
    envs = {env_id: gym.make(env_id).unwrapped for env_id in ENV_IDS}
    assert set(SCENARIOS) == set(ENV_IDS)
    small, big = envs["Synergy-small-v0"], envs["Synergy-v0"]
    assert small.cluster.total_gpus == 32 and small.cfg.num_jobs == 300 and small.cfg.jobs_per_hour == 2.25
    assert big.cluster.total_gpus == 128 and big.cfg.num_jobs == 1000 and big.cfg.jobs_per_hour == 9.0
    for env_id, env in envs.items():
        kwargs = SCENARIOS[env_id].kwargs
        assert env.cluster == as_cluster(kwargs["cluster"])
        assert all(same_env_kwarg(k, getattr(env.cfg, k), v) for k, v in kwargs.items() if k != "cluster")
    for env_id in ("Synergy-scarce-v0", "Synergy-small-scarce-v0"):  # fewer CPUs, more vision jobs
        assert envs[env_id].cluster.cpus_per_server < 24 and envs[env_id].cfg.class_split[0] > 20
    assert envs["Synergy-small-scarce-v0"].cluster.total_gpus == 32 and envs["Synergy-scarce-v0"].cluster.total_gpus == 128
    for env in envs.values():
        # Defaults: non-preemptive, agent orders, fallback, the five default levels, 32 slots.
        assert not env.cfg.preemptive and env.cfg.agent_orders and env.cfg.invalid_action == "fallback"
        assert env.action_space == gym.spaces.Discrete(Q * L + 1)
        assert {k: v.shape for k, v in env.observation_space.spaces.items()} == {
            k: v.shape for k, v in small.observation_space.spaces.items()
        }
    # One agent runs on every id (an SB3 model checks that the spaces are equal).
    for env in envs.values():
        assert env.observation_space == small.observation_space and env.action_space == small.action_space
    assert gym.make("synergy_gym:Synergy-small-v0").unwrapped.cluster.total_gpus == 32


@pytest.mark.parametrize("preemptive", MODES)
def test_one_model_runs_on_every_registered_id_and_its_observations_stay_in_the_shared_space(preemptive):
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    # Within a mode every id has the same spaces (preemptive "changes" adds running rows and slot_fits).
    made = {env_id: gym.make(env_id, preemptive=preemptive) for env_id in ENV_IDS}
    spaces = {env_id: (env.observation_space, env.action_space) for env_id, env in made.items()}
    assert all(s == spaces[ENV_IDS[0]] for s in spaces.values())
    model = MaskablePPO("MultiInputPolicy", gym.make(ENV_IDS[0], num_jobs=12, preemptive=preemptive), n_steps=16,
                        batch_size=16, seed=0, device="cpu")
    space = model.observation_space
    for env_id in ENV_IDS:
        env = gym.make(env_id, num_jobs=30, preemptive=preemptive, max_rounds=100_000)
        model.set_env(DummyVecEnv([lambda env=env: env]))  # SB3 refuses an env whose spaces differ
        obs, _ = env.reset(seed=4)
        done, steps, invalid = False, 0, 0
        while not done:
            assert space.contains(obs), f"{env_id} step {steps}: {[k for k in space.spaces if not space[k].contains(obs[k])]}"
            action, _ = model.predict(obs, deterministic=False)  # unmasked: masked actions fall back
            obs, reward, terminated, truncated, info = env.step(action)
            assert np.isfinite(reward) and reward <= 0
            invalid += info["invalid_action"]
            done = terminated or truncated
            steps += 1
        assert space.contains(obs) and terminated and info["jobs_finished"] == 30 and invalid > 0


CUSTOM = {"num_servers": 3, "gpus_per_server": 4, "cpus_per_server": 16, "mem_gb_per_server": 256}
#: Half a CPU and 12.5 GB per GPU: the largest levels exceed the level features' bounds and are clipped.
CPU_POOR = {"num_servers": 4, "cpus_per_server": 4, "mem_gb_per_server": 100}


@pytest.mark.parametrize("mode", [{}, {"preemptive": True, "redecide": "every_event"}, {"preemptive": True}])
def test_observation_shapes_do_not_depend_on_the_cluster(mode):
    spaces, shapes = [], []
    changes = mode.get("redecide", "changes") == "changes" and mode.get("preemptive", False)
    n_actions = Q * L * 2 + Q + 1 if changes else Q * L + 1  # with running rows: ahead admissions, preemptions
    for cluster in ("small", "default", CUSTOM, CPU_POOR):
        env = SynergyEnv(cluster=cluster, num_jobs=30, jobs_per_hour=3.0, **mode)
        obs, _ = env.reset(seed=0)
        spaces.append(env.observation_space)
        shapes.append({k: v.shape for k, v in obs.items()})
        assert env.action_space.n == n_actions
    assert all(s == shapes[0] for s in shapes)
    assert all(s == spaces[0] for s in spaces)  # the level bounds are constants: one space for every cluster
    expected = {
        "slots": (Q * len(SLOT_FEATURES),), "slot_levels": (Q * L * len(LEVEL_FEATURES),), "slot_mask": (Q,),
        "cluster": (len(CLUSTER_FEATURES),), "running": (len(RUNNING_FEATURES),), "demand": (len(DEMAND_FEATURES),),
        "queue_rest": (len(QUEUE_REST_FEATURES),), "time": (1,), "action_mask": (n_actions,),
    }
    if changes:
        expected.update({"running_slots": (Q * len(RUNNING_SLOT_FEATURES),), "running_mask": (Q,), "slot_fits": (Q * L,)})
    assert shapes[0] == expected
    assert all(len(shape) == 1 for shape in expected.values())  # flat: no image-like or unconventional shapes
    assert SynergyEnv(cluster=CUSTOM).cluster.total_gpus == 12


@pytest.mark.parametrize("levels, n_levels", [("default", L), ("grid", 45)])
def test_slot_arrays_structure_flat_observations_single_batched_numpy_and_torch(levels, n_levels):
    import torch

    env = SynergyEnv(**{**SMALL, "jobs_per_hour": 20.0}, levels=levels, max_queue=6)
    obs, _ = env.reset(seed=0)
    while env.slot_jobs.size < 2:  # a decision with several filled slots
        obs, *_ = env.step(env.action_space.n - 1)
    k = env.slot_jobs.size
    slots, slot_levels = slot_arrays(obs)
    assert slots.shape == (6, len(SLOT_FEATURES)) and slot_levels.shape == (6, n_levels, len(LEVEL_FEATURES))
    assert np.shares_memory(slots, obs["slots"])  # views, no copies
    # Row i is slot i's job: its level features, and its GPUs and remaining work.
    np.testing.assert_array_equal(slot_levels[:k], env.obs_builder.levels[env.slot_jobs])
    gpus = env.sim.jobs.gpus[env.slot_jobs] / env.cluster.total_gpus
    np.testing.assert_allclose(slots[:k, SLOT_FEATURES.index("gpu_share")], gpus, rtol=1e-6)
    assert not slots[k:].any() and not slot_levels[k:].any()
    # Flattening again gives the observation back; batches (numpy or torch) split per environment.
    np.testing.assert_array_equal(slots.reshape(-1), obs["slots"])
    batch = {key: np.stack([obs[key], np.zeros_like(obs[key]), obs[key]]) for key in obs}
    b_slots, b_levels = slot_arrays(batch)
    assert b_slots.shape == (3, 6, len(SLOT_FEATURES)) and b_levels.shape == (3, 6, n_levels, 3)
    np.testing.assert_array_equal(b_levels[2], slot_levels)
    assert not b_slots[1].any()
    t_slots, t_levels = slot_arrays({key: torch.as_tensor(v) for key, v in batch.items()})
    assert isinstance(t_slots, torch.Tensor) and t_levels.shape == (3, 6, n_levels, 3)
    np.testing.assert_array_equal(t_levels.numpy(), b_levels)
    np.testing.assert_array_equal(t_slots.numpy(), b_slots)


@pytest.mark.parametrize("max_queue", [1, 4, 32])
def test_grid_levels_give_max_queue_times_45_plus_stop_actions(max_queue):
    env = SynergyEnv(**SMALL, levels="grid", max_queue=max_queue)
    assert env.action_space == gym.spaces.Discrete(max_queue * 45 + 1)
    assert SynergyEnv(**SMALL, max_queue=max_queue).action_space.n == max_queue * L + 1
    obs, _ = env.reset(seed=0)
    assert obs["slot_levels"].shape == (max_queue * 45 * 3,) and obs["action_mask"].shape == (max_queue * 45 + 1,)
    assert slot_arrays(obs)[1].shape == (max_queue, 45, 3) and slot_arrays(obs)[0].shape == (max_queue, len(SLOT_FEATURES))
    # The grid mask is each slot job's honourable points: the fair share always, and not everything.
    u = env.unwrapped
    mask = u.action_masks()
    slots = u.slot_jobs
    assert slots.size >= 1 and mask[-1]
    rows = mask[: max_queue * 45].reshape(max_queue, 45)
    valid = LevelTable(u.zoo, u.cluster, "grid").build(u.sim.jobs)[3]  # nothing admitted yet: targets are demands
    np.testing.assert_array_equal(rows[: slots.size], valid[slots])
    assert not rows[slots.size :].any()
    fair = list(u.zoo.cpu_grid).index(3.0) * len(u.zoo.mem_grid) + list(u.zoo.mem_grid).index(62.5)
    assert rows[: slots.size, fair].all()
    obs, _, _, _ = run_episode(env, seed=1)[:4]
    assert all(env.observation_space.contains(o) for o in obs)


@pytest.mark.parametrize("preemptive", MODES)
@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({}, id="small"),
        pytest.param({"multigpu": True, "jobs_per_hour": 4.0}, id="multigpu"),
        pytest.param({"levels": "grid", "max_queue": 6}, id="grid"),
        pytest.param({"agent_orders": False, "jobs_per_hour": 5.0}, id="fifo-order"),
        pytest.param({"cluster": "default", "jobs_per_hour": 20.0, "multigpu": True}, id="default-cluster"),
        pytest.param({"cluster": {"num_servers": 4, "cpus_per_server": 12}, "class_split": (60, 20, 20)}, id="scarce"),
        pytest.param(
            {"sensitivity": "profiled", "profile_noise": 0.1, "timing": "exact", "placement": "consolidate"}, id="profiled"
        ),
        pytest.param({"cluster": CPU_POOR, "levels": "grid", "max_queue": 6}, id="cpu-poor-grid"),
    ],
)
@pytest.mark.parametrize("actions", ["any", "valid"])
def test_observations_stay_within_the_space_along_random_episodes(kwargs, preemptive, actions):
    env = SynergyEnv(**{**SMALL, "num_jobs": 40, **kwargs}, preemptive=preemptive)
    observations, rewards, _, _ = run_episode(env, seed=3, actions=actions, max_steps=1500)
    space = env.observation_space
    for i, obs in enumerate(observations):
        bad = [k for k, s in space.spaces.items() if not s.contains(obs[k])]
        assert not bad, f"step {i}: {bad} outside the observation space"
        # The slot mask marks the filled slots; the action mask only offers filled slots (and stop).
        filled = int(obs["slot_mask"].sum())
        assert np.array_equal(obs["slot_mask"], (np.arange(len(obs["slot_mask"])) < filled).astype(np.float32))
        slots, slot_levels = slot_arrays(obs)
        n_levels = slot_levels.shape[1]
        mask, q = obs["action_mask"], len(obs["slot_mask"])
        assert mask[-1] == 1.0
        assert not mask[filled * n_levels : q * n_levels].any()
        if "running_mask" in obs:  # redecide="changes": ahead admissions (as the admissions), then the rows
            ahead, rows = mask[q * n_levels : 2 * q * n_levels], mask[2 * q * n_levels : -1]
            assert not (ahead > mask[: q * n_levels]).any()
            n_rows = int(obs["running_mask"].sum())
            if i == len(observations) - 1 and env.state.truncated:  # the final one: rows shown, nothing to choose
                assert not mask[:-1].any()
            else:
                assert rows[:n_rows].all() and not rows[n_rows:].any()
        else:
            assert mask.size == q * n_levels + 1
        assert not slots[filled:].any() and not slot_levels[filled:].any()
        # A filled slot shows its job: every level has resources and a speed-up (the fair share's is 1).
        assert np.all(slot_levels[:filled] > 0)
        # Demand ratios x enter as x / (x + 1): in [0, 1), and 0 exactly when nothing is demanded.
        assert np.all((obs["demand"] >= 0) & (obs["demand"] < 1))
    assert all(np.isfinite(r) and r <= 0 for r in rewards)
