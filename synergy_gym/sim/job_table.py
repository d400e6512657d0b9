"""The simulator's per-job state.

Progress, timing and priorities live in numpy arrays so that a round updates
every running job with a few vector operations. The handful of attributes the
allocation mechanisms read job by job (GPUs, targets, throughputs) are mirrored
in Python lists: a sequential allocation loop reads Python floats several times
faster than numpy scalars.

Per job the table keeps three allocations, each as (CPUs, GB) per GPU:

* the *target*: what the job asks for (its best-case demand, or an agent's
  preference) and its throughput there;
* the *fallback*: the target capped at the fair share in each dimension
  (``min(target, fair)``), which Synergy-Tune downgrades a job to when its
  target does not fit – for the zoo's models this is the fair share itself, or
  the demand of a job that asks for less than fair. Where that would be slower
  than the fair share (a request below fair that the job's profile punishes),
  the fallback is the fair share;
* the *fair share* and its throughput, for GPU-proportional allocation.
"""

from __future__ import annotations

import numpy as np

from synergy_gym.errors import WorkloadError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.profiles import capped_demand_per_gpu, grid_level
from synergy_gym.sim.profiling import ProfilerConfig, profile_jobs
from synergy_gym.sim.workload import Workload

#: Columns of :attr:`JobTable.progress`, which a round reads and writes for all
#: running jobs with one gather and one scatter; ``executed``, ``start_s``,
#: ``attained_s`` and ``last_end_s`` are views of its columns.
PROGRESS_COLUMNS = ("iter_time_s", "total_iters", "executed", "start_s", "attained_s", "last_end_s")
ITER, TOTAL, EXECUTED, START, ATTAINED, LAST_END = range(len(PROGRESS_COLUMNS))
#: The columns of :meth:`JobTable.target_rows`: the target (CPUs, GB per GPU) and its throughput, the
#: fallback and its throughput, and the throughput at the target capped at the fair share.
TARGET_ROW = ("cpu", "mem", "tput_target", "fallback_cpu", "fallback_mem", "tput_fallback", "tput_capped")


class JobTable:
    """State of every job the simulation knows about, indexed 0..n-1 in arrival order.

    Every column is a numpy array of length :attr:`n` (``progress`` has a row per job); the
    ``*_l`` lists mirror the columns the allocation loop reads job by job.
    """

    # -- what the workload gives -------------------------------------------------------------
    job_id: np.ndarray  #: int64: the workload's job ids
    model: np.ndarray  #: int64: index into the model zoo
    gpus: np.ndarray  #: int64: GPUs the job is gang-scheduled on
    measured: np.ndarray  #: bool: in the measured window
    arrival_s: np.ndarray  #: float: arrival time
    iter_time_s: np.ndarray  #: float: seconds per iteration at the fair share's throughput 1.0
    total_iters: np.ndarray  #: float: iterations to run
    # -- what the simulation changes ---------------------------------------------------------
    finish_s: np.ndarray  #: float: completion time, NaN until finished
    priority: np.ndarray  #: bool: bumped by an ordering's starvation guard
    progress: np.ndarray  #: float (n, len(PROGRESS_COLUMNS)): the columns a round reads and writes
    executed: np.ndarray  #: view of ``progress``: iterations run
    start_s: np.ndarray  #: view of ``progress``: first start, NaN until it runs
    attained_s: np.ndarray  #: view of ``progress``: seconds of service received
    last_end_s: np.ndarray  #: view of ``progress``: end of the last stretch it ran, NaN until it runs
    # -- allocations (per GPU) and their throughputs -------------------------------------------
    target_cpu: np.ndarray
    target_mem: np.ndarray
    tput_target: np.ndarray
    fallback_cpu: np.ndarray
    fallback_mem: np.ndarray
    tput_fallback: np.ndarray
    tput_capped: np.ndarray  #: throughput at the target capped at the fair share (before the fallback's floor)
    tput_fair: np.ndarray
    #: Whether the simulation's mechanism grants a job whose target is slower than its fallback the fallback
    #: (Tune, OPT) rather than the target (Greedy): :meth:`planned` then gives the fallback for such jobs.
    floors_targets: bool = False

    def __init__(
        self, cluster: ClusterSpec, workload: Workload, profiler: ProfilerConfig | None = None, floors_targets: bool = False
    ) -> None:
        self.floors_targets = bool(floors_targets)
        self.cluster = cluster
        self.profiler = profiler
        #: Per-job estimated matrices [job, cpu level, mem level] (profiled mode only).
        self.belief: np.ndarray | None = None
        self.profiling_cost_gpu_min = np.zeros(0)
        self.zoo = workload.zoo
        self.fair_cpu = cluster.fair_cpus_per_gpu
        self.fair_mem = cluster.fair_mem_gb_per_gpu
        self.n = 0
        self.workload = workload
        self.job_id = np.zeros(0, dtype=np.int64)
        self.model = np.zeros(0, dtype=np.int64)
        self.gpus = np.zeros(0, dtype=np.int64)
        self.measured = np.zeros(0, dtype=bool)
        self.priority = np.zeros(0, dtype=bool)
        self.arrival_s = np.zeros(0)
        self.iter_time_s = np.zeros(0)
        self.total_iters = np.zeros(0)
        self.finish_s = np.zeros(0)
        self.progress = np.zeros((0, len(PROGRESS_COLUMNS)))
        self._bind_progress_views()
        self.target_cpu = np.zeros(0)
        self.target_mem = np.zeros(0)
        self.tput_target = np.zeros(0)
        self.fallback_cpu = np.zeros(0)
        self.fallback_mem = np.zeros(0)
        self.tput_fallback = np.zeros(0)
        self.tput_capped = np.zeros(0)
        self.tput_fair = np.zeros(0)
        self._placement_columns: tuple = ()
        # Python mirrors for the allocation loop.
        self.gpus_l: list[int] = []
        self.arrival_l: list[float] = []
        self.target_cpu_l: list[float] = []
        self.target_mem_l: list[float] = []
        self.tput_target_l: list[float] = []
        self.fallback_cpu_l: list[float] = []
        self.fallback_mem_l: list[float] = []
        self.tput_fallback_l: list[float] = []
        self.tput_fair_l: list[float] = []
        self._append(workload)

    def extend(self, more: Workload) -> None:
        """Add jobs that arrive after all known ones."""
        self.workload = self.workload.concat(more)
        self._append(more)

    def _append(self, w: Workload) -> None:
        w.check_fits(self.cluster)
        n_new = len(w)
        if self.profiler is None:
            cpu, mem = w.demand_per_gpu(self.cluster)
            cost = np.zeros(n_new)
        else:
            c = self.cluster
            profiles = profile_jobs(self.zoo, w.model, w.gpus, w.job_id, c, self.profiler)
            cpu = capped_demand_per_gpu(profiles.demand_cpu, w.gpus, c.fair_cpus_per_gpu, c.cpus_per_server)
            mem = capped_demand_per_gpu(profiles.demand_mem, w.gpus, c.fair_mem_gb_per_gpu, c.mem_gb_per_server)
            self.belief = profiles.matrices if self.belief is None else np.concatenate([self.belief, profiles.matrices])
            cost = profiles.cost_gpu_min
        self.profiling_cost_gpu_min = np.concatenate([self.profiling_cost_gpu_min, cost])
        self.job_id = np.concatenate([self.job_id, w.job_id])
        self.model = np.concatenate([self.model, w.model])
        self.gpus = np.concatenate([self.gpus, w.gpus])
        self.measured = np.concatenate([self.measured, w.measured])
        self.priority = np.concatenate([self.priority, np.zeros(n_new, dtype=bool)])
        self.arrival_s = np.concatenate([self.arrival_s, w.arrival_s])
        self.iter_time_s = np.concatenate([self.iter_time_s, w.iter_time_s])
        self.total_iters = np.concatenate([self.total_iters, w.total_iters.astype(float)])
        self.finish_s = np.concatenate([self.finish_s, np.full(n_new, np.nan)])
        progress = np.zeros((n_new, len(PROGRESS_COLUMNS)))
        progress[:, ITER] = w.iter_time_s
        progress[:, TOTAL] = w.total_iters
        progress[:, [START, LAST_END]] = np.nan
        self.progress = np.concatenate([self.progress, progress])
        self._bind_progress_views()
        new_idx = np.arange(self.n, self.n + n_new)
        fair_tput = self.est_throughput_many(new_idx, np.full(n_new, self.fair_cpu), np.full(n_new, self.fair_mem))
        self.tput_fair = np.concatenate([self.tput_fair, fair_tput])
        self.target_cpu = np.concatenate([self.target_cpu, np.zeros(n_new)])
        self.target_mem = np.concatenate([self.target_mem, np.zeros(n_new)])
        self.tput_target = np.concatenate([self.tput_target, np.zeros(n_new)])
        self.fallback_cpu = np.concatenate([self.fallback_cpu, np.zeros(n_new)])
        self.fallback_mem = np.concatenate([self.fallback_mem, np.zeros(n_new)])
        self.tput_fallback = np.concatenate([self.tput_fallback, np.zeros(n_new)])
        self.tput_capped = np.concatenate([self.tput_capped, np.zeros(n_new)])
        self._placement_columns = (
            self.gpus, self.target_cpu, self.target_mem, self.tput_target,
            self.fallback_cpu, self.fallback_mem, self.tput_fallback, self.tput_capped,
        )
        first = self.n
        self.n += n_new
        self.gpus_l.extend(w.gpus.tolist())
        self.arrival_l.extend(w.arrival_s.tolist())
        self.tput_fair_l.extend(fair_tput.tolist())
        for lst in (
            self.target_cpu_l, self.target_mem_l, self.tput_target_l,
            self.fallback_cpu_l, self.fallback_mem_l, self.tput_fallback_l,
        ):
            lst.extend([0.0] * n_new)
        self.set_targets(np.arange(first, self.n), cpu, mem)

    def placement_columns(self) -> tuple:
        """The per-job columns Tune's compiled placement reads (:mod:`synergy_gym.sim.tune_kernels`): GPUs,
        target CPUs and GB per GPU and the throughput there, the fallback's, and :attr:`tput_capped`."""
        return self._placement_columns

    def planned(self, jobs: np.ndarray, floor: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(CPUs, GB per GPU, throughput) that ``jobs`` are granted at best: their target, except – where ``floor``
        (default :attr:`floors_targets`) – the fallback of a job whose target is slower (a trace's request below the
        fair share), as Tune grants it. The orderings rank jobs by it; the environment's demand level is it."""
        cpu, mem, tput = self.target_cpu[jobs], self.target_mem[jobs], self.tput_target[jobs]
        if self.floors_targets if floor is None else floor:
            below = tput < self.tput_fallback[jobs]
            if below.any():
                cpu = np.where(below, self.fallback_cpu[jobs], cpu)
                mem = np.where(below, self.fallback_mem[jobs], mem)
                tput = np.where(below, self.tput_fallback[jobs], tput)
        return cpu, mem, tput

    def est_throughput_many(self, jobs: np.ndarray, cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
        """What the scheduler believes ``jobs`` achieve at (cpu, mem) per GPU."""
        if self.belief is None:
            return self.zoo.throughput_many(self.model[jobs], cpu, mem)
        return self.belief[jobs, grid_level(self.zoo.cpu_grid, cpu), grid_level(self.zoo.mem_grid, mem)]

    def est_throughput(self, j: int, cpu: float, mem: float) -> float:
        """:meth:`est_throughput_many` for one job."""
        if self.belief is None:
            return self.zoo.throughput_of(int(self.model[j]), cpu, mem)
        ci, mi = self.zoo.levels_of(cpu, mem)
        return float(self.belief[j, ci, mi])

    def true_throughput_many(self, jobs: np.ndarray, cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
        """The ground truth: the model zoo's measured matrices."""
        return self.zoo.throughput_many(self.model[jobs], cpu, mem)

    _PROGRESS_VIEWS = ("executed", "start_s", "attained_s", "last_end_s")

    def __getstate__(self) -> dict:
        # The progress columns are views of ``progress``; pickle would save them as
        # separate copies that no longer follow it, so they are re-bound on load.
        state = dict(self.__dict__)
        for name in self._PROGRESS_VIEWS:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind_progress_views()

    def _bind_progress_views(self) -> None:
        self.executed = self.progress[:, EXECUTED]
        self.start_s = self.progress[:, START]
        self.attained_s = self.progress[:, ATTAINED]
        self.last_end_s = self.progress[:, LAST_END]

    def target_rows(self, jobs: np.ndarray, cpu_per_gpu: np.ndarray, mem_per_gpu: np.ndarray) -> np.ndarray:
        """What :meth:`set_targets` would set for ``jobs`` asking for (CPUs, GB) per GPU, without setting it.

        One row per job, the columns of :data:`TARGET_ROW`: the target, its throughput, the fallback
        and its throughput, and the target capped at the fair share's throughput; :meth:`assign_target`
        sets a row.
        """
        jobs = np.asarray(jobs, dtype=np.int64)
        cpu = np.broadcast_to(np.asarray(cpu_per_gpu, dtype=float), jobs.shape)
        mem = np.broadcast_to(np.asarray(mem_per_gpu, dtype=float), jobs.shape)
        if np.any(~(cpu > 0)) or np.any(~(mem > 0)):
            raise WorkloadError("a job's CPU and memory target must be positive")
        fb_cpu = np.minimum(cpu, self.fair_cpu)
        fb_mem = np.minimum(mem, self.fair_mem)
        t_target = self.est_throughput_many(jobs, cpu, mem)
        t_fb = self.est_throughput_many(jobs, fb_cpu, fb_mem)
        capped = t_fb
        slow = t_fb < self.tput_fair[jobs] - 1e-12
        if slow.any():  # never fall back below the fair share
            fb_cpu = np.where(slow, self.fair_cpu, fb_cpu)
            fb_mem = np.where(slow, self.fair_mem, fb_mem)
            t_fb = np.where(slow, self.tput_fair[jobs], t_fb)
        return np.stack([cpu, mem, t_target, fb_cpu, fb_mem, t_fb, capped], axis=-1)

    def set_targets(self, jobs: np.ndarray, cpu_per_gpu: np.ndarray, mem_per_gpu: np.ndarray) -> None:
        """Set what ``jobs`` ask for, as (CPUs, GB) per GPU; updates their throughputs."""
        jobs = np.asarray(jobs, dtype=np.int64)
        rows = self.target_rows(jobs, cpu_per_gpu, mem_per_gpu)
        cpu, mem, t_target, fb_cpu, fb_mem, t_fb, capped = rows.T
        self.tput_capped[jobs] = capped
        self.target_cpu[jobs] = cpu
        self.target_mem[jobs] = mem
        self.tput_target[jobs] = t_target
        self.fallback_cpu[jobs] = fb_cpu
        self.fallback_mem[jobs] = fb_mem
        self.tput_fallback[jobs] = t_fb
        lists = (self.target_cpu_l, self.target_mem_l, self.tput_target_l, self.fallback_cpu_l, self.fallback_mem_l,
                 self.tput_fallback_l)
        ids = jobs.tolist()
        first = ids[0] if ids and ids[0] >= 0 else -1
        run = first >= 0 and ids == list(range(first, first + len(ids)))  # new jobs (every extend): one slice each
        for values, column in zip(lists, rows.T[:6].tolist()):
            if run:
                values[first : first + len(ids)] = column
            else:
                for j, v in zip(ids, column):
                    values[j] = v

    def assign_target(
        self, j: int, cpu: float, mem: float, t_target: float, fb_cpu: float, fb_mem: float, t_fb: float, capped: float
    ) -> None:
        """Set job ``j``'s target as a row of :meth:`target_rows` gives it (the environment's hot path)."""
        self.tput_capped[j] = capped
        self.target_cpu[j] = cpu
        self.target_mem[j] = mem
        self.tput_target[j] = t_target
        self.fallback_cpu[j] = fb_cpu
        self.fallback_mem[j] = fb_mem
        self.tput_fallback[j] = t_fb
        self.target_cpu_l[j] = cpu
        self.target_mem_l[j] = mem
        self.tput_target_l[j] = t_target
        self.fallback_cpu_l[j] = fb_cpu
        self.fallback_mem_l[j] = fb_mem
        self.tput_fallback_l[j] = t_fb

    def set_target(self, j: int, cpu_per_gpu: float, mem_per_gpu: float) -> None:
        """:meth:`set_targets` for one job, without numpy overhead (the env's hot path)."""
        if not (cpu_per_gpu > 0 and mem_per_gpu > 0):
            raise WorkloadError("a job's CPU and memory target must be positive")
        fb_cpu = min(cpu_per_gpu, self.fair_cpu)
        fb_mem = min(mem_per_gpu, self.fair_mem)
        t_target = self.est_throughput(j, cpu_per_gpu, mem_per_gpu)
        t_fb = self.est_throughput(j, fb_cpu, fb_mem)
        self.tput_capped[j] = t_fb
        if t_fb < self.tput_fair_l[j] - 1e-12:  # never fall back below the fair share
            fb_cpu, fb_mem, t_fb = self.fair_cpu, self.fair_mem, self.tput_fair_l[j]
        self.target_cpu[j] = cpu_per_gpu
        self.target_mem[j] = mem_per_gpu
        self.tput_target[j] = t_target
        self.fallback_cpu[j] = fb_cpu
        self.fallback_mem[j] = fb_mem
        self.tput_fallback[j] = t_fb
        self.target_cpu_l[j] = cpu_per_gpu
        self.target_mem_l[j] = mem_per_gpu
        self.tput_target_l[j] = t_target
        self.fallback_cpu_l[j] = fb_cpu
        self.fallback_mem_l[j] = fb_mem
        self.tput_fallback_l[j] = t_fb
