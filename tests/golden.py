"""Golden behaviour recorded before the round-planner refactor, and the code that records it.

``python tests/golden.py`` (run from the repository root, with ``../shared`` present) rewrites
``tests/data/golden_sim.npz`` and ``tests/data/golden_env.json.gz``; ``tests/test_golden.py``
checks that the current code reproduces them exactly:

* the simulator: per-job finish times (in rounds) of every named policy (orders ``fifo``, ``srtf``,
  ``las``, ``drf``, ``tetris``, ``ftf`` × allocations ``fair``, ``greedy``, ``tune``,
  ``opt``) on the first 2,000 jobs of the load-9 reference replay and of the multi-GPU
  substitute replay (load 4);
* the environment: the full sequence of (observation hash, reward) of a constant, a
  random-masked and a defer-using policy on ``Synergy-small-v0`` seeds 0–2, with
  ``allow_defer=True`` and ``reconsider_every=6``, stored as chained digests every
  256 steps (about 10,000 steps an episode would otherwise make the file large).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np

import synergy_gym  # noqa: F401  (registers the environments)
from baselines import make_policy
from synergy_gym import ClusterSpec, Simulator, Workload
from traces.replay import read_workload_csv

DATA = Path(__file__).resolve().parent / "data"
SIM_FILE = DATA / "golden_sim.npz"
ENV_FILE = DATA / "golden_env.json.gz"

ORDERS = ("fifo", "srtf", "las", "drf", "tetris", "ftf")
ALLOCATIONS = ("fair", "greedy", "tune", "opt")
POLICIES = tuple(f"{o}+{a}" for o in ORDERS for a in ALLOCATIONS)
REPLAYS = {
    "load9": "workload_single_gpu_load9.csv",
    "multigpu_load4": "workload_multigpu_SUBSTITUTE_load4.csv",
}
FIRST_JOBS = 2000

ENV_ID = "Synergy-small-v0"
ENV_KWARGS = {"allow_defer": True, "reconsider_every": 6}
ENV_SEEDS = (0, 1, 2)
ENV_POLICIES = ("constant", "random_masked", "defer")

_ARRAYS = (
    "job_id", "model", "gpus", "arrival_s", "iter_time_s", "total_iters",
    "cpu_demand_per_gpu", "mem_demand_per_gpu", "measured",
)


def first_jobs(workload: Workload, n: int = FIRST_JOBS) -> Workload:
    """The first ``n`` jobs (by arrival) of ``workload``, run until all have finished."""
    return replace(workload, run_until="all", **{name: getattr(workload, name)[:n] for name in _ARRAYS})


def replay(shared: Path, key: str) -> Workload:
    return first_jobs(read_workload_csv(shared / "synergy" / "reference_workloads" / REPLAYS[key]))


ROUND_S = 300.0


def finish_times(workload: Workload, policy: str) -> np.ndarray:
    """Per-job finish times (s) in the workload's job order."""
    result = Simulator(ClusterSpec(), workload, make_policy(policy)).run()
    frame = result.jobs.set_index("job_id").loc[workload.job_id]
    return frame["finish_s"].to_numpy(dtype=np.float64)


def finish_rounds(workload: Workload, policy: str) -> np.ndarray:
    """Per-job finish times as whole rounds (round timing ends jobs on round boundaries)."""
    finish = finish_times(workload, policy)
    rounds = np.rint(finish / ROUND_S)
    assert np.array_equal(rounds * ROUND_S, finish), "a finish time is not on a round boundary"
    return rounds.astype(np.int32)


def obs_hash(obs: dict) -> str:
    h = hashlib.sha256()
    for key in sorted(obs):
        value = np.ascontiguousarray(obs[key])
        h.update(key.encode())
        h.update(str(value.dtype).encode())
        h.update(value.tobytes())
    return h.hexdigest()[:16]


def _choose(policy: str, env, rng: np.random.Generator, step: int) -> int:
    mask = env.unwrapped.action_masks()
    if policy == "constant":
        return 1  # the model's demand: reproduces fifo+tune
    if policy == "random_masked":
        return int(rng.choice(np.flatnonzero(mask)))
    # defer-using: defer every third decision, otherwise demand and fair share in turn
    defer = mask.size - 1
    if step % 3 == 2 and mask[defer]:
        return defer
    return 1 if step % 2 == 0 else 0


BLOCK = 256  # steps per digest


def env_trace(policy: str, seed: int) -> dict:
    """The episode's (observation hash, reward) sequence from reset to the end, as chained digests.

    ``digests[i]`` hashes every (observation, reward) pair up to step ``(i + 1) · BLOCK`` (the last
    one: to the end), so any difference is caught and located within a block of steps.
    """
    env = gym.make(ENV_ID, **ENV_KWARGS)
    rng = np.random.default_rng(1000 + seed)
    obs, _ = env.reset(seed=seed)
    chain = hashlib.sha256(obs_hash(obs).encode())
    digests: list[str] = []
    total = 0.0
    step = 0
    while True:
        obs, reward, terminated, truncated, _ = env.step(_choose(policy, env, rng, step))
        chain.update(f"{obs_hash(obs)} {float(reward).hex()}".encode())
        total += float(reward)
        step += 1
        if step % BLOCK == 0:
            digests.append(chain.hexdigest()[:16])
        if terminated or truncated:
            break
    env.close()
    digests.append(chain.hexdigest()[:16])
    return {"steps": step, "return": total, "digests": digests}


def main(sim: bool = True) -> None:
    shared = Path(__file__).resolve().parents[2] / "shared"
    DATA.mkdir(exist_ok=True)
    if sim:
        write_sim(shared)
    env = {f"{p}/{s}": env_trace(p, s) for p in ENV_POLICIES for s in ENV_SEEDS}
    with gzip.open(ENV_FILE, "wt") as fh:
        json.dump({"env_id": ENV_ID, "kwargs": ENV_KWARGS, "block": BLOCK, "traces": env}, fh)
    print("steps per env trace:", {k: v["steps"] for k, v in env.items()})


def write_sim(shared: Path) -> None:
    arrays = {}
    for key in REPLAYS:
        w = replay(shared, key)
        arrays[f"{key}/job_id"] = w.job_id
        for policy in POLICIES:
            arrays[f"{key}/{policy}"] = finish_rounds(w, policy)
            jct_h = (arrays[f"{key}/{policy}"] * ROUND_S - w.arrival_s) / 3600
            print(key, policy, f"{jct_h.mean():.3f} h", flush=True)
    np.savez_compressed(SIM_FILE, **arrays)


if __name__ == "__main__":
    import sys

    main(sim="--env-only" not in sys.argv)
