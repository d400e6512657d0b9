"""Reliability suite: long adversarial use of the environment and the sweep.

CI runs a short version; ``pytest --long -m reliability`` runs the full one
(10^6 fuzzed steps, 50 long episodes) and prints its figures.
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

SHAPES = [
    {"cluster": "small", "jobs_per_hour": 2.25},
    {"cluster": "small", "jobs_per_hour": 4.0, "multigpu": True, "order": "srtf"},
    {"cluster": {"num_servers": 2, "gpus_per_server": 4, "cpus_per_server": 16, "mem_gb_per_server": 250},
     "jobs_per_hour": 1.5, "multigpu": True, "allow_defer": True},
    {"cluster": {"num_servers": 3, "gpus_per_server": 8, "cpus_per_server": 32, "mem_gb_per_server": 400},
     "jobs_per_hour": 3.0, "order": "las", "timing": "exact", "placement": "consolidate"},
    {"cluster": "small", "jobs_per_hour": 3.0, "reconsider_every": 5, "allow_defer": True, "max_defer_rounds": 3},
    {"cluster": "small", "jobs_per_hour": 2.25, "sensitivity": "profiled", "profile_noise": 0.05},
]


@pytest.mark.slow
def test_fuzzed_env_steps_keep_every_invariant(long_run):
    target = 1_000_000 if long_run else 100_000
    violations = {"capacity": 0, "below_fair": 0, "reward": 0}

    def watch(sim, placed, tput):
        try:
            sim.ledger.check_capacity()
        except AssertionError:
            violations["capacity"] += 1
        if sim.jobs.belief is None and np.any(tput < sim.jobs.tput_fair[placed] - 1e-12):
            violations["below_fair"] += 1

    steps = episodes = 0
    started = time.perf_counter()
    while steps < target:
        kwargs = SHAPES[episodes % len(SHAPES)]
        env = SynergyEnv(num_jobs=200, max_rounds=5000, **kwargs)
        rng = np.random.default_rng(episodes)
        env.reset(seed=episodes)
        env.sim.observer = watch
        done = False
        while not done:
            valid = np.flatnonzero(env.action_masks())
            _, reward, terminated, truncated, _ = env.step(int(valid[rng.integers(valid.size)]))
            if not (np.isfinite(reward) and reward <= 0):
                violations["reward"] += 1
            done = terminated or truncated
            steps += 1
        episodes += 1
    print(f"\nfuzzed {steps:,} steps in {episodes} episodes ({time.perf_counter() - started:.0f} s): violations {violations}")
    assert violations == {"capacity": 0, "below_fair": 0, "reward": 0}


@pytest.mark.slow
def test_determinism_across_processes():
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    kwargs = {"cluster": "small", "num_jobs": 80, "jobs_per_hour": 3.0, "multigpu": True}

    def run(vec_cls):
        vec = vec_cls([lambda: SynergyEnv(**kwargs)] * 2)
        try:
            vec.seed(11)
            vec.reset()
            jcts, rng = [], np.random.default_rng(0)
            for _ in range(300):
                masks = vec.env_method("action_masks")
                actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
                _, _, _, infos = vec.step(actions)
                jcts.append([tuple(i["finished_jct_h"]) for i in infos])
            return jcts
        finally:
            vec.close()

    assert run(SubprocVecEnv) == run(DummyVecEnv)
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    from synergy_gym import evaluate
    from synergy_gym.action_policies import RandomMaskedPolicy

    ray.init(ignore_reinit_error=True, include_dashboard=False, num_cpus=2, log_to_driver=False, logging_level="ERROR")
    args = (RandomMaskedPolicy(3), "Synergy-small-v0", [5, 6])
    remote = ray.get(ray.remote(evaluate).remote(*args, keep_jcts=True, **kwargs))
    local = evaluate(*args, keep_jcts=True, **kwargs)
    assert remote["jct_h"].tolist() == local["jct_h"].tolist()


def test_memory_stays_flat_over_long_episodes(long_run):
    episodes = 50 if long_run else 8
    kwargs = {"cluster": "small", "num_jobs": 300 if long_run else 100, "jobs_per_hour": 2.25}
    env = SynergyEnv(**kwargs)
    tracemalloc.start()
    sizes = []
    try:
        for ep in range(episodes):
            env.reset(seed=ep)
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(1)
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
