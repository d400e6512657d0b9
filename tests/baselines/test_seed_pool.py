"""Tasks per seed in this process or a pool (synergy_gym.baselines.seed_pool): order kept, bad counts refused."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from synergy_gym.baselines.seed_pool import check_workers, results_in_order
from synergy_gym.errors import ConfigError


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_results_come_in_the_tasks_order(workers):
    tasks = [(x,) for x in (5, 1, 4, 2, 3)]
    with results_in_order(_pid_and_square, tasks, workers) as results:
        out = list(results)
    assert [square for _, square in out] == [25, 1, 16, 4, 9]
    pids = {pid for pid, _ in out}
    assert (pids == {os.getpid()}) == (workers == 1)  # one worker: no pool, all in this process


def _fail_or_mark(x: int, folder: str) -> int:
    if x == 0:
        raise ValueError("task 0 fails")
    time.sleep(0.3)
    (Path(folder) / str(x)).touch()
    return x


def test_a_task_error_cancels_the_tasks_not_started(tmp_path):
    tasks = [(x, str(tmp_path)) for x in range(12)]
    with pytest.raises(ValueError, match="task 0 fails"), results_in_order(_fail_or_mark, tasks, 2) as results:
        list(results)
    ran = len(list(tmp_path.iterdir()))
    assert ran < 11  # without cancelling, the pool's exit waits for all 11 others to run


def test_numpy_integers_are_whole_numbers():
    check_workers(np.int64(2))
    with results_in_order(_pid_and_square, [(3,)], np.int64(2)) as results:
        assert list(results)[0][1] == 9


@pytest.mark.parametrize("workers", [0, -2, True, 1.0, "2"])
def test_a_worker_count_below_one_or_not_whole_is_refused(workers):
    with pytest.raises(ConfigError, match=f"--workers must be a whole number of at least 1, got {workers!r}"):
        check_workers(workers)
    with pytest.raises(ConfigError, match="--workers"), results_in_order(_pid_and_square, [(1,)], workers):
        pass
