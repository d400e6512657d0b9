"""Environment speed: steps and episodes per second for uniformly random valid actions, one core.

For each registered environment, in the default (non-preemptive) mode and with
``preemptive=True`` (and, with ``--mode every-event``, the preemptive mode that decides every job
again at every event), it runs episodes with uniformly random valid actions – or an env
heuristic's (``--policy tetris+greedy``: decisions per episode under that policy) – and
prints steps/s and full episodes/s of the raw environment, steps (decisions) per episode,
and steps/s through ``gym.make`` (which adds Gymnasium's checker and
order-enforcing wrappers), each after an untimed warm-up. It says whether the
kernels are compiled (numba) or run as plain Python (numba not installed). Run it
on an otherwise idle machine, pinned to one core (``taskset -c 1``); on a shared
one, ``--repeat 3`` keeps the best of three measurements of each. The first line names the
machine, the cores the run may use and the load average.

    python benchmarks/bench_env.py [--seconds 5] [--repeat 1] [--env Synergy-small-v0 ...] [--mode default preemptive]
        [--policy tetris+greedy]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
from arg_types import positive_float, positive_int  # benchmarks/arg_types.py, beside this script
from machine import machine_line  # benchmarks/machine.py, beside this script

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym.sim import kernels

#: The modes measured: env kwargs.
MODES = {"default": {}, "preemptive": {"preemptive": True}, "every-event": {"preemptive": True, "redecide": "every_event"}}


def episode(env, seed: int, rng: np.random.Generator, max_steps: int | None = None, policy=None) -> int:
    """Steps of one episode with uniformly random valid actions, or ``policy``'s (stopped after ``max_steps``).

    The valid actions are read from each observation's ``action_mask`` and drawn with uniforms
    drawn in advance, so that the loop around the environment costs as little as it can. A
    ``policy`` (an env heuristic) acts on the workload of ``seed`` (``options={"workload_seed": seed}``).
    """
    if policy is not None:
        obs, _ = env.reset(seed=seed, options={"workload_seed": seed})
    else:
        obs, _ = env.reset(seed=seed)
    steps = 0
    done = False
    draws = rng.random(1024)
    while not done and steps != max_steps:
        if policy is None:
            valid = obs["action_mask"].nonzero()[0]  # the mask is 1-D: no ravel (np.flatnonzero) needed
            action = int(valid[int(draws[steps % 1024] * valid.size)])
        else:
            action = int(policy.predict(obs)[0])
        obs, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
        steps += 1
    return steps


def run(env, seconds: float, repeat: int = 1, policy=None) -> tuple[float, float, float]:
    """(steps/s, full episodes/s, steps per episode) over at least ``seconds`` of whole episodes (or one).

    First an untimed warm-up of up to 1,000 steps (numba loads or compiles its kernels on first use);
    with ``repeat`` > 1 the fastest of that many measurements (the same episodes each time).
    """
    episode(env, 10**6, np.random.default_rng(0), max_steps=1000, policy=policy)
    best: tuple[float, float, float] | None = None
    for _ in range(repeat):
        rng = np.random.default_rng(0)
        steps = episodes = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds or episodes == 0:
            steps += episode(env, (1_000_000 if policy is not None else 0) + episodes, rng, policy=policy)
            episodes += 1
        wall = time.perf_counter() - started
        if best is None or steps / wall > best[0]:
            best = (steps / wall, episodes / wall, steps / episodes)
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=positive_float, default=5.0,
                        help="time per measurement (whole episodes, at least one)")
    parser.add_argument("--env", nargs="+", default=list(synergy_gym.SCENARIOS), help="environment ids")
    parser.add_argument("--mode", nargs="+", default=["default", "preemptive"], choices=list(MODES),
                        help="default; preemptive (deciding only what changes); every-event (preemptive, every job "
                             "decided again at every event)")
    parser.add_argument("--policy", default=None, metavar="NAME",
                        help="an env heuristic (e.g. tetris+greedy) instead of random valid actions, on the held-out "
                             "workload seeds from 1,000,000; its own time counts")
    parser.add_argument("--repeat", type=positive_int, default=1, help="measurements of each, the fastest reported")
    parser.add_argument("--no-wrapped", action="store_true", help="skip the gym.make measurement")
    args = parser.parse_args()
    for env_id in args.env:
        try:
            gym.spec(env_id)
        except gym.error.Error as e:
            parser.error(f"argument --env: {env_id!r}: {e}")
    policy = None
    if args.policy is not None:
        from synergy_gym.baselines.env_heuristics import env_heuristics

        heuristics = env_heuristics()
        if args.policy not in heuristics:
            parser.error(f"argument --policy: unknown env heuristic {args.policy!r}; valid: {', '.join(heuristics)}")
        policy = heuristics[args.policy]
    print(machine_line())
    print(f"kernels: {'numba' if hasattr(kernels.run_rounds, 'py_func') else 'plain Python (numba is not installed)'}; "
          f"actions: {args.policy or 'random valid'}")
    wrapped_head = "" if args.no_wrapped else f"{'gym.make steps/s':>18}"  # (no empty column without it)
    print(f"{'env':<25}{'mode':<13}{'raw steps/s':>12}{'episodes/s':>12}{'steps/episode':>15}{wrapped_head}")
    for env_id in args.env:
        for mode in args.mode:
            kwargs = MODES[mode]
            raw, eps, per_episode = run(gym.make(env_id, **kwargs).unwrapped, args.seconds, args.repeat, policy)
            wrapped = ("" if args.no_wrapped
                       else f"{run(gym.make(env_id, **kwargs), args.seconds, args.repeat, policy)[0]:>18,.0f}")
            print(f"{env_id:<25}{mode:<13}{raw:>12,.0f}{eps:>12.2f}{per_episode:>15,.0f}{wrapped}", flush=True)


if __name__ == "__main__":
    main()
