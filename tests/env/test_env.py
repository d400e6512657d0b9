"""The Gymnasium environment: its API, spaces, modes, stop, determinism and rewards.

Actions are ``slot · L + level`` and a last *stop* (see :class:`SynergyEnv`'s docstring). The
fallback of masked actions is tested in ``test_env_actions.py``, the exactness against the
simulator in ``test_env_exactness.py``.
"""

import pickle

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym import SCENARIOS, ConfigError, UnknownNameError
from synergy_gym.env import SynergyEnv
from synergy_gym.env.config import REMOVED, as_cluster
from synergy_gym.env.levels import DEMAND_LEVEL, FAIR_LEVEL, LevelTable
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

SMALL = {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 60, "max_rounds": 4000}
ENV_IDS = ["Synergy-v0", "Synergy-small-v0", "Synergy-scarce-v0", "Synergy-small-scarce-v0"]
MODES = [pytest.param(False, id="default"), pytest.param(True, id="preemptive")]
L = 5  # default levels per slot
Q = 32  # default max_queue


def run_episode(env, seed, actions="valid", rng_seed=0, max_steps=None, options=None):
    """Run an episode: ``actions`` "valid" (random valid), "any" (random over the space) or an int.

    Returns (observations, rewards, infos, actions taken).
    """
    rng = np.random.default_rng(rng_seed)
    u = env.unwrapped
    obs, info = env.reset(seed=seed, options=options)
    observations, rewards, infos, taken = [obs], [], [info], []
    done, steps = False, 0
    while not done and (max_steps is None or steps < max_steps):
        if actions == "valid":
            valid = np.flatnonzero(u.action_masks())
            a = int(valid[rng.integers(valid.size)])
        elif actions == "any":
            a = int(rng.integers(u.action_space.n))
        else:
            a = int(actions)
        obs, reward, terminated, truncated, info = env.step(a)
        observations.append(obs)
        rewards.append(reward)
        infos.append(info)
        taken.append(a)
        done = terminated or truncated
        steps += 1
    return observations, rewards, infos, taken


def assert_same_obs(x, y):
    assert x.keys() == y.keys()
    for key in x:
        np.testing.assert_array_equal(x[key], y[key], err_msg=key)


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
        assert all(getattr(env.cfg, k) == v for k, v in kwargs.items() if k != "cluster")
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
            assert rows[:n_rows].all() and not rows[n_rows:].any()
        else:
            assert mask.size == q * n_levels + 1
        assert not slots[filled:].any() and not slot_levels[filled:].any()
        # A filled slot shows its job: every level has resources and a speed-up (the fair share's is 1).
        assert np.all(slot_levels[:filled] > 0)
        # Demand ratios x enter as x / (x + 1): in [0, 1), and 0 exactly when nothing is demanded.
        assert np.all((obs["demand"] >= 0) & (obs["demand"] < 1))
    assert all(np.isfinite(r) and r <= 0 for r in rewards)


# -- modes, stop and agent_orders ----------------------------------------------------------------


def test_agent_orders_false_offers_only_the_first_slot_and_stop():
    env = SynergyEnv(**{**SMALL, "jobs_per_hour": 8.0}, agent_orders=False)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    crowded = 0
    done = False
    while not done:
        mask = env.action_masks()
        assert mask[:L].any() and mask[-1] and not mask[L:-1].any()
        crowded += env.slot_jobs.size > 1  # more jobs fit, yet only slot 0 is offered
        valid = np.flatnonzero(mask)
        _, _, terminated, truncated, _ = env.step(int(valid[rng.integers(valid.size)]))
        done = terminated or truncated
    assert crowded > 10 and terminated


@pytest.mark.parametrize("preemptive", MODES)
def test_a_stop_that_leaves_the_cluster_idle_moves_exactly_one_round_and_counts_toward_max_rounds(preemptive):
    env = SynergyEnv(**{**SMALL, "max_rounds": 7}, preemptive=preemptive)
    env.reset(seed=0)
    stop = env.action_space.n - 1
    assert env.action_masks()[stop] and env.sim.ledger.n_slots == 0  # the first decision: nothing runs yet
    now, rounds = env.sim.now, env.sim.rounds_elapsed
    assert rounds == 0
    steps, truncated, info = 0, False, {}
    while not truncated:
        assert env.slot_jobs.size >= 1 and env.sim.ledger.n_slots == 0
        _, reward, terminated, truncated, info = env.step(stop)
        steps += 1
        assert not terminated and reward < 0 and not info["invalid_action"]
        assert env.sim.now == pytest.approx(now + 300.0 * steps, abs=1e-6)
        assert env.sim.rounds_elapsed == rounds + steps
    assert steps == 7 and info["episode_rounds"] == 7
    assert info["jobs_finished"] == 0 and info["jobs_unfinished"] >= 1 and info["decisions"] == 7
    with pytest.raises(RuntimeError, match="the episode has ended"):
        env.step(stop)


def test_a_stop_with_jobs_running_waits_for_the_next_event():
    env = SynergyEnv(**{**SMALL, "jobs_per_hour": 30.0})  # single-GPU jobs, a long queue
    rng = np.random.default_rng(1)
    env.reset(seed=1)
    stop = env.action_space.n - 1
    admitted: set[int] = set()
    checked = 0
    for _ in range(400):
        slots = env.slot_jobs
        finish = env.sim.jobs.finish_s
        running = {j for j in admitted if np.isnan(finish[j])}
        if slots.size >= 2 and running:
            before = env.sim.now
            _, _, terminated, truncated, info = env.step(stop)
            if terminated or truncated:
                break
            # Time moved on to the round boundary at which a job arrived or finished ...
            now = env.sim.now
            arrivals = env.sim.jobs.arrival_s
            assert now > before and now % 300.0 == pytest.approx(0.0, abs=1e-6)
            assert info["finished_job_ids"] or np.any((arrivals > before) & (arrivals <= now))
            # ... and the passed-over jobs still wait, first, in arrival order.
            np.testing.assert_array_equal(env.slot_jobs[: slots.size], slots)
            checked += 1
        else:
            valid = np.flatnonzero(env.action_masks()[:-1])
            a = int(valid[rng.integers(valid.size)]) if valid.size else stop
            if a != stop:
                admitted.add(int(slots[a // L]))
            _, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                break
    assert checked >= 5


def test_default_mode_keeps_admitted_jobs_running_and_preemptive_mode_re_decides_them():
    for preemptive in (False, True):  # preemptive: every job decided again at every event
        env = SynergyEnv(**{**SMALL, "jobs_per_hour": 6.0}, preemptive=preemptive, redecide="every_event")
        env.reset(seed=2)
        asked_again = 0
        admitted: set[int] = set()
        done = False
        while not done:
            slots = env.slot_jobs
            asked_again += len(set(slots.tolist()) & admitted)
            admitted.add(int(slots[0]))
            obs, _, terminated, truncated, _ = env.step(DEMAND_LEVEL)
            done = terminated or truncated
            if not preemptive:
                assert not slot_arrays(obs)[0][:, SLOT_FEATURES.index("was_running")].any()
        assert terminated
        if preemptive:
            assert asked_again > 0  # running jobs return to the waiting set at each event
        else:
            assert asked_again == 0  # an admitted job keeps its GPUs until it finishes


def test_preemptive_observations_flag_the_jobs_that_were_running():
    env = SynergyEnv(**{**SMALL, "jobs_per_hour": 6.0, "multigpu": True}, preemptive=True, redecide="every_event")
    obs, _ = env.reset(seed=2)
    col = SLOT_FEATURES.index("was_running")
    now, before, admitted = env.sim.now, set(), set()
    seen = events = 0
    done = False
    while not done:
        slots = env.slot_jobs
        # A slot's job is flagged exactly when it held GPUs until this event.
        flags = slot_arrays(obs)[0][:, col]
        np.testing.assert_array_equal(flags[: slots.size], [float(j in before) for j in slots.tolist()])
        seen += int(flags.sum())
        admitted.add(int(slots[0]))
        obs, _, terminated, truncated, _ = env.step(DEMAND_LEVEL)
        done = terminated or truncated
        if env.sim.now != now:  # a new event: what this one admitted (and did not finish) was running
            finished = env.sim.jobs.finish_s
            before = {j for j in admitted if np.isnan(finished[j])}
            admitted, now = set(), env.sim.now
            events += 1
    assert seen > 0 and events > 10


def test_levels_chosen_are_recorded_per_job():
    env = SynergyEnv(**SMALL)
    env.reset(seed=0)
    assert all(env.level_of(j) == -1 for j in range(env.sim.jobs.n))
    j = int(env.slot_jobs[0])
    obs, _, _, _, _ = env.step(FAIR_LEVEL)
    assert env.level_of(j) == FAIR_LEVEL
    k = int(env.slot_jobs[0])
    obs_k = slot_arrays(obs)[1][:1]
    env.step(3)
    assert env.level_of(k) == 3
    # The job asks for that level's CPUs and memory (as observed, relative to the fair share).
    cluster = env.cluster
    assert env.sim.jobs.target_cpu[k] == pytest.approx(obs_k[0, 3, 0] * cluster.fair_cpus_per_gpu, rel=1e-6)
    assert env.sim.jobs.target_mem[k] == pytest.approx(obs_k[0, 3, 1] * cluster.fair_mem_gb_per_gpu, rel=1e-6)


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
    assert SynergyEnv(config, num_jobs=12).cfg.num_jobs == 12  # kwargs override the dict
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


# -- kwargs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REMOVED))
def test_removed_kwargs_are_config_errors_naming_the_kwarg(name):
    assert set(REMOVED) == {"kernels"}
    with pytest.raises(ConfigError, match=rf"env kwarg '{name}' was removed"):
        SynergyEnv(**SMALL, **{name: 3})
    with pytest.raises(ConfigError, match=rf"'{name}'"):
        gym.make("Synergy-small-v0", **{name: 3})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_jobs": 0}, "env kwarg num_jobs must be a positive integer, got 0"),
        ({"jobs_per_hour": -2}, "env kwarg jobs_per_hour must be a positive number, got -2"),
        ({"max_rounds": 1.5}, "env kwarg max_rounds must be a positive integer"),
        ({"max_queue": 0}, "env kwarg max_queue must be a positive integer, got 0"),
        ({"flavour": "vanilla"}, "unknown env kwarg 'flavour'"),
        ({"cluster": {"num_servers": 0}}, "num_servers must be a positive integer, got 0"),
        ({"render_mode": "human"}, "unknown render_mode 'human'"),
        ({"invalid_action": "ignore"}, "unknown invalid_action 'ignore'"),
        ({"levels": "coarse"}, "unknown levels 'coarse'"),
        ({"preemptive": "yes"}, "env kwarg preemptive must be true or false, got 'yes'"),
        ({"agent_orders": 1}, "env kwarg agent_orders must be true or false, got 1"),
    ],
)
def test_bad_kwargs_fail_in_the_constructor(kwargs, message):
    with pytest.raises((ConfigError, UnknownNameError), match=message):
        SynergyEnv(**kwargs)


def test_step_before_reset_and_after_the_end_are_errors():
    env = SynergyEnv(**{**SMALL, "num_jobs": 3})
    with pytest.raises(RuntimeError, match=r"^Cannot call env\.step\(\) before calling env\.reset\(\)$"):
        env.step(0)
    run_episode(env, seed=0, actions=DEMAND_LEVEL)
    with pytest.raises(RuntimeError, match="the episode has ended"):
        env.step(0)
    assert env.slot_jobs.size == 0 and env.action_masks().tolist() == [False] * (Q * L) + [True]


def test_truncation_at_max_rounds_counts_unfinished_jobs():
    env = SynergyEnv(cluster="small", num_jobs=200, jobs_per_hour=20, max_rounds=30)
    _, rewards, infos, _ = run_episode(env, seed=0)
    assert infos[-1]["episode_rounds"] == 30
    final = infos[-1]
    assert final["episode_rounds"] == 30 and env.slot_jobs.size == 0
    assert final["jobs_finished"] < 200 and final["jobs_unfinished"] > 0
    jobs = env.sim.jobs
    arrived = jobs.arrival_s <= env.sim.now
    end = np.where(np.isnan(jobs.finish_s), env.sim.now, jobs.finish_s)
    assert final["mean_jct_h"] == pytest.approx(np.mean((end - jobs.arrival_s)[arrived]) / 3600)
    # The return counts every arrived job's time in the system so far.
    assert np.isclose(sum(rewards), -np.sum((end - jobs.arrival_s)[arrived]) / 3600, rtol=1e-9, atol=0.0)


def test_render_modes_on_the_scheduling_action_space():
    env = SynergyEnv(**SMALL, render_mode="ansi")
    env.reset(seed=0)
    env.step(DEMAND_LEVEL)
    text = env.render()
    j = int(env.slot_jobs[0])
    lines = text.splitlines()
    assert "server" in text and len(lines) == 2 + 4 + 1
    assert lines[-1].startswith(f"deciding job {env.sim.jobs.job_id[j]} (")  # the job in slot 0
    run_episode(env, seed=0, actions=DEMAND_LEVEL)
    assert "deciding job" not in env.render() and len(env.render().splitlines()) == 2 + 4
    plain = SynergyEnv(**SMALL)
    plain.reset(seed=0)
    assert plain.render() is None


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_render_before_reset_shows_the_empty_cluster(mode):
    env = SynergyEnv(**SMALL, render_mode=mode)
    out = env.render()
    if mode == "ansi":
        assert out == "(not reset)"
    else:
        assert out.ndim == 3 and out.shape[2] == 3 and out.dtype == np.uint8
    env.reset(seed=0)  # and the environment works as usual afterwards
    assert env.render() is not None
    env.close()


@pytest.mark.parametrize("preemptive", MODES)
def test_observed_running_jobs_are_the_jobs_holding_gpus(preemptive):
    # Mid-event observations show the jobs admitted so far (the planner settles its ledger at each
    # event start): not last round's placement, whose finished jobs (and in preemptive mode, jobs
    # not re-admitted yet) no longer hold GPUs.
    # Preemptive: every job decided again at every event (tests/env/test_env_changes.py: the rows).
    env = SynergyEnv(**{**SMALL, "jobs_per_hour": 6.0}, preemptive=preemptive, redecide="every_event")
    obs, _ = env.reset(seed=0)
    g = env.cluster.total_gpus
    jobs = env.sim.jobs
    # Best-case CPU and memory demand of each job against the cluster's (targets are the demands now).
    c = env.cluster
    demand = np.stack([jobs.gpus * jobs.target_cpu / c.total_cpus, jobs.gpus * jobs.target_mem / c.total_mem_gb], axis=1)
    col = CLUSTER_FEATURES.index("running")
    now, this_event, admitted = env.sim.now, set(), set()
    done, mid_event = False, 0
    while not done:
        finish = env.sim.jobs.finish_s
        held = this_event if preemptive else {j for j in admitted if np.isnan(finish[j])}
        n = len(held)
        assert obs["running"][0] == pytest.approx(n / (n + g)) and obs["cluster"][col] == pytest.approx(n / (n + g))
        assert obs["cluster"][0] == pytest.approx(1.0 - sum(int(env.sim.jobs.gpus[j]) for j in held) / g)
        x = demand[sorted(held)].sum(axis=0)
        np.testing.assert_allclose(obs["demand"][:2], x / (x + 1.0), rtol=1e-5, atol=1e-7)
        mid_event += bool(this_event)
        j = int(env.slot_jobs[0])
        obs, _, terminated, truncated, _ = env.step(DEMAND_LEVEL)
        done = terminated or truncated
        this_event.add(j)
        admitted.add(j)
        if env.sim.now != now:
            this_event, now = set(), env.sim.now
    assert terminated and mid_event >= 10


# -- trainers and evaluation ---------------------------------------------------------------------


def test_maskable_and_plain_ppo_train_a_few_steps():
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    masked = MaskablePPO("MultiInputPolicy", SynergyEnv(**SMALL), n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    masked.learn(128)
    df = synergy_gym.evaluate(masked, "Synergy-small-v0", seeds=[0], name="ppo", num_jobs=40)
    assert df.loc[0, "terminated"] and df.loc[0, "jobs_finished"] == 40
    # A trainer without masking samples outside the mask: every action is accepted (fallback).
    env = SynergyEnv(**SMALL, preemptive=True)
    plain = PPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    plain.learn(128)
    df = synergy_gym.evaluate(plain, "Synergy-small-v0", seeds=[1], num_jobs=20, preemptive=True, max_rounds=100_000)
    assert df.loc[0, "jobs_total"] == 20 and df.loc[0, "invalid_actions"] >= 0


def test_evaluate_scores_env_heuristics_on_the_workloads_of_their_seeds():
    from synergy_gym import SimulationConfig, Simulator
    from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES, env_heuristics
    from synergy_gym.baselines.registry import make_policy

    assert {"fifo+tune", "srtf+tune", "las+tune", "tetris", "fifo+price", "srtf+price", "random"} <= set(HEURISTIC_NAMES)
    results = {
        name: synergy_gym.evaluate(p, "Synergy-small-v0", seeds=[0, 1], num_jobs=80) for name, p in env_heuristics().items()
    }
    for df in results.values():
        assert df["jobs_total"].tolist() == [80, 80] and df["terminated"].all()
        assert (df["invalid_actions"] == 0).all()  # heuristics read the mask
    # fifo+tune in the env is the simulator's fifo+tune on the same jobs (single-GPU, default mode).
    env = SynergyEnv(cluster="small", jobs_per_hour=2.25, num_jobs=80)
    for i, seed in enumerate((0, 1)):
        config = SimulationConfig(record_rounds=False)
        sim = Simulator(env.cluster, env.workload_for_seed(seed), make_policy("fifo+tune"), config)
        sim.run()
        jct_h = (sim.jobs.finish_s - sim.jobs.arrival_s) / 3600
        assert results["fifo+tune"]["mean_jct_h"].iloc[i] == pytest.approx(jct_h.mean(), rel=1e-12)
