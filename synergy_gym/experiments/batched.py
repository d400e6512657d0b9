"""Episodes side by side: :func:`synergy_gym.evaluate` for a policy that decides a batch of observations at once.

A policy may offer ``batch_predictor(deterministic)``, returning ``None`` or a callable
``predict(observations, action_masks) -> actions``: ``observations`` the episodes'
observations stacked key by key (one row per episode), ``action_masks`` their masks
``(rows, actions)``, and one action per row – exactly the actions its ``predict`` would
choose one observation at a time (:mod:`synergy_gym.agents.batched_policy` for trained
agents). :func:`run_batched` then runs up to :data:`BATCH_ENVS` episodes of the seeds in
as many environments, calling ``predict`` once per step for every episode still running;
an environment whose episode ends starts the next seed. Each episode is stepped exactly
as one at a time (same seed, reset, actions in order), so its row is the same but for
``wall_s``: the episode's own steps and its share of each batch's call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import gymnasium as gym

#: The most episodes run side by side (environments alive at once).
BATCH_ENVS = 16

BatchPredict = Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray]


class Recorder(Protocol):
    """What an episode keeps (:class:`synergy_gym.experiments.evaluation.EpisodeRecord`)."""

    log_decisions: bool

    def decision(self, env: Any, obs: dict, action: Any) -> dict[str, Any]: ...

    def row(self, base: Any, label: str, seed: int, ret: float, steps: int, terminated: bool, wall_s: float,
            info: dict[str, Any], log: list[dict[str, Any]] | None) -> dict[str, Any]: ...


@dataclass
class _Episode:
    env: gym.Env
    index: int  # its seed's position in the seeds
    obs: dict[str, np.ndarray]
    wall_s: float
    log: list[dict[str, Any]] | None
    ret: float = 0.0
    steps: int = 0
    info: dict[str, Any] = field(default_factory=dict)


def run_batched(predict: BatchPredict, make: Callable[[], gym.Env], seeds: list[int], label: str, record: Recorder,
                on_episode: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """One row per seed, in the seeds' order (see the module); ``on_episode(done, total)`` after each episode ends.

    ``seeds`` as :func:`synergy_gym.experiments.evaluation.check_seeds` returns them (a list of non-negative ints).
    """
    rows: list[dict[str, Any] | None] = [None] * len(seeds)
    envs: list[gym.Env] = []
    upcoming = iter(range(len(seeds)))
    done = 0

    def start(env: gym.Env) -> _Episode | None:
        index = next(upcoming, None)
        if index is None:
            return None
        started = time.perf_counter()
        seed = seeds[index]
        obs, _ = env.reset(seed=seed, options={"workload_seed": seed})
        log: list[dict[str, Any]] | None = [] if record.log_decisions and index == 0 else None
        return _Episode(env, index, obs, time.perf_counter() - started, log)

    try:
        active: list[_Episode] = []
        for _ in range(min(BATCH_ENVS, len(seeds))):
            envs.append(make())
            episode = start(envs[-1])
            if episode is not None:
                active.append(episode)
        while active:
            started = time.perf_counter()
            batch = {key: np.stack([e.obs[key] for e in active]) for key in active[0].obs}
            masks = np.stack([np.asarray(e.env.unwrapped.action_masks()) for e in active])  # type: ignore[attr-defined]
            actions = predict(batch, masks)
            share = (time.perf_counter() - started) / len(active)
            running: list[_Episode] = []
            for episode, chosen in zip(active, actions):
                started = time.perf_counter()
                action = int(chosen)
                log = episode.log
                if log is not None:
                    log.append(record.decision(episode.env, episode.obs, action))
                episode.obs, reward, terminated, truncated, episode.info = episode.env.step(action)
                if log is not None:
                    log[-1]["invalid"] = bool(episode.info.get("invalid_action", log[-1]["invalid"]))
                episode.ret += float(reward)
                episode.steps += 1
                episode.wall_s += share + time.perf_counter() - started
                if not (terminated or truncated):
                    running.append(episode)
                    continue
                rows[episode.index] = record.row(episode.env.unwrapped, label, seeds[episode.index], episode.ret,
                                                 episode.steps, terminated, episode.wall_s, episode.info, log)
                done += 1
                if on_episode is not None:
                    on_episode(done, len(seeds))
                following = start(episode.env)
                if following is not None:
                    running.append(following)
            active = running
    finally:
        for env in envs:
            env.close()
    return [row for row in rows if row is not None]
