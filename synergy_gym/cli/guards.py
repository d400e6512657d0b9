"""Size guards: the memory and time a command will need, estimated before it starts.

``compare`` and ``sweep`` estimate their run from the cluster (servers), the jobs per
simulation and the number of simulations (seeds × loads × policies × sensitivities; a
sweep's cells) before anything runs, and refuse a run past a limit with one line giving
the estimate and the flag that allows it (``--allow-large``):

* **memory**: more than :data:`MEMORY_LIMIT_BYTES` (16 GiB) or more than
  :data:`MACHINE_MEMORY_FRACTION` (80 %) of this machine's physical memory, whichever is less;
* **time**: more than :data:`TIME_LIMIT_S` (one hour) of wall-clock time (a sweep's cells
  divided among its Ray workers).

Under ``--quiet`` a run estimated to take more than :data:`QUIET_NOTICE_S` (a minute) says so
in one line on stderr before it starts, so that no command is silent for minutes.

The model (:func:`simulation_bytes`, :func:`simulation_seconds`, :func:`compare_estimate`,
:func:`sweep_estimate`) was calibrated on one core of a 2-core AMD EPYC virtual machine
(Python 3.11), measuring peak RSS and wall time of runs from 20 to 10⁵ jobs and 16 to 10⁵
servers; the constants below are those measurements, rounded up. It errs on the high side
by up to about 2.5× (the paper's default ``compare``: 8 s and 423 MiB estimated; 4.8 s and
338 MiB measured, start-up included), and can be low by about 3× for a preemptive ordering
(``las``, ``srtf``…) on a badly overloaded cluster, which draws many more jobs into an
open-ended run than the two windows' worth assumed here (``las+tune`` at 14 jobs/h: 41,864 jobs).
"""

from __future__ import annotations

import importlib
import math
import os
import sys
from dataclasses import dataclass

from synergy_gym.errors import SynergyGymError

GIB = 1024**3
#: Documented limit on a run's estimated memory (bytes).
MEMORY_LIMIT_BYTES = 16 * GIB
#: At most this fraction of the machine's physical memory.
MACHINE_MEMORY_FRACTION = 0.8
#: Documented limit on a run's estimated wall-clock time (seconds).
TIME_LIMIT_S = 3600.0
#: Under ``--quiet``, a run estimated to take longer than this says so on stderr first.
QUIET_NOTICE_S = 60.0
#: The flag that lifts both limits.
ALLOW_FLAG = "--allow-large"

# -- calibration (measured; see the module docstring) ---------------------------------------
#: The process itself: Python, NumPy, pandas, numba's compiled kernels, matplotlib for the figures.
BASE_BYTES = 400 * 1024**2
#: Per server of a live simulation (the per-round ledger's lists; measured 158 B).
SERVER_BYTES = 160
#: Per job of a live simulation (job table, round log, the workload; measured ≈ 940 B at 10⁵ jobs).
LIVE_JOB_BYTES = 1000
#: Per finished ``compare`` run kept until the files are written (summary, result frames; measured ≈ 70 KB).
RUN_BYTES = 75_000
#: Per job of each finished ``compare`` run kept for ``jobs.csv`` and the CDF, writing included (measured ≈ 400 B).
KEPT_JOB_BYTES = 450
#: Per finished ``sweep`` cell held by the driver (its row), and per measured job's JCT in it.
CELL_BYTES = 5_000
CELL_JCT_BYTES = 100
#: A Ray worker process (measured ≈ 310 MB with an open-ended cell) and Ray's own processes (local Ray).
RAY_WORKER_BYTES = 300 * 1024**2
RAY_SYSTEM_BYTES = 500 * 1024**2
#: Fixed seconds per simulation (setting up, summarising; measured ≈ 4 ms).
RUN_S = 0.004
#: Seconds per job: FIFO orderings (measured 0.10–0.31 ms/job, the most when overloaded), the others
#: (0.2–0.5 ms/job), OPT and its LP (2.8–3.9 ms/job).
FIFO_JOB_S = 0.00012
OTHER_JOB_S = 0.0005
OPT_JOB_S = 0.004
#: Planned rounds per job: FIFO orderings (measured 0.5–1.4), the others (measured ≈ 3.1).
FIFO_ROUNDS_PER_JOB = 1.5
OTHER_ROUNDS_PER_JOB = 3.2
#: Seconds per server and planned round (the ledger is rebuilt each round; measured 1.08 µs).
SERVER_ROUND_S = 1.1e-6
#: ``--placement consolidate`` scans every server for each job placed (measured 5.9 µs per server-round).
CONSOLIDATE_FACTOR = 6.0
#: Seconds per row of ``compare``'s ``jobs.csv`` (measured ≈ 19 µs), and for the figures.
WRITE_JOB_S = 2.0e-5
WRITE_S = 3.0
#: Jobs of an open-ended run: about twice the measured window's end (measured 9,096 and 11,144 for jobs 4000–4999).
OPEN_ENDED_FACTOR = 2.0


class SizeError(SynergyGymError):
    """A run whose estimate is past a limit (one line: the estimate, the limit and :data:`ALLOW_FLAG`)."""


@dataclass(frozen=True)
class Estimate:
    """What a command will need: ``memory_bytes`` at the peak and ``seconds`` of wall-clock time.

    ``what`` says what is counted ("300,003 runs of 60 jobs on 16 servers").
    """

    what: str
    memory_bytes: float
    seconds: float


def machine_memory_bytes() -> int | None:
    """This machine's physical memory (psutil when installed, else ``sysconf``); None if unknown."""
    try:
        psutil = importlib.import_module("psutil")  # optional: no stubs needed
        return int(psutil.virtual_memory().total)
    except ImportError:
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def memory_limit() -> tuple[float, str]:
    """The memory limit in bytes, and how it reads in a message."""
    machine = machine_memory_bytes()
    if machine is not None and machine * MACHINE_MEMORY_FRACTION < MEMORY_LIMIT_BYTES:
        return machine * MACHINE_MEMORY_FRACTION, (
            f"{MACHINE_MEMORY_FRACTION:.0%} of this machine's {format_bytes(machine)} of memory"
        )
    return float(MEMORY_LIMIT_BYTES), f"the limit of {format_bytes(MEMORY_LIMIT_BYTES)}"


def format_bytes(n: float) -> str:
    """``1.5 GiB``, ``300 MiB``, ``12,000 TiB``: binary units, about three significant digits."""
    for unit, size in (("TiB", 1024.0**4), ("GiB", 1024.0**3), ("MiB", 1024.0**2)):
        if n >= size:
            value = n / size
            return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"
    return f"{max(n, 0.0) / 1024:.3g} KiB"


def format_duration(seconds: float) -> str:
    """``40 s``, ``3 min``, ``1.7 h``, ``12 days``, ``2,000 years``."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.2g} h"
    if seconds < 2 * 365 * 86400:
        return f"{round(seconds / 86400)} days"
    return f"{seconds / (365 * 86400):,.0f} years"


def open_ended_jobs(window_end: int) -> int:
    """Jobs an open-ended run draws before its window (jobs up to ``window_end``) has finished."""
    return int(OPEN_ENDED_FACTOR * window_end)


def _parts(policy: str) -> tuple[str, str]:
    order, _, mechanism = policy.partition("+")
    return order, mechanism


def simulation_bytes(servers: int, jobs: int) -> float:
    """Memory of one live simulation: its servers and jobs."""
    return SERVER_BYTES * servers + LIVE_JOB_BYTES * jobs


def simulation_seconds(policy: str, servers: int, jobs: int, placement: str = "first_fit") -> float:
    """Time of one simulation of ``jobs`` jobs under ``policy`` (``order+mechanism``) on ``servers`` servers.

    ``RUN_S + jobs × (job_s + rounds_per_job × servers × SERVER_ROUND_S × placement factor)``.
    """
    order, mechanism = _parts(policy)
    fifo = order == "fifo"
    job_s = OPT_JOB_S if mechanism.startswith("opt") else FIFO_JOB_S if fifo else OTHER_JOB_S
    rounds = FIFO_ROUNDS_PER_JOB if fifo else OTHER_ROUNDS_PER_JOB
    per_round = servers * SERVER_ROUND_S * (CONSOLIDATE_FACTOR if placement == "consolidate" else 1.0)
    return RUN_S + jobs * (job_s + rounds * per_round)


def compare_estimate(policies: tuple[str, ...], cases: int, jobs: int, servers: int, placement: str = "first_fit",
                     sensitivities: int = 1) -> Estimate:
    """``compare``: every policy (and sensitivity) on each of ``cases`` workloads of ``jobs`` jobs, one at a time.

    Memory: ``BASE + one live simulation + runs × (RUN_BYTES + jobs × KEPT_JOB_BYTES)`` (every run's
    jobs are kept for ``jobs.csv``); time: the simulations one after another, then the files.
    """
    runs = cases * len(policies) * sensitivities
    memory = BASE_BYTES + simulation_bytes(servers, jobs) + runs * (RUN_BYTES + jobs * KEPT_JOB_BYTES)
    seconds = cases * sensitivities * sum(simulation_seconds(p, servers, jobs, placement) for p in policies)
    seconds += WRITE_S + runs * jobs * WRITE_JOB_S
    return Estimate(f"{_count(runs, 'run')} of {jobs:,} jobs on {servers:,} servers", memory, seconds)


def sweep_estimate(policies: tuple[str, ...], cells: int, jobs: int, measured: int, servers: int,
                   workers: int = 1, ray: str = "none") -> Estimate:
    """``sweep``: ``cells`` cells (spread evenly over ``policies``) of ``jobs`` jobs each, ``measured`` of them measured.

    ``workers`` cells run at a time; ``ray`` is ``"none"`` (in this process), ``"local"`` (a Ray
    started here: its workers' memory is this machine's) or ``"remote"`` (a Ray cluster's). Memory:
    ``BASE + cells × (CELL_BYTES + measured × CELL_JCT_BYTES)`` in this process, plus one live
    simulation in-process, or ``RAY_SYSTEM_BYTES + workers × (RAY_WORKER_BYTES + one live simulation)``
    on a local Ray; time: the cells divided among the workers.
    """
    parallel = max(1, min(cells, workers))
    memory = float(BASE_BYTES + cells * (CELL_BYTES + measured * CELL_JCT_BYTES))
    live = simulation_bytes(servers, jobs)
    if ray == "none":
        memory += live
    elif ray == "local":
        memory += RAY_SYSTEM_BYTES + parallel * (RAY_WORKER_BYTES + live)
    per_cell = sum(simulation_seconds(p, servers, jobs) for p in policies) / len(policies)
    seconds = math.ceil(cells / parallel) * per_cell + WRITE_S
    where = "" if ray == "none" else f" on {_count(parallel, 'Ray worker')}"
    return Estimate(f"{_count(cells, 'cell')} of {jobs:,} jobs on {servers:,} servers{where}", memory, seconds)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def check_size(estimate: Estimate, allow_large: bool) -> None:
    """Refuse (:class:`SizeError`) a run past the memory or time limit unless ``allow_large``."""
    if allow_large:
        return
    limit, limit_text = memory_limit()
    over_memory, over_time = estimate.memory_bytes > limit, estimate.seconds > TIME_LIMIT_S
    if over_memory or over_time:
        memory = f"about {format_bytes(estimate.memory_bytes)} of memory" + (f" (over {limit_text})" if over_memory else "")
        time = f"about {format_duration(estimate.seconds)}" + (
            f" (over the limit of {format_duration(TIME_LIMIT_S)})" if over_time else "")
        raise SizeError(f"{estimate.what} would need {memory} and {time}; pass {ALLOW_FLAG} to run it anyway")


def quiet_notice(command: str, estimate: Estimate, quiet: bool) -> None:
    """Under ``--quiet``, one line on stderr when the run would otherwise be silent for over a minute."""
    if quiet and estimate.seconds > QUIET_NOTICE_S:
        print(f"synergy-gym {command}: about {format_duration(estimate.seconds)} for {estimate.what} "
              "(estimated; --quiet shows no progress)", file=sys.stderr, flush=True)
