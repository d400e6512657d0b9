"""What the environment shows of the cluster: ``slot_fits`` per slot, the final observation, the render after the end."""

import math
import re

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.env import SynergyEnv
from tests.support.env_episodes import Q, run_episode

MODE_KWARGS = {
    "default": {},
    "every_event": {"preemptive": True, "redecide": "every_event"},
    "changes": {"preemptive": True, "redecide": "changes"},
}
MODE_IDS = list(MODE_KWARGS)


def room_fits(s, j, free_gpus):
    """Per level, whether job ``j`` fits now: its GPUs in ``free_gpus`` and room for them on the ledger's servers."""
    ledger, gpus = s.sim.ledger, int(s.sim.jobs.gpus[j])
    out = np.zeros(s.level_cpu.shape[1], dtype=np.float32)
    if gpus > free_gpus:
        return out
    for lv in range(out.size):
        c, m = max(s.level_cpu[j, lv], 1e-9), max(s.level_mem[j, lv], 1e-9)
        room = sum(min(float(g), math.floor((cpu + 1e-9) / c), math.floor((mem + 1e-9) / m))
                   for g, cpu, mem in zip(ledger.free_gpu, ledger.free_cpu, ledger.free_mem))
        out[lv] = room >= gpus
    return out


@pytest.mark.parametrize("mode", MODE_IDS)
def test_slot_fits_is_the_room_for_each_slots_own_job(mode):
    # Outside redecide="changes" the slots are the waiting jobs that fit, so a slot's position in the
    # waiting jobs differs from its own once a multi-GPU job ahead of it does not fit.
    env = gym.make("Synergy-small-v0", num_jobs=40, multigpu=True, fit_features=True, jobs_per_hour=20,
                   max_rounds=100_000, **MODE_KWARGS[mode])
    u = env.unwrapped
    rng = np.random.default_rng(0)
    shifted = 0  # decisions at which some slot's job is not the waiting job at the slot's position
    for seed in (1, 2):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            s = u.state
            n_levels = s.level_cpu.shape[1]
            want = np.zeros((Q, n_levels), dtype=np.float32)
            for q, j in enumerate(s.slots):
                want[q] = room_fits(s, j, s.sim.planner.free_gpus)
            np.testing.assert_array_equal(obs["slot_fits"].reshape(Q, n_levels), want)
            shifted += not np.array_equal(s.slots, s.waiting[: s.slots.size])
            valid = np.flatnonzero(u.action_masks())
            obs, _, terminated, truncated, _ = env.step(int(valid[rng.integers(valid.size)]))
            done = terminated or truncated
    assert (shifted > 0) == (mode != "changes")


def final_state_episode(mode):
    """A multi-GPU episode truncated while jobs run and others wait; the environment and its final step."""
    env = SynergyEnv(cluster="small", num_jobs=200, jobs_per_hour=20, multigpu=True, max_rounds=33,
                     fit_features=True, **MODE_KWARGS[mode])
    observations, _, infos, _ = run_episode(env, seed=1)
    return env, observations[-1], infos[-1]


@pytest.mark.parametrize("mode", MODE_IDS)
def test_a_truncated_episodes_final_observation_is_the_state_at_the_limit(mode):
    env, final, info = final_state_episode(mode)
    s, sim = env.state, env.sim
    ledger, jobs, total = sim.ledger, sim.jobs, env.cluster.total_gpus
    assert s.truncated and info["jobs_unfinished"] > 0
    assert env.observation_space.contains(final)
    # The running jobs are the unfinished ones that hold GPUs; the others wait.
    running = ledger.jobs.copy()
    assert running.size and np.isnan(jobs.finish_s[running]).all()
    waiting = np.array([j for j in sim.runnable if j not in set(running.tolist())], dtype=np.int64)
    fits = jobs.gpus[waiting] <= ledger.free_gpus_total
    assert waiting.size and fits.any() and not fits.all()
    slots = waiting[:Q] if mode == "changes" else waiting[fits][:Q]
    # What it shows: the running jobs and their GPUs, the waiting jobs in slots, only stop to choose.
    assert final["running"][0] == np.float32(running.size / (running.size + total))
    assert final["cluster"][0] == np.float32(ledger.free_gpus_total / total) < 1.0
    assert final["slot_mask"].tolist() == [1.0] * slots.size + [0.0] * (Q - slots.size)
    assert final["action_mask"].tolist() == [0.0] * (env.action_space.n - 1) + [1.0]
    assert final["demand"][2] > 0 and final["time"][0] == 1.0
    assert env.slot_jobs.size == 0 and env.action_masks().sum() == 1
    # And it is exactly what building the observation of that state gives.
    held = np.sort(running) if mode == "every_event" else s.held_buf[: s.n_held]
    assert sorted(held.tolist()) == sorted(running.tolist())
    was_running = s.was_running.copy()
    if mode != "default":
        was_running[sim.runnable] = 0.0
        was_running[running] = 1.0
    n_fit = int(fits[:Q].sum()) if mode == "changes" else slots.size
    rows = held[-32:] if mode == "changes" else None
    want = env.obs_builder.build(sim, slots, waiting, fits, held, was_running, s.mask, 1.0, n_fit, rows, s.level)
    assert final.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(final[key], want[key], err_msg=key)
    if mode == "changes":
        assert final["running_mask"].sum() == min(running.size, 32)


@pytest.mark.parametrize("mode", ["default", "every_event"])  # (with "changes" no job finishes in the last stretch)
def test_the_render_after_a_truncation_shows_only_the_unfinished_jobs_running(mode):
    env, _, _ = final_state_episode(mode)
    env.render_mode = "ansi"
    sim = env.sim
    text = env.render()
    n = sim.ledger.n_slots
    assert f"running {n}  waiting {sim.runnable.size - n}" in text
    shown = [int(i) for line in text.splitlines()[2:] for i in re.findall(r"(\d+):[a-z]", line)]  # id:model
    ids = set(sim.jobs.job_id[np.isnan(sim.jobs.finish_s)].tolist())
    assert shown and set(shown) <= ids


@pytest.mark.parametrize("render_mode", ["ansi", "rgb_array"])
def test_after_every_job_has_finished_the_render_shows_none_running(render_mode):
    env = gym.make("Synergy-small-v0", num_jobs=8, render_mode=render_mode)
    env.reset(seed=0)
    done = False
    while not done:
        mask = env.unwrapped.action_masks()
        _, _, terminated, truncated, _ = env.step(1 if mask[1] else mask.size - 1)
        done = terminated or truncated
    assert terminated
    u = env.unwrapped
    ledger, c = u.sim.ledger, u.cluster
    assert ledger.n_slots == 0 and ledger.free_gpus_total == c.total_gpus
    assert np.array_equal(ledger.free_cpu, np.full(c.num_servers, c.cpus_per_server))
    out = env.render()
    if render_mode == "ansi":
        lines = out.splitlines()
        assert "running 0  waiting 0  finished 8/8" in lines[0]
        assert all(line.split()[1:] == ["8", "24.0", "500.0"] for line in lines[2:]) and len(lines) == 2 + 4
    else:
        assert out.ndim == 3


@pytest.mark.parametrize("mode", MODE_IDS)
def test_a_truncated_episodes_final_observation_has_the_last_rounds_arrivals(mode):
    # The same actions with and without the limit: at the limit's instant the unlimited run decides, and
    # its observation shows the jobs that arrived in the last round; the truncated run's final one must too.
    kwargs = {"num_jobs": 30, **MODE_KWARGS[mode]}
    limited = gym.make("Synergy-small-scarce-v0", max_rounds=70, **kwargs)
    unlimited = gym.make("Synergy-small-scarce-v0", max_rounds=10**6, **kwargs)
    obs, _ = limited.reset(seed=2)
    other, _ = unlimited.reset(seed=2)
    rng, truncated = np.random.default_rng(2), False
    while not truncated:
        action = int(rng.choice(np.flatnonzero(limited.unwrapped.action_masks())))
        obs, _, terminated, truncated, info = limited.step(action)
        other, *_ = unlimited.step(action)
        assert not terminated
    sim = limited.unwrapped.sim
    assert unlimited.unwrapped.sim.now == sim.now
    arrived = np.flatnonzero((sim.jobs.arrival_s > sim.now - 300) & (sim.jobs.arrival_s <= sim.now))
    assert arrived.size > 0 and info["jobs_unfinished"] > 0
    assert set(arrived.tolist()) <= set(limited.unwrapped.loop.final_view(limited.unwrapped.state).waiting.tolist())
    if mode != "every_event":  # (there a decision would first return the running jobs to the waiting ones)
        for key in ("slot_mask", "demand", "queue_rest", "cluster"):
            np.testing.assert_array_equal(obs[key], other[key], err_msg=key)


def test_a_truncated_episodes_makespan_runs_to_its_end():
    # A policy that never admits a job finishes nothing: its makespan must not look like the best (it was 0).
    env = SynergyEnv(cluster="small", num_jobs=10, jobs_per_hour=2.25, max_rounds=30)
    env.reset(seed=1)
    stop = env.action_space.n - 1
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(stop)
        done = terminated or truncated
    sim = env.sim
    assert truncated and info["jobs_finished"] == 0 and info["jobs_unfinished"] > 0
    assert info["makespan_h"] == (sim.now - sim.jobs.arrival_s[0]) / 3600 > 0
