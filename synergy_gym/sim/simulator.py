"""The round-based cluster simulator.

Every round (300 s by default) the ordering ranks the runnable jobs, the allocation mechanism gives
them GPUs, CPUs and memory from an empty cluster, and the placed jobs progress at their throughput.
Timing follows the paper's simulator (``timing="round"``):

* a job that arrives mid-round waits for the next round boundary;
* a placed job is credited the whole round up front: ``floor(round_s / (iter_time / throughput))``
  iterations, capped at what it has left;
* a job whose last iteration runs in a round completes at that round's end, so JCT = that boundary − arrival.

With ``timing="exact"`` progress is continuous and a job completes at the exact moment its last
iteration ends; its resources are free from then on, because the scheduler re-plans at every
completion as well as at every round boundary.

With ``sensitivity="profiled"`` the policies decide on each job's estimated sensitivity
(:mod:`synergy_gym.sim.profiling`) and jobs progress at the throughput the model zoo's measured
matrix gives their allocation.

Rounds in which nothing can change are skipped in one step: with an ordering whose order only
changes when jobs arrive or finish (FIFO), the allocation stays the same until the next completion
or the next arrival that could be admitted, so the simulator advances every running job over all
those rounds at once; under any other ordering the same holds with one job in the system, until
the next arrival (which may outrank it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from synergy_gym.errors import WorkloadError
from synergy_gym.sim import kernels
from synergy_gym.sim.allocation import AllocationMechanism
from synergy_gym.sim.arguments import check_function, check_job_progress, check_simulator_arguments
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import BOUNDARY_TOLERANCE, SimulationConfig
from synergy_gym.sim.job_table import ATTAINED, EXECUTED, ITER, LAST_END, START, TOTAL, JobTable
from synergy_gym.sim.ledger import ClusterLedger
from synergy_gym.sim.metrics import RoundLog, SimulationResult, build_result
from synergy_gym.sim.planner import RoundPlanner
from synergy_gym.sim.policy import SchedulingPolicy
from synergy_gym.sim.runnable import RunnableJobs
from synergy_gym.sim.workload import JobStream, Workload

RoundObserver = Callable[["Simulator", np.ndarray, np.ndarray], None]

# Look this many jobs ahead for the next arrival that could be admitted.
_ARRIVAL_LOOKAHEAD = 256
# Ask the job stream for more jobs when fewer than this many have not arrived.
_STREAM_LOW_WATER = 64
# No per-job finish times: the finished jobs finish at the segment's end.
_NO_TIMES = np.zeros(0)


class Simulator:
    """Runs one workload under one policy on one cluster.

    ``more_jobs`` extends an open-ended workload (the synthetic generator's
    stream): it is drawn from whenever few jobs are left to arrive.
    ``observer(sim, placed, tput)``, if given, is called after every planned
    round with the placed jobs' indices and throughputs (``sim.ledger`` holds
    their grants).
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        workload: Workload,
        policy: SchedulingPolicy,
        config: SimulationConfig | None = None,
        more_jobs: JobStream | None = None,
        observer: RoundObserver | None = None,
    ) -> None:
        check_simulator_arguments(cluster, workload, policy, config, more_jobs, observer)
        self.cluster = cluster
        self.observer = observer
        self.policy = policy
        self.config = config or SimulationConfig()
        workload.check_window()
        self.run_until = workload.run_until
        profiler = self.config.profiler if self.config.sensitivity == "profiled" else None
        self.jobs = JobTable(cluster, workload, profiler, getattr(policy.mechanism, "floors_targets", False))
        check_job_progress(self.jobs, self.config, 0)
        self.ledger = ClusterLedger(cluster, self.config.placement)
        #: Every round is planned through one persistent planner, which (under Tune) keeps the
        #: unchanged start of the last round's placement (see :mod:`synergy_gym.sim.planner`).
        self.planner = RoundPlanner(self.ledger, self.jobs, policy.mechanism, reuse=True)
        self._more = more_jobs
        self._queue = RunnableJobs()  # job indices in arrival order
        self._next = 0  # index of the next job to arrive
        self._measured_left = self._measured_loaded = int(workload.measured.sum())  # unfinished; all so far
        self._unfinished = len(workload)
        self.log = RoundLog()
        self.now = self._boundary_at_or_after(float(self.jobs.arrival_s[0]))
        self.first_round_s = self.now
        self._rounds_at = (self.now, 0)  # (time, rounds elapsed) cache
        self.rounds_planned = 0
        self.exhausted = False  # no job left to run or arrive

    # -- public -------------------------------------------------------------
    @property
    def done(self) -> bool:
        if self.run_until == "window":
            return self._measured_left == 0
        return self._unfinished == 0 and self._next >= self.jobs.n and self._more is None

    @property
    def rounds_elapsed(self) -> int:
        """Whole rounds simulated since the first round boundary (a round under way, with ``timing="exact"``, not
        counted; a clock a few ulps short of a boundary is on it)."""
        now = self.now
        if now != self._rounds_at[0]:
            rounds = math.floor((now - self.first_round_s) / self.config.round_s + BOUNDARY_TOLERANCE)
            self._rounds_at = (now, max(0, rounds))
        return self._rounds_at[1]

    @property
    def runnable(self) -> np.ndarray:
        """Jobs that have arrived and not finished (waiting or running), in arrival order.

        A view of the simulator's own buffer: do not modify it, and copy it to keep it past the next
        :meth:`advance` (which may move its contents).
        """
        return self._queue.view

    @property
    def measured_finished(self) -> int:
        return self._measured_loaded - self._measured_left  # (no count over every job: run's progress asks each round)

    @property
    def measured_total(self) -> int:
        return self._measured_loaded

    def run(self, progress: Callable[[int, int], None] | None = None) -> SimulationResult:
        """Simulate until the run's end; ``progress(done, total)`` is called as jobs finish."""
        check_function("Simulator.run: progress", progress, "(done, total)")
        started = time.perf_counter()
        reported = -1
        while not self.done:
            if not self.step():
                break
            if progress is not None:
                done = self.measured_finished if self.run_until == "window" else self.jobs.n - self._unfinished
                if done != reported:
                    reported = done
                    progress(done, self.measured_total if self.run_until == "window" else self.jobs.n)
        return build_result(
            self.jobs, self.log, self.cluster, policy=self.policy.name, round_s=self.config.round_s,
            sensitivity=self.config.sensitivity, end_s=self.now, rounds_planned=self.rounds_planned,
            wall_s=time.perf_counter() - started, start_s=self.first_round_s, recorded=self.config.record_rounds,
        )

    def step(self) -> bool:
        """Plan one round (or one stretch of identical rounds) and advance time.

        Returns False when the run is over (:attr:`done`) or no job is left to run or arrive
        (:attr:`exhausted`), so ``while sim.step(): ...`` ends.
        """
        order = self.begin_round()
        if order is None:
            return not (self.done or self.exhausted)
        self.allocate(order)
        self.advance()
        return True

    def begin_round(self, max_rounds: int | None = None) -> np.ndarray | None:
        """Admit the jobs that have arrived and return the runnable ones in policy order.

        Under FIFO the order is :attr:`runnable` itself, a view valid until the next :meth:`advance`.

        Returns None when there is nothing to plan at this instant: the run is
        done, or the cluster is idle (time then jumps to the next arrival's
        round, or to round ``max_rounds`` if that comes first: a caller's limit), or no job
        is left at all (``exhausted``).
        """
        self.admit_arrivals()
        if self.done:
            return None
        if self._queue.size == 0:
            nxt = self._next_arrival()
            if nxt is None:
                self.exhausted = True
            else:
                jump_to = self._boundary_at_or_after(float(self.jobs.arrival_s[nxt]))
                if max_rounds is not None:  # never back in time
                    jump_to = min(jump_to, max(self.now, self.first_round_s + max_rounds * self.config.round_s))
                self.now = jump_to
            return None
        return self._order()

    def allocate(self, order: np.ndarray) -> None:
        """Allocate the round from an empty cluster, walking ``order`` with the policy's mechanism."""
        self.planner.plan(order)

    def allocation_with(self, mechanism: AllocationMechanism, order: np.ndarray | None = None) -> ClusterLedger:
        """How ``mechanism`` would allocate this round's jobs, on a fresh ledger; time does not move.

        Lets OPT and the heuristics be compared on the same round states: the
        ledger's ``tput`` are the placed jobs' normalised throughputs.
        """
        ledger = ClusterLedger(self.cluster, self.config.placement)
        mechanism.allocate(ledger, self.jobs, self._order() if order is None else order)
        return ledger

    def advance(self, max_rounds: int | None = None, allow_idle: bool = False) -> np.ndarray:
        """Run the ledger's grants until something can change (at most ``max_rounds`` rounds).

        Returns the indices of the jobs that finished. An empty allocation is an
        error (no runnable job could ever be placed) unless ``allow_idle``, when
        the cluster just idles until the next round boundary.
        """
        ledger = self.ledger
        if self.config.debug:
            ledger.check_capacity()
        self.rounds_planned += 1
        placed = ledger.jobs.copy()
        if placed.size == 0:
            if allow_idle:
                self.now = (math.floor(self.now / self.config.round_s + BOUNDARY_TOLERANCE) + 1) * self.config.round_s
                return placed
            if ledger.free_gpus_total == self.cluster.total_gpus and self._queue.size:
                j = int(self.runnable[0])
                raise WorkloadError(
                    f"job {self.jobs.job_id[j]} can never be placed: its GPUs, CPUs or memory "
                    f"do not fit on this cluster ({self.cluster.describe()})"
                )
            raise AssertionError("no job placed although GPUs are busy")  # pragma: no cover
        if self.jobs.belief is None:
            tput = ledger.tput.copy()
        else:  # the ledger holds believed throughputs; jobs progress at the true ones
            tput = self.jobs.true_throughput_many(placed, ledger.cpu, ledger.mem)
        if self.observer is not None:
            self.observer(self, placed, tput)
        if self.config.timing == "round":
            return self._advance_rounds(placed, tput, max_rounds)
        return self._advance_exact(placed, tput, max_rounds)

    # -- arrivals -----------------------------------------------------------
    def _boundary_at_or_after(self, t: float) -> float:
        # As the clock stepping round by round admits t: at boundary k = 3 for t = 3 * 123.4, though t / 123.4 > 3.
        r = self.config.round_s
        b = math.ceil(t / r - BOUNDARY_TOLERANCE) * r
        return b if b >= t else b + r  # t after the boundary's value: the clock there would not admit it

    def admit_arrivals(self) -> None:
        """Add the jobs that have arrived by :attr:`now` to :attr:`runnable` (:meth:`begin_round` does it first)."""
        self._top_up_stream()
        jobs = self.jobs
        end = int(jobs.arrival_s.searchsorted(self.now, side="right"))
        if end > self._next:
            self._queue.append(self._next, end)
            self._next = end
            self._top_up_stream()

    def forget_future(self) -> None:
        """Drop every job that has not arrived yet, as if the workload ended now: a same-information model of the
        future for lookahead on a copy (``copy.deepcopy``). The dropped rows stay in :attr:`jobs` with an infinite
        arrival time, so they never arrive, run or count; a stream stops."""
        self.admit_arrivals()  # jobs that arrived since the last round began are in the system
        self._more = None
        jobs, first = self.jobs, self._next
        gone = jobs.n - first
        if gone > 0:
            measured = int(jobs.measured[first:].sum())
            self._measured_left -= measured
            self._measured_loaded -= measured
            self._unfinished -= gone
            jobs.arrival_s[first:] = math.inf
            jobs.arrival_l[first:] = [math.inf] * gone
            self._next = jobs.n

    def _top_up_stream(self) -> None:
        while self._more is not None and self.jobs.n - self._next < _STREAM_LOW_WATER:
            try:
                chunk = next(self._more)
            except StopIteration:
                self._more = None
                return
            first = self.jobs.n
            self.jobs.extend(chunk)
            check_job_progress(self.jobs, self.config, first)
            measured = int(chunk.measured.sum())
            self._measured_left += measured
            self._measured_loaded += measured
            self._unfinished += len(chunk)

    def _next_arrival(self) -> int | None:
        self._top_up_stream()
        return self._next if self._next < self.jobs.n else None

    def seconds_until_admissible_arrival(self, free_gpus: int) -> float:
        """Seconds until the first round in which an arriving job could be admitted."""
        if free_gpus == 0:
            return math.inf
        p = self._next
        if p >= self.jobs.n:
            return math.inf
        jobs = self.jobs
        if jobs.gpus_l[p] <= free_gpus:
            j = p
        else:
            window = jobs.gpus[p : p + _ARRIVAL_LOOKAHEAD] <= free_gpus
            # No small-enough job within the lookahead: stop at its end anyway.
            j = p + int(np.argmax(window)) if window.any() else min(p + _ARRIVAL_LOOKAHEAD, jobs.n) - 1
        return self._boundary_at_or_after(jobs.arrival_l[j]) - self.now

    # -- ordering -----------------------------------------------------------
    def _order(self) -> np.ndarray:
        ordering = self.policy.ordering
        jobs = self.jobs
        if ordering.starvation_guard:
            r = self.runnable
            last = jobs.last_end_s[r]
            last = np.where(np.isnan(last), jobs.arrival_s[r], last)
            starving = (self.now - last) > self.config.starvation_s
            if starving.any():
                jobs.priority[r[starving]] = True
        return ordering.order(jobs, self.runnable, self.now, self.policy.mechanism.uses_targets)

    # -- progress -----------------------------------------------------------
    def _skippable(self) -> bool:
        """Whether the plan stays the same until the next completion or admissible arrival (:meth:`_skip_free_gpus`):
        under a static ordering (FIFO), or with one job in the system under any (its order cannot change)."""
        return self.policy.ordering.static or self.runnable.size <= 1

    def _skip_free_gpus(self) -> int:
        """The free GPUs an arrival must fit to end a skip: the free ones under a static ordering, where a job that
        does not fit waits; under another (one job in the system) any arrival may outrank and preempt it."""
        return self.ledger.free_gpus_total if self.policy.ordering.static else self.cluster.total_gpus

    def _advance_rounds(self, placed: np.ndarray, tput: np.ndarray, max_rounds: int | None) -> np.ndarray:
        r = self.config.round_s
        skippable = self._skippable()
        wait = self.seconds_until_admissible_arrival(self._skip_free_gpus()) if skippable else math.inf
        start = self.now
        has_wait, has_max = wait < math.inf, max_rounds is not None
        finished, n = kernels.run_rounds(
            self.jobs.progress, placed, tput, r, skippable, has_wait, int(round(wait / r)) if has_wait else 0,
            has_max, max_rounds if max_rounds is not None else 0, start,
        )
        return self._end_segment(placed, tput, start, n * r, finished, None)

    def _advance_exact(self, placed: np.ndarray, tput: np.ndarray, max_rounds: int | None) -> np.ndarray:
        r = self.config.round_s
        state = self.jobs.progress.take(placed, axis=0)  # one gather, one scatter below
        rate = tput / state[:, ITER]
        t_finish = (state[:, TOTAL] - state[:, EXECUTED]) / rate
        next_boundary = (math.floor(self.now / r + BOUNDARY_TOLERANCE) + 1) * r
        horizon = next_boundary - self.now
        if self._skippable():
            horizon = max(horizon, self.seconds_until_admissible_arrival(self._skip_free_gpus()))
            if max_rounds is not None:
                horizon = min(horizon, next_boundary + (max(max_rounds, 1) - 1) * r - self.now)
        dt = min(float(t_finish.min()), horizon)
        done = t_finish <= dt * (1 + 1e-12) + 1e-9
        state[:, EXECUTED] = np.where(done, state[:, TOTAL], state[:, EXECUTED] + rate * dt)
        start = self.now
        np.fmin(state[:, START], start, out=state[:, START])  # NaN (never ran) becomes this start
        state[:, ATTAINED] += dt
        state[:, LAST_END] = start + dt
        self.jobs.progress[placed] = state
        return self._end_segment(placed, tput, start, dt, placed[done], start + t_finish[done])

    def _end_segment(
        self,
        placed: np.ndarray,
        tput: np.ndarray,
        start: float,
        duration: float,
        finished: np.ndarray,
        finish_at: np.ndarray | None,
    ) -> np.ndarray:
        """Log the segment, record the ``finished`` jobs' ``finish_at`` times (None: the segment's end) and move
        the clock to its end."""
        jobs = self.jobs
        ledger = self.ledger
        end = start + duration
        if self.config.record_rounds:
            c = self.cluster
            self.log.add(
                start,
                duration,
                c.total_gpus - ledger.free_gpus_total,
                c.total_cpus - sum(ledger.free_cpu.tolist()),  # summed in order, as ever
                c.total_mem_gb - sum(ledger.free_mem.tolist()),
                float(np.dot(jobs.gpus[placed], tput)),
                int(placed.size),
                int(self._queue.size - placed.size),
            )
        if finished.size:
            self._measured_left -= self._queue.drop_finished(
                jobs.finish_s, jobs.measured, finished, _NO_TIMES if finish_at is None else finish_at, end
            )
            self._unfinished -= int(finished.size)
        self.now = end
        return finished
