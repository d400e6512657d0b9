"""Futures drawn from the scenario's generator, given what has arrived: a same-information model for lookahead.

A lookahead with the environment's information cannot see the jobs to come, and assuming that none
come (:meth:`~synergy_gym.sim.simulator.Simulator.forget_future`) admits as if the cluster will stay
empty. Here the future is *sampled* instead: the jobs that have arrived are kept, and the jobs still
to come are drawn from the scenario's own generator with another seed (the generator's settings –
arrival rate, job count, model mix – are the scenario's, which an agent trained on it also knows).

The arrivals are a Poisson process, so the time to the next arrival does not depend on how long ago
the last one was: the drawn jobs keep their inter-arrival gaps, the first starting at the current
time. Job sizes are drawn independently of the past; models follow the generator's rotation by job
position, as in every workload of the scenario. A model environment holding this workload then
replays the episode's actions so far (which the drawn jobs cannot have changed, as none had
arrived) and ends in the real environment's state, which :func:`future_models` checks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from synergy_gym.errors import ConfigError
from synergy_gym.sim.workload import Workload

_COLUMNS = ("model", "gpus", "total_iters", "iter_time_s", "cpu_demand_per_gpu", "mem_demand_per_gpu", "measured")


def sampled_workload(past: Workload, drawn: Workload, arrived: int, now_s: float, first_id: int | None = None) -> Workload:
    """``past``'s first ``arrived`` jobs, then ``drawn``'s jobs ``arrived`` to ``len(past) - 1``, shifted so that the
    first of them arrives as long after ``now_s`` as it arrived after ``drawn``'s job ``arrived - 1``.

    The drawn jobs are numbered from ``first_id`` (default: above ``past``'s ids), never an id of the episode's own
    jobs, whose ids seed their profiling noise (``sensitivity="profiled"``), which the model must not share.
    """
    n = len(past)
    if not 0 <= arrived <= n:
        raise ConfigError(f"arrived must be between 0 and the workload's {n} jobs, got {arrived}")
    if len(drawn) < n:
        raise ConfigError(f"the drawn workload has {len(drawn)} jobs, fewer than the episode's {n}")
    if arrived and past.arrival_s[arrived - 1] > now_s:
        raise ConfigError(f"job {arrived - 1} of the episode arrives at {past.arrival_s[arrived - 1]:g} s, "
                          f"after the current time {now_s:g} s")
    origin = float(drawn.arrival_s[arrived - 1]) if arrived else 0.0
    future_arrival = now_s + (drawn.arrival_s[arrived:n] - origin)
    columns = {name: np.concatenate([getattr(past, name)[:arrived], getattr(drawn, name)[arrived:n]]) for name in _COLUMNS}
    top = int(past.job_id.max())
    first = top + 1 if first_id is None else int(first_id)
    if first <= top:
        raise ConfigError(f"first_id must be above the episode's job ids (up to {top}), got {first}")
    return Workload.build(
        past.zoo, **columns, run_until="all", source="sampled future",
        job_id=np.concatenate([past.job_id[:arrived], np.arange(first, first + n - arrived, dtype=np.int64)]),
        arrival_s=np.concatenate([past.arrival_s[:arrived], future_arrival]),
    )


def draw_seeds(episode_seed: int, decision: int, count: int) -> list[int]:
    """``count`` workload seeds for the futures sampled at ``decision`` of episode ``episode_seed`` (repeatable)."""
    state = np.random.SeedSequence([int(episode_seed), int(decision)]).generate_state(count)
    return [int(s) & 0x7FFF_FFFF for s in state]


def future_models(env: Any, episode_seed: int, history: Sequence[int], count: int) -> list[Any]:
    """``count`` model environments in ``env``'s current state, each with the jobs to come drawn anew.

    ``env`` was reset with ``seed=episode_seed`` and ``options={"workload_seed": episode_seed}`` and
    has since taken the actions ``history``. Each model is a new environment of the same settings
    holding a :func:`sampled_workload`, reset with the same seed, that has replayed ``history``.
    """
    u = env.unwrapped
    if not u.source.seeded:
        raise ConfigError("sampled futures need a generated workload (an environment whose jobs depend on the seed)")
    sim = u.sim
    now_s = float(sim.now)
    past = u.workload_for_seed(episode_seed)
    arrived = int(np.count_nonzero(past.arrival_s <= now_s))
    settings = {f.name: getattr(u.cfg, f.name) for f in dataclasses.fields(u.cfg)}
    top = int(past.job_id.max()) + 1
    models = []
    for k, seed in enumerate(draw_seeds(episode_seed, len(history), count)):  # each model its own job ids (noise)
        workload = sampled_workload(past, u.workload_for_seed(seed), arrived, now_s, first_id=top * (k + 1))
        model = type(u)(**{**settings, "workload": workload})
        model.reset(seed=int(episode_seed))
        for action in history:
            model.step(action)
        if not _same_past(model, u, arrived):
            raise AssertionError(f"a sampled-future model replayed {len(history)} actions to time {model.sim.now} s, "
                                 f"not the episode's state at {sim.now} s")
        models.append(model)
    return models


def _same_past(model: Any, env: Any, arrived: int) -> bool:
    """Whether ``model`` is where ``env`` is: the time, the valid actions, and each arrived job's level, allocation
    target, progress and finish."""
    a, b = model.sim.jobs, env.sim.jobs
    return bool(
        model.sim.now == env.sim.now
        and np.array_equal(model.action_masks(), env.action_masks())
        and np.array_equal(model.state.level[:arrived], env.state.level[:arrived])
        and all(np.array_equal(getattr(a, name)[:arrived], getattr(b, name)[:arrived], equal_nan=True)
                for name in ("target_cpu", "target_mem", "progress", "finish_s"))
    )
