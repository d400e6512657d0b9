"""Golden behaviour of the simulator and the environment, and the code that records it.

``python -m tests.support.golden`` (run from the repository root, with ``../shared`` present)
rewrites ``tests/data/golden_sim.npz`` and ``tests/data/golden_env.json.gz`` with the current
code; ``--env-only`` rewrites only the environment's file. ``tests/test_golden.py`` checks that
the current code reproduces them exactly. Rewrite them only for an intended change of behaviour
(say which in the commit): a refactor must leave them as they are, and a golden that a refactor
cannot reproduce is a bug in the refactor, not in the file.

* the simulator (``golden_sim.npz``): per-job finish times (in rounds, ``int32``, in the
  workload's job order) of every named policy (orders ``fifo``, ``srtf``, ``las``, ``drf``,
  ``tetris``, ``ftf`` × allocations ``fair``, ``greedy``, ``tune``, ``opt``) on the first 2,000
  jobs of the load-9 reference replay and of the multi-GPU substitute replay (load 4), under
  ``{replay}/{policy}`` (e.g. ``load9/fifo+opt``), with the jobs' ids under ``{replay}/job_id``.
  Synergy-OPT solves an integer program every round, so its 2,000-job entries take about
  2.5 minutes together; the suite checks them only with ``pytest --long``. By default it checks
  the OPT policies on the same 2,000 jobs *time-compressed* ``COMPRESS`` = 8 times
  (:func:`compressed`: arrivals divided by 8, iterations divided by 8 and rounded up – the same
  jobs in the same order at about the same load, in about an eighth of the rounds: 550–1,000), under
  ``{replay}/x8/{policy}`` (e.g. ``load9/x8/drf+opt``), with that workload's ``job_id``,
  ``arrival_s`` and ``total_iters`` beside them. These entries were added to the file, which
  was written before the round-planner refactor, by running this module's functions with that
  code (commit 70cb087); every earlier entry is unchanged. They exercise multi-GPU jobs across
  servers, OPT's targets below the demand when CPUs or memory bind, the placement's fallback to
  the capped target and reclaiming, and they discriminate: on the multi-GPU replay every order's
  OPT finishes jobs differently from its Tune, on the load-9 replay ``drf`` and ``ftf`` do (as on
  the uncompressed 2,000 jobs);
* the environment (``golden_env.json.gz``, recorded on top of commit 4525693, the
  scheduling action space, with the flat ``slots``/``slot_levels``, ``demand`` as x / (x + 1),
  constant level bounds and the settled ledger of mid-event observations): every step's
  (observation hash – keys, dtypes, shapes and values –, reward, terminated, truncated,
  ``info["invalid_action"]``, finished jobs) of three seeded policies – always action 1 (slot 0 at
  its demand: fifo+tune), uniformly random over the whole ``Discrete`` space (masked actions fall
  back), uniformly random valid actions – on ``Synergy-small-v0`` seeds 0–2 in the default and the
  preemptive mode that re-decides every job at every event (``redecide="every_event"``, the
  preemptive mode when they were recorded), with multi-GPU jobs, and with 12 CPUs per server
  (``SCARCE``) – and, recorded with issue 26, the preemptive mode that decides only what changes
  (``changes``, and scarce with multi-GPU jobs) –, stored as chained
  digests every 256 steps (preemptive episodes make about 10,000 steps; at most ``MAX_STEPS``
  are recorded), plus a digest of every job's finish time.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np

import synergy_gym  # noqa: F401  (registers the environments)
from synergy_gym import ClusterSpec, Simulator, Workload
from synergy_gym.baselines import make_policy
from synergy_gym.traces.replay import read_workload_csv
from tests.support import REPO, SHARED

DATA = REPO / "tests" / "data"
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
OPT_POLICIES = tuple(p for p in POLICIES if p.endswith("+opt"))
#: The OPT goldens the suite checks by default run on the replays time-compressed this many times.
COMPRESS = 8

ENV_ID = "Synergy-small-v0"
#: Few CPUs per server and a vision-heavy split (fixed here, not taken from the scarce ids, whose
#: parameters are tuned on their own).
SCARCE = {"cluster": {"num_servers": 4, "cpus_per_server": 12.0}, "class_split": [60.0, 20.0, 20.0], "max_rounds": 8000}
#: Recorded cases: (env id, kwargs). The two modes on ``Synergy-small-v0`` as registered, and
#: the same with multi-GPU jobs (re-placement in Tune's order) and on the scarce scenario.
ENV_MODES = {
    "default": (ENV_ID, {}),
    "preemptive": (ENV_ID, {"preemptive": True, "redecide": "every_event"}),
    "multigpu": (ENV_ID, {"multigpu": True}),
    "multigpu-preemptive": (ENV_ID, {"multigpu": True, "preemptive": True, "redecide": "every_event"}),
    "scarce": (ENV_ID, SCARCE),
    "scarce-preemptive": (ENV_ID, {**SCARCE, "preemptive": True, "redecide": "every_event"}),
    # Recorded with issue 26: preemptive, deciding only what changes (running rows, ahead admissions).
    "changes": (ENV_ID, {"preemptive": True}),
    "scarce-multigpu-changes": (ENV_ID, {**SCARCE, "multigpu": True, "preemptive": True}),
}
ENV_SEEDS = (0, 1, 2)
#: ``demand``: always action 1 (slot 0 at its demand level); ``random_any``: uniformly random over the
#: whole ``Discrete`` space (masked actions fall back); ``random_valid``: uniformly random valid actions.
ENV_POLICIES = ("demand", "random_any", "random_valid")
#: Steps recorded per trace at most (a preemptive episode asks about every job at every event).
MAX_STEPS = 20_000

_ARRAYS = (
    "job_id", "model", "gpus", "arrival_s", "iter_time_s", "total_iters",
    "cpu_demand_per_gpu", "mem_demand_per_gpu", "measured",
)


def first_jobs(workload: Workload, n: int = FIRST_JOBS) -> Workload:
    """The first ``n`` jobs (by arrival) of ``workload``, run until all have finished."""
    return replace(workload, run_until="all", **{name: getattr(workload, name)[:n] for name in _ARRAYS})


def compressed(workload: Workload, k: int = COMPRESS) -> Workload:
    """``workload`` ``k`` times faster: arrivals divided by ``k``, iterations divided by ``k`` (rounded up)."""
    return replace(workload, arrival_s=workload.arrival_s / k, total_iters=-(-workload.total_iters // k))


def replay(shared: Path, key: str) -> Workload:
    """The first ``FIRST_JOBS`` jobs of replay ``key``; ``key/x8`` (``COMPRESS``): the same, :func:`compressed`."""
    name, _, fast = key.partition("/")
    w = first_jobs(read_workload_csv(shared / "synergy" / "reference_workloads" / REPLAYS[name]))
    if fast:
        assert fast == f"x{COMPRESS}", key
        w = compressed(w)
    return w


def sim_cases(long: bool = False) -> list[tuple[str, str]]:
    """(replay key, policy) of every simulator golden: OPT on the compressed replays, and on the full
    ones only when ``long``; every other policy on the full replays."""
    cases = []
    for key in REPLAYS:
        cases += [(key, p) for p in POLICIES if long or p not in OPT_POLICIES]
        cases += [(f"{key}/x{COMPRESS}", p) for p in OPT_POLICIES]
    return cases


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
        h.update(str(value.shape).encode())  # a change of layout is a change of behaviour
        h.update(value.tobytes())
    return h.hexdigest()[:16]


def _choose(policy: str, env, rng: np.random.Generator) -> int:
    if policy == "demand":
        return 1  # slot 0 at its demand level: reproduces fifo+tune
    if policy == "random_any":
        return int(rng.integers(env.action_space.n))
    return int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))


BLOCK = 256  # steps per digest


def env_trace(policy: str, seed: int, mode: str, max_steps: int = MAX_STEPS) -> dict:
    """The episode's step results from reset to the end (or ``max_steps``), as chained digests.

    Each step adds the observation's hash, the reward (exactly, as hex), terminated, truncated,
    ``info["invalid_action"]`` and the finished jobs' ids. ``digests[i]`` hashes everything up to
    step ``(i + 1) · BLOCK`` (the last one: to the end), so any difference is caught and located
    within a block of steps; ``finish`` hashes every job's finish time at the end.
    """
    env_id, kwargs = ENV_MODES[mode]
    env = gym.make(env_id, **kwargs)
    rng = np.random.default_rng(1000 + seed)
    obs, _ = env.reset(seed=seed)
    chain = hashlib.sha256(obs_hash(obs).encode())
    digests: list[str] = []
    total = 0.0
    step = invalid = 0
    done = False
    while not done and step < max_steps:
        obs, reward, terminated, truncated, info = env.step(_choose(policy, env, rng))
        ids = ",".join(map(str, info["finished_job_ids"]))
        flags = f"{terminated:d}{truncated:d}{info['invalid_action']:d}"
        chain.update(f"{obs_hash(obs)} {float(reward).hex()} {flags} {ids}".encode())
        total += float(reward)
        invalid += bool(info["invalid_action"])
        step += 1
        if step % BLOCK == 0:
            digests.append(chain.hexdigest()[:16])
        done = terminated or truncated
    finish = hashlib.sha256(np.ascontiguousarray(env.unwrapped.sim.jobs.finish_s).tobytes()).hexdigest()[:16]
    env.close()
    digests.append(chain.hexdigest()[:16])
    return {"steps": step, "ended": done, "invalid": invalid, "return": total, "finish": finish, "digests": digests}


def env_key(mode: str, policy: str, seed: int) -> str:
    return f"{mode}/{policy}/{seed}"


def main(sim: bool = True) -> None:
    shared = SHARED
    DATA.mkdir(exist_ok=True)
    if sim:
        write_sim(shared)
    env = {
        env_key(m, p, s): env_trace(p, s, m) for m in ENV_MODES for p in ENV_POLICIES for s in ENV_SEEDS
    }
    with gzip.open(ENV_FILE, "wt") as fh:
        modes = {m: [i, k] for m, (i, k) in ENV_MODES.items()}
        json.dump({"modes": modes, "block": BLOCK, "max_steps": MAX_STEPS, "traces": env}, fh)
    print("steps per env trace:", {k: (v["steps"], v["ended"], v["invalid"]) for k, v in env.items()})


#: The workload's arrays stored beside each replay's finish times (the compressed ones are derived).
WORKLOAD_FIELDS = {key: ("job_id",) for key in REPLAYS} | {
    f"{key}/x{COMPRESS}": ("job_id", "arrival_s", "total_iters") for key in REPLAYS
}


def write_sim(shared: Path) -> None:
    """Write every simulator golden (:func:`sim_cases` with ``long``) – a few minutes."""
    arrays = {}
    workloads: dict[str, Workload] = {}
    for key, policy in sim_cases(long=True):
        if key not in workloads:
            w = workloads[key] = replay(shared, key)
            for field in WORKLOAD_FIELDS[key]:
                arrays[f"{key}/{field}"] = getattr(w, field)
        w = workloads[key]
        arrays[f"{key}/{policy}"] = finish_rounds(w, policy)
        jct_h = (arrays[f"{key}/{policy}"] * ROUND_S - w.arrival_s) / 3600
        print(key, policy, f"{jct_h.mean():.3f} h", flush=True)
    np.savez_compressed(SIM_FILE, **arrays)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of ``python -m tests.support.golden``: ``--help`` and a mistyped option rewrite nothing."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.golden",
        description="Rewrite the golden files with the current code (only for an intended change of behaviour).")
    parser.add_argument("--env-only", action="store_true", help="rewrite only the environment's file")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(sim=not parse_args().env_only)
