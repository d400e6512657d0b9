"""Reliability suite: long adversarial use of the environment and the sweep.

CI runs a short version (5·10^4 fuzzed steps per mode); ``pytest --long -m reliability -s -n 0``
runs the full one (10^6 fuzzed steps in each of the default and the preemptive mode, 50 long
episodes) and prints its figures.
"""

import gc
import os
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from synergy_gym.env import SynergyEnv

pytestmark = pytest.mark.reliability

#: Episode shapes the fuzzer cycles through; each runs in both modes (preemptive False / True).
SHAPES = [
    {"cluster": "small", "jobs_per_hour": 2.25},
    {"cluster": "small", "jobs_per_hour": 4.0, "multigpu": True},
    {"cluster": "small", "jobs_per_hour": 3.0, "levels": "grid", "max_queue": 8},
    {"cluster": "small", "jobs_per_hour": 6.0, "agent_orders": False},
    {"cluster": {"num_servers": 2, "gpus_per_server": 4, "cpus_per_server": 16, "mem_gb_per_server": 250},
     "jobs_per_hour": 1.5, "multigpu": True, "levels": "grid", "max_queue": 4},
    {"cluster": {"num_servers": 3, "gpus_per_server": 8, "cpus_per_server": 32, "mem_gb_per_server": 400},
     "jobs_per_hour": 3.0, "timing": "exact", "placement": "consolidate", "multigpu": True},
    {"cluster": "small", "jobs_per_hour": 2.25, "sensitivity": "profiled", "profile_noise": 0.05},
    {"cluster": {"num_servers": 4, "cpus_per_server": 12}, "class_split": (60, 20, 20), "jobs_per_hour": 3.0,
     "multigpu": True, "levels": "grid", "max_queue": 6},
    {"cluster": "default", "jobs_per_hour": 9.0, "multigpu": True, "max_queue": 16},
]
NUM_JOBS = {False: 200, True: 60}  # a preemptive episode re-decides every job at every event


def _in_space(space, obs) -> list[str]:
    return [k for k, s in space.spaces.items() if not s.contains(obs[k])]


@pytest.mark.slow
@pytest.mark.parametrize("preemptive", [False, True], ids=["default", "preemptive"])
def test_fuzzed_env_steps_keep_every_invariant(long_run, preemptive):
    """Random actions – any action of the space (fallbacks) and random valid ones – never break an invariant.

    Checked at every planned stretch of rounds (the simulator's observer): no server over
    capacity and no placed job below its fair-share throughput; and at every step: the ledger
    within capacity, a finite non-positive reward, the observation inside the space, and
    ``info["invalid_action"]`` exactly when the action was masked.
    """
    target = 1_000_000 if long_run else 50_000
    violations = {"capacity": 0, "below_fair": 0, "reward": 0, "obs": 0, "invalid_flag": 0}
    segments = 0

    def watch(sim, placed, tput):
        nonlocal segments
        segments += 1
        try:
            sim.ledger.check_capacity()
        except AssertionError:
            violations["capacity"] += 1
        # What the scheduler granted (believed throughputs when profiled) against the fair share.
        granted = np.fromiter(sim.ledger.tput, dtype=float, count=len(sim.ledger.jobs))
        if np.any(granted < sim.jobs.tput_fair[placed] - 1e-9):
            violations["below_fair"] += 1
        if sim.jobs.belief is None and np.any(tput < sim.jobs.tput_fair[placed] - 1e-9):
            violations["below_fair"] += 1

    steps = episodes = truncated_episodes = fallbacks = 0
    started = time.perf_counter()
    while steps < target:
        kwargs = SHAPES[episodes % len(SHAPES)]
        env = SynergyEnv(num_jobs=NUM_JOBS[preemptive], max_rounds=3000, preemptive=preemptive, **kwargs)
        space = env.observation_space
        n = env.action_space.n
        rng = np.random.default_rng(episodes)
        p_any = (0.1, 0.5, 0.9)[episodes % 3]  # share of actions drawn from the whole space
        env.reset(seed=episodes)
        env.sim.observer = watch
        done = False
        while not done:
            mask = env.action_masks()
            if rng.random() < p_any:
                a = int(rng.integers(n))
            else:
                valid = np.flatnonzero(mask)
                a = int(valid[rng.integers(valid.size)])
            obs, reward, terminated, truncated, info = env.step(a)
            if not (np.isfinite(reward) and reward <= 0):
                violations["reward"] += 1
            if info["invalid_action"] is not (not mask[a]):
                violations["invalid_flag"] += 1
            fallbacks += info["invalid_action"]
            try:
                env.sim.ledger.check_capacity()
            except AssertionError:
                violations["capacity"] += 1
            if _in_space(space, obs):
                violations["obs"] += 1
            done = terminated or truncated
            steps += 1
        truncated_episodes += truncated
        episodes += 1
    seconds = time.perf_counter() - started
    mode = "preemptive" if preemptive else "default"
    print(f"\nfuzzed ({mode} mode) {steps:,} steps in {episodes} episodes ({truncated_episodes} truncated), "
          f"{segments:,} planned segments, {fallbacks:,} fallbacks, {seconds:.0f} s: violations {violations}")
    assert episodes >= len(SHAPES) and fallbacks > 0
    assert violations == dict.fromkeys(violations, 0)


@pytest.mark.slow
def test_determinism_across_processes():
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    kwargs = {"cluster": "small", "num_jobs": 80, "jobs_per_hour": 3.0, "multigpu": True}

    def run(vec_cls, preemptive):  # one vector an action layout: the modes' spaces differ
        vec = vec_cls([lambda: SynergyEnv(**kwargs, preemptive=preemptive)] * 2)
        try:
            vec.seed(11)
            vec.reset()
            jcts, rng = [], np.random.default_rng(0)
            for _ in range(300):
                actions = rng.integers(vec.action_space.n, size=2)  # any action: fallbacks included
                _, _, _, infos = vec.step(actions)
                jcts.append([tuple(i["finished_jct_h"]) for i in infos])
            return jcts
        finally:
            vec.close()

    for preemptive in (False, True):
        assert run(SubprocVecEnv, preemptive) == run(DummyVecEnv, preemptive), preemptive
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    from synergy_gym import evaluate
    from synergy_gym.baselines.env_heuristics import RandomValid

    ray.init(ignore_reinit_error=True, include_dashboard=False, num_cpus=2, log_to_driver=False, logging_level="ERROR")
    args = (RandomValid(3), "Synergy-small-v0", [5, 6])
    try:
        remote = ray.get(ray.remote(evaluate).remote(*args, keep_jcts=True, **kwargs))
    finally:
        ray.shutdown()  # no Ray left running for the tests that follow
    local = evaluate(*args, keep_jcts=True, **kwargs)
    assert remote["jct_h"].tolist() == local["jct_h"].tolist()


@pytest.mark.slow
@pytest.mark.parametrize("preemptive", [False, True], ids=["default", "preemptive"])
def test_memory_stays_flat_over_long_episodes(long_run, preemptive):
    episodes = 50 if long_run else 8
    kwargs = {"cluster": "small", "num_jobs": (300 if long_run else 100) // (3 if preemptive else 1), "jobs_per_hour": 2.25}
    env = SynergyEnv(**kwargs, preemptive=preemptive)
    tracemalloc.start()
    sizes = []
    try:
        for ep in range(episodes):
            env.reset(seed=ep)
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(1)  # slot 0 at its demand
                done = terminated or truncated
            gc.collect()
            sizes.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    baseline = max(sizes[:3])
    growth = max(sizes[3:]) - baseline
    print(f"\nmemory over {episodes} episodes: {baseline / 1e6:.2f} MB after 3, growth after that {growth / 1e6:+.3f} MB")
    assert growth < 1_000_000  # under 1 MB beyond the first episodes' working set


@pytest.mark.slow
def test_a_killed_sweep_resumes_without_lost_or_duplicated_results(tmp_path):
    spec = ["--policies", "fifo+fair,fifo+tune,srtf+tune", "--load", "10,20,30", "--seed", "0..2", "--jobs", "120",
            "--cluster", "small", "--no-ray", "--quiet"]
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-m", "synergy_gym", "sweep", *spec, "--out", str(killed)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((killed / "cells").glob("*.json"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(list((killed / "cells").glob("*.json")))
    assert 3 <= before < 27, "the sweep should have been killed part-way"
    from synergy_gym.cli import main

    assert main(["sweep", *spec, "--out", str(killed)]) == 0
    clean = tmp_path / "clean"
    assert main(["sweep", *spec, "--out", str(clean)]) == 0
    resumed, fresh = (pd.read_csv(d / "results.csv").drop(columns=["wall_s"]) for d in (killed, clean))
    assert len(resumed) == 27 and not resumed.duplicated(["policy", "load", "seed"]).any()
    pd.testing.assert_frame_equal(resumed, fresh)
