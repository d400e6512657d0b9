"""A heuristic-relative reward: the agent's job time in the system minus a heuristic's on the same workload.

The environment's reward for a step is −∫ N_agent(t) dt / ``reward_scale`` over the
step's interval [t_prev, t_now] of simulated time (N: jobs in the system, arrived and
not finished), so an episode's return is −ΣJCT / scale. Per-episode returns then vary
by hundreds of hours across workloads while one decision moves them by a few hours:
the signal drowns in the arrival process. :class:`HeuristicRelativeReward` removes
the workload's part: at every reset it runs an env heuristic
(:mod:`synergy_gym.baselines.env_heuristics`, e.g. ``srtf+tune``) on the *same* episode in a
separate environment instance, records that heuristic's jobs in the system as a
function of time (from its per-job arrival and finish times), and adds
+∫ N_heuristic(t) dt / scale over each step's interval, so the step reward is

    −(∫ N_agent dt − ∫ N_heuristic dt) / scale   over [t_prev, t_now].

When the agent's episode terminates (every job finished) the heuristic's job time
after t_now (if it finishes later) is credited too, so the return of a terminated
episode is exactly −(ΣJCT_agent − ΣJCT_heuristic) / scale: 0 for an agent that
schedules as the heuristic does, positive when the agent beats it. A truncated
episode's return compares the job time of both up to the agent's last instant.

The heuristic runs in a copy of the environment whose round limit is
:data:`REFERENCE_ROUNDS` times the agent's (a named heuristic does not read the observation's
``time``, the one feature the limit changes), so that an agent that finishes within its limit is
compared with the heuristic's whole ΣJCT even when the heuristic would have been cut off there.
Should the heuristic still be cut off (or a ``reference_env`` given by the user cut it off),
``info["reference_truncated"]`` says so: its ΣJCT is then a lower bound, and a terminated
episode's return is the agent's ΣJCT against that bound.

The same episode: before the agent's environment resets, the wrapper copies its
``np_random`` state (after seeding it, if a seed is given) into the reference
environment, and both reset with the same ``options``. They therefore draw the same
workload seed (or take the same ``options["workload_seed"]``), and, with
``sensitivity="profiled"``, the same profiling noise. The agent's episode is exactly
the one the unwrapped environment would have run. With a fixed workload (replay or
trace) and deterministic sensitivity the heuristic's run is cached.

Cost: one heuristic episode per reset, about 0.1 s for ``Synergy-small-*`` (300
jobs) and 0.7 s for the 128-GPU ids on one core; with ``preemptive=True``
(12,000–16,000 decisions per episode) several seconds.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import fields
from typing import Any

import gymnasium as gym
import numpy as np

from synergy_gym.env import SynergyEnv
from synergy_gym.env.config import MAX_ROUNDS
from synergy_gym.sim.simulator import Simulator

#: How many times the agent's ``max_rounds`` the default reference environment of a named heuristic may run.
REFERENCE_ROUNDS = 10


class JobTimeCurve:
    """∫₀ᵗ N(s) ds for jobs in the system over [arrival, finish]: job-seconds up to ``t``, in O(log n)."""

    def __init__(self, arrival_s: np.ndarray, finish_s: np.ndarray) -> None:
        arrival = np.asarray(arrival_s, dtype=float)
        finish = np.asarray(finish_s, dtype=float)
        if arrival.shape != finish.shape or np.any(finish < arrival):
            raise ValueError("every job needs a finish time at or after its arrival")
        self.arrival = np.sort(arrival)
        self.finish = np.sort(finish)
        self._arrival_prefix = np.concatenate([[0.0], np.cumsum(self.arrival)])
        self._finish_prefix = np.concatenate([[0.0], np.cumsum(self.finish)])
        #: Σ (finish − arrival): the total job time (ΣJCT), in seconds.
        self.total = float(self._finish_prefix[-1] - self._arrival_prefix[-1])

    def until(self, t: float) -> float:
        """Job-seconds in the system from time 0 to ``t``: Σ_j max(0, min(t, f_j) − a_j)."""
        arrived = int(self.arrival.searchsorted(t, side="right"))
        finished = int(self.finish.searchsorted(t, side="right"))
        # Jobs finished by t count f − a; the others that arrived by t count t − a.
        return float(self._finish_prefix[finished] + t * (arrived - finished) - self._arrival_prefix[arrived])


def heuristic_job_times(env: gym.Env, heuristic: Any, options: dict | None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Run ``heuristic`` for one episode of ``env`` (already seeded) reset with ``options``.

    Returns each job's arrival and finish time in seconds (a job still in the system
    when the episode was truncated finishes at that instant; one not yet arrived
    counts nothing) and the final ``info``, with ``truncated`` added (whether the run was cut off).
    """
    inner = synergy_env(env)
    obs, _ = inner.reset(options=options)
    terminated = truncated = False
    info: dict[str, Any] = {}
    while not (terminated or truncated):
        action, _ = heuristic.predict(obs, deterministic=True, action_masks=inner.action_masks())
        obs, _, terminated, truncated, info = inner.step(int(np.asarray(action).item()))
    sim = simulator(inner)
    arrival = np.asarray(sim.jobs.arrival_s, dtype=float).copy()
    finish = np.asarray(sim.jobs.finish_s, dtype=float).copy()
    unfinished = ~np.isfinite(finish)
    finish[unfinished] = np.maximum(arrival[unfinished], sim.now)
    return arrival, finish, {**info, "truncated": bool(truncated)}


def synergy_env(env: gym.Env) -> SynergyEnv:
    """The :class:`~synergy_gym.env.SynergyEnv` inside ``env`` (the relative reward reads its simulator and settings)."""
    inner = env.unwrapped
    if not isinstance(inner, SynergyEnv):
        raise TypeError(f"the heuristic-relative reward needs a Synergy environment, got {type(inner).__name__}")
    return inner


def simulator(env: SynergyEnv) -> Simulator:
    """The simulator of ``env``'s episode (the environment must have been reset)."""
    sim = env.sim
    if sim is None:
        raise RuntimeError("the environment has no episode yet: reset it first")
    return sim


def _fresh_copy(env: gym.Env, rounds_factor: int = 1) -> SynergyEnv:
    """A new, unwrapped instance of ``env``'s environment with the same settings, but ``rounds_factor`` times its
    round limit (at most the largest allowed)."""
    inner = synergy_env(env)
    cfg = inner.cfg
    settings = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    settings["max_rounds"] = min(MAX_ROUNDS, cfg.max_rounds * rounds_factor)
    return type(inner)(settings)


class HeuristicRunCache:
    """Heuristic runs shared by the relative-reward wrappers of one process's environments.

    With shared workloads (``options["workload_seed"]``) the k-th episode of every
    training environment runs the same workload, so the wrappers of a ``DummyVecEnv``
    given one cache run the heuristic once per workload instead of once each. Keys are
    (heuristic, environment settings, reset options); the ``max_runs`` most recently
    used runs are kept, and ``hits`` counts the runs found in the cache.
    """

    def __init__(self, max_runs: int = 64) -> None:
        self.max_runs = int(max_runs)
        self._runs: OrderedDict[tuple, tuple[np.ndarray, np.ndarray, dict]] = OrderedDict()
        self.hits = 0

    def get(self, key: tuple) -> tuple[np.ndarray, np.ndarray, dict] | None:
        run = self._runs.get(key)
        if run is not None:
            self._runs.move_to_end(key)
            self.hits += 1
        return run

    def put(self, key: tuple, run: tuple[np.ndarray, np.ndarray, dict]) -> None:
        self._runs[key] = run
        while len(self._runs) > self.max_runs:
            self._runs.popitem(last=False)


class HeuristicRelativeReward(gym.Wrapper):
    """Reward relative to an env heuristic on the same workload (see the module docstring).

    ``heuristic``: a name of :func:`synergy_gym.baselines.env_heuristics.env_heuristics` or a
    policy with SB3's ``predict`` signature. ``reference_env``: the environment the
    heuristic runs in (default: a fresh instance with ``env``'s settings, and for a named heuristic
    :data:`REFERENCE_ROUNDS` times its round limit). At the end of an episode ``info`` holds
    ``reference_policy``, ``reference_mean_jct_h`` and ``reference_jct_sum_h`` (the heuristic's mean and total
    JCT on this workload; for a truncated episode, of its jobs up to the agent's last instant) and
    ``reference_truncated`` (whether the heuristic's own run was cut off). ``run_cache``: a
    :class:`HeuristicRunCache` shared with the other environments of this process (runs
    of a named heuristic on a seeded workload given by ``options["workload_seed"]`` are
    looked up there first).
    """

    def __init__(self, env: gym.Env, heuristic: Any = "srtf+tune", reference_env: gym.Env | None = None,
                 run_cache: HeuristicRunCache | None = None) -> None:
        super().__init__(env)
        if isinstance(heuristic, str):
            from synergy_gym.baselines.env_heuristics import NAMED_HEURISTICS, env_heuristic

            if heuristic not in NAMED_HEURISTICS:
                from synergy_gym.errors import UnknownNameError

                raise UnknownNameError("relative_to heuristic", heuristic, NAMED_HEURISTICS)
            self.heuristic_name, self.heuristic = heuristic, env_heuristic(heuristic)
        else:
            self.heuristic_name, self.heuristic = getattr(heuristic, "name", type(heuristic).__name__), heuristic
        own_reference = reference_env is None
        # (a named heuristic ignores the time feature: its run gets room to finish, for an exact return)
        self.reference_env = reference_env if reference_env is not None else _fresh_copy(
            env, REFERENCE_ROUNDS if isinstance(heuristic, str) else 1)
        self.run_cache = run_cache
        inner = synergy_env(env)
        self.scale = float(inner.cfg.reward_scale)
        seeded = getattr(getattr(inner, "source", None), "seeded", None)
        deterministic = inner.cfg.sensitivity != "profiled" and self.heuristic_name != "random"
        # The same heuristic run every episode: fixed jobs, no profiling noise, a deterministic heuristic.
        self._cacheable = seeded is not None and not seeded and deterministic
        # Runs shared through run_cache: a heuristic of the table by name, in the default reference env, on
        # generated jobs (not a given workload); keyed by this and the reset options.
        shareable = (run_cache is not None and isinstance(heuristic, str) and own_reference
                     and bool(seeded) and deterministic and inner.cfg.workload is None)
        self._run_key = (self.heuristic_name, type(inner).__qualname__, repr(inner.cfg)) if shareable else None
        self._cache: tuple[np.ndarray, np.ndarray, dict] | None = None
        self.curve: JobTimeCurve | None = None
        self._charged = 0.0
        self._reference_mean_h: float | None = None
        self._reference_truncated = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        inner = self.env.unwrapped
        if seed is not None:  # seed np_random now (as the env's reset would) so its state can be copied
            gym.Env.reset(inner, seed=seed)
        cache, key = self.run_cache, self._shared_key(options)
        if self._cacheable and self._cache is not None:
            arrival, finish, info = self._cache
        elif cache is not None and key is not None and (run := cache.get(key)) is not None:
            arrival, finish, info = run
        else:
            self.reference_env.unwrapped.np_random = _copy_generator(inner.np_random)
            arrival, finish, info = heuristic_job_times(self.reference_env, self.heuristic, options)
            if self._cacheable:
                self._cache = (arrival, finish, info)
            if cache is not None and key is not None:
                cache.put(key, (arrival, finish, info))
        obs, env_info = self.env.reset(options=options)
        self.curve = JobTimeCurve(arrival, finish)
        self._reference_mean_h = info.get("mean_jct_h")  # the environment's own, over the whole run
        self._reference_truncated = bool(info.get("truncated", False))
        self._charged = 0.0
        return obs, env_info

    def _shared_key(self, options: dict | None) -> tuple | None:
        """The key of this reset's heuristic run in :attr:`run_cache` (None: not shareable)."""
        if self._run_key is None or not options or "workload_seed" not in options:
            return None
        return (*self._run_key, tuple(sorted((k, repr(v)) for k, v in options.items())))

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        curve = self.curve
        if curve is None:
            raise RuntimeError("step() before reset(): the heuristic's run is made at reset")
        now = float(simulator(synergy_env(self.env)).now)
        charged = curve.total if terminated else curve.until(now)
        reward = float(reward) + (charged - self._charged) / self.scale
        self._charged = charged
        if terminated or truncated:
            info = dict(info)
            info["reference_policy"] = self.heuristic_name
            info["reference_jct_sum_h"] = charged / 3600.0
            if terminated and self._reference_mean_h is not None:
                info["reference_mean_jct_h"] = float(self._reference_mean_h)
            else:  # the heuristic's jobs arrived by the agent's last instant, as the environment counts a cut-off run
                arrived = int(curve.arrival.searchsorted(now, side="right")) if truncated else curve.arrival.size
                info["reference_mean_jct_h"] = charged / 3600.0 / max(1, arrived)
            info["reference_truncated"] = self._reference_truncated
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self.reference_env.close()
        super().close()


def _copy_generator(rng: np.random.Generator) -> np.random.Generator:
    copy = np.random.Generator(type(rng.bit_generator)())
    copy.bit_generator.state = rng.bit_generator.state
    return copy
