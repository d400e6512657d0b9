"""The runnable jobs (arrived, not finished) in arrival order, kept so that a round's cost does not grow with the queue.

An overloaded cluster's queue grows with the run: at 9 jobs an hour on 128 GPUs
a million-job run holds hundreds of thousands of waiting jobs. Rebuilding the
runnable array every round (appending arrivals with a concatenation, dropping
finished jobs by filtering the whole array) would cost time in proportion to the
queue, every round. Here the jobs live in a buffer that grows by doubling:

* arrivals are written after the last job (amortised O(1) a job);
* finished jobs are removed by moving the jobs *before* them one place towards
  the back and advancing the front: the cost is the distance of the last
  finished job from the front. Running jobs are taken from the front of the
  queue under FIFO (the policy whose order the simulator keeps without sorting),
  so that distance is about the number of running jobs, not the queue's length.

:attr:`RunnableJobs.view` is a view of the buffer: valid until the next
:meth:`RunnableJobs.append` or :meth:`RunnableJobs.drop_finished`, which may move
its contents.
"""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.compiled import kernel

_INITIAL_CAPACITY = 1024


@kernel
def _drop_finished(buf, head, tail, finish_s, measured, finished, finish_at, end):
    """Set the ``finished`` jobs' finish times (``finish_at``, or all ``end`` when it is empty), remove
    them from ``buf[head:tail]`` keeping the order of the others, and return (new head, how many
    finished jobs are measured)."""
    n_measured = 0
    each = finish_at.size > 0
    for i in range(finished.size):
        j = finished[i]
        finish_s[j] = finish_at[i] if each else end
        if measured[j]:
            n_measured += 1
    left = finished.size
    last = head - 1  # position of the last finished job found
    p = head
    while left and p < tail:
        if not np.isnan(finish_s[buf[p]]):
            left -= 1
            last = p
        p += 1
    w = last
    for r in range(last, head - 1, -1):
        j = buf[r]
        if np.isnan(finish_s[j]):
            buf[w] = j
            w -= 1
    return w + 1, n_measured


class RunnableJobs:
    """Job indices in arrival order, with cheap appends at the back and removals near the front."""

    def __init__(self) -> None:
        self._buf = np.empty(_INITIAL_CAPACITY, dtype=np.int64)
        self._head = 0
        self._tail = 0

    @property
    def view(self) -> np.ndarray:
        """The runnable jobs; a view, valid until the next change."""
        return self._buf[self._head : self._tail]

    @property
    def size(self) -> int:
        return self._tail - self._head

    def append(self, first: int, end: int) -> None:
        """Add jobs ``first, first + 1, ..., end - 1`` (they arrived after every runnable job)."""
        n = end - first
        if self._tail + n > self._buf.size:
            live = self._tail - self._head
            capacity = max(2 * (live + n), _INITIAL_CAPACITY)
            buf = np.empty(capacity, dtype=np.int64)
            buf[:live] = self._buf[self._head : self._tail]
            self._buf, self._head, self._tail = buf, 0, live
        self._buf[self._tail : self._tail + n] = np.arange(first, end, dtype=np.int64)
        self._tail += n

    def drop_finished(
        self, finish_s: np.ndarray, measured: np.ndarray, finished: np.ndarray, finish_at: np.ndarray, end: float
    ) -> int:
        """Record the ``finished`` jobs' finish times (``finish_at``, or ``end`` for all when it is empty) and
        remove them; returns how many of them are measured."""
        self._head, n_measured = _drop_finished(
            self._buf, self._head, self._tail, finish_s, measured, finished, finish_at, end
        )
        return int(n_measured)
