"""Environment speed: steps per second for a random masked policy, one core.

For each registered environment it runs whole episodes with uniformly random
valid actions and prints steps/s of the raw environment and through
``gym.make`` (which adds Gymnasium's wrappers), plus simulated rounds per step.

    python benchmarks/bench_env.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import synergy_gym  # noqa: F401  (registers the environments)


def run(env, seconds: float) -> tuple[float, float, int]:
    rng = np.random.default_rng(0)
    steps = episodes = rounds = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        env.reset(seed=episodes)
        done = False
        while not done:
            valid = np.flatnonzero(env.unwrapped.action_masks())
            _, _, terminated, truncated, info = env.step(int(valid[rng.integers(valid.size)]))
            done = terminated or truncated
            steps += 1
        rounds += info["episode_rounds"]
        episodes += 1
    wall = time.perf_counter() - started
    return steps / wall, rounds / steps, episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    args = parser.parse_args()
    print(f"{'env':<18}{'raw steps/s':>13}{'gym.make steps/s':>18}{'rounds/step':>13}{'episodes':>10}")
    for env_id in ("Synergy-small-v0", "Synergy-v0"):
        raw, rounds_per_step, episodes = run(gym.make(env_id).unwrapped, args.seconds)
        wrapped, _, _ = run(gym.make(env_id), args.seconds)
        print(f"{env_id:<18}{raw:>13,.0f}{wrapped:>18,.0f}{rounds_per_step:>13.1f}{episodes:>10}")


if __name__ == "__main__":
    main()
