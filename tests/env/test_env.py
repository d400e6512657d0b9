"""The Gymnasium environment: its API, modes, stop, kwargs and trainers.

Actions are ``slot · L + level`` and a last *stop* (see :class:`SynergyEnv`'s docstring). The
fallback of masked actions is tested in ``test_env_actions.py``, the exactness against the
simulator in ``test_env_exactness.py``, registration and spaces in ``test_env_spaces.py``,
rewards, determinism and vector envs in ``test_env_episodes.py``.
"""


import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym import ConfigError, UnknownNameError, WorkloadError
from synergy_gym.env import SynergyEnv
from synergy_gym.env.config import REMOVED
from synergy_gym.env.levels import DEMAND_LEVEL, FAIR_LEVEL
from synergy_gym.env.observation import (
    CLUSTER_FEATURES,
    SLOT_FEATURES,
    slot_arrays,
)
from tests.support.env_episodes import MODES, SMALL, L, Q, run_episode

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
        mode = {"preemptive": True, "redecide": "every_event"} if preemptive else {}
        env = SynergyEnv(**{**SMALL, "jobs_per_hour": 6.0}, **mode)
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
        ({"redecide": "every_event"}, "env kwarg redecide='every_event' needs preemptive=True"),
        ({"max_running": 3}, "env kwarg max_running=3 needs preemptive=True with redecide='changes'"),
        ({"max_running": 3, "preemptive": True, "redecide": "every_event"}, "max_running=3 needs preemptive=True"),
    ],
)
def test_bad_kwargs_fail_in_the_constructor(kwargs, message):
    with pytest.raises((ConfigError, UnknownNameError), match=message):
        SynergyEnv(**kwargs)


def test_numpy_profile_noise_is_stored_as_a_float():
    env = SynergyEnv(**{**SMALL, "num_jobs": 5}, sensitivity="profiled", profile_noise=np.float32(0.25))
    assert type(env.cfg.profile_noise) is float and env.cfg.profile_noise == 0.25
    run_episode(env, seed=0)  # the profiler takes it


def test_a_round_too_short_for_an_iteration_names_round_s():
    env = SynergyEnv(**{**SMALL, "num_jobs": 5}, round_s=0.01)
    with pytest.raises(WorkloadError, match=r"too long to finish an iteration in a 0\.01 s round .*longer round_s"):
        env.reset(seed=0)


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


@pytest.mark.parametrize("preemptive", MODES)
def test_an_idle_cluster_waiting_for_an_arrival_past_max_rounds_is_truncated_at_max_rounds(preemptive):
    env = SynergyEnv(cluster="small", num_jobs=5, jobs_per_hour=0.01, max_rounds=500, preemptive=preemptive)
    observations, rewards, infos, _ = run_episode(env, seed=0, actions=DEMAND_LEVEL)
    sim, final = env.sim, infos[-1]
    limit = sim.first_round_s + 500 * 300.0
    assert final["episode_rounds"] == sim.rounds_elapsed == 500 and sim.now == limit
    assert final["sim_time_h"] == limit / 3600 and observations[-1]["time"][0] == 1.0
    assert env.observation_space.contains(observations[-1])
    jobs = sim.jobs
    assert (jobs.arrival_s > limit).sum() == 4  # the next arrival lies past the limit: not in the system
    assert final["jobs_finished"] == 1 and final["jobs_unfinished"] == 0
    assert np.isclose(sum(rewards), -final["mean_jct_h"], rtol=1e-12, atol=0.0)  # only the finished job counts


def test_whole_float_counts_are_stored_as_ints():
    kwargs = {"num_jobs": 10.0, "max_rounds": 100.0, "max_queue": 3.0, "max_running": np.int64(3)}
    env = gym.make("Synergy-small-v0", preemptive=True, **kwargs)
    cfg = env.unwrapped.cfg
    assert [(type(getattr(cfg, k)), getattr(cfg, k)) for k in kwargs] == [(int, 10), (int, 100), (int, 3), (int, 3)]
    assert env.action_space == SynergyEnv(cluster="small", preemptive=True, max_queue=3, max_running=3).action_space
    run_episode(env, seed=0)
    assert env.unwrapped.episode_summary()["jobs_total"] == 10


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
    mode = {"preemptive": True, "redecide": "every_event"} if preemptive else {}
    env = SynergyEnv(**{**SMALL, "jobs_per_hour": 6.0}, **mode)
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
    # A trainer without masking picks actions outside the mask: each is counted and replaced by a valid one
    # (fallback), and the episode still runs to its end.
    env = SynergyEnv(**SMALL, preemptive=True)
    plain = PPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    plain.learn(128)
    df = synergy_gym.evaluate(plain, "Synergy-small-v0", seeds=[1], num_jobs=20, preemptive=True, max_rounds=100_000)
    assert df.loc[0, "terminated"] and df.loc[0, "jobs_finished"] == df.loc[0, "jobs_total"] == 20
    assert 0 < df.loc[0, "invalid_actions"] <= df.loc[0, "decisions"]


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


def test_a_vector_env_of_rgb_frames_left_unclosed_exits_quietly():
    # Gymnasium's VectorEnv.__del__ closes it at interpreter exit, when a figure can no longer be cleared.
    import subprocess
    import sys

    code = ("import gymnasium as gym, synergy_gym\n"
            "v = gym.vector.SyncVectorEnv([lambda: gym.make('Synergy-small-v0', num_jobs=5, render_mode='rgb_array')])\n"
            "v.reset(seed=0)\nassert v.render()[0].shape == (360, 640, 3)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
