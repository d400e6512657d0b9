"""Run one task per workload seed, in this process or in a pool of processes, results in seed order.

The rollouts (:mod:`~synergy_gym.baselines.rollout_bound`,
:mod:`~synergy_gym.baselines.switching_rollout`) take minutes an episode; ``--workers N`` runs N
seeds at a time. With one worker everything runs in this process (no pool to start, and a bug's
traceback as it is). A task's error reaches the caller once the tasks already running end; those
not yet handed to a worker are cancelled.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from synergy_gym.errors import ConfigError

T = TypeVar("T")


def check_count(option: str, value: Any) -> int:
    """``value`` as an ``int``; a :class:`~synergy_gym.errors.ConfigError` naming ``option`` unless it is a whole
    number of at least 1 (NumPy's integers count; ``bool`` and ``2.0`` do not)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ConfigError(f"{option} must be a whole number of at least 1, got {value!r}")
    return int(value)


def check_workers(workers: int) -> None:
    """Refuse (:class:`~synergy_gym.errors.ConfigError`) a worker count below 1."""
    check_count("--workers", workers)


@contextmanager
def results_in_order(fn: Callable[..., T], tasks: list[tuple[Any, ...]], workers: int) -> Iterator[Iterator[T]]:
    """``fn(*task)`` for each task, yielded in the tasks' order, each once it and those before it are done."""
    check_workers(workers)
    if workers == 1 or len(tasks) <= 1:
        yield (fn(*task) for task in tasks)
        return
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
        yield pool.map(fn, *zip(*tasks))  # its results' iterator cancels the tasks not started when one fails
