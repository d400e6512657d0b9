"""Where an episode's jobs come from: a workload source, passed to the environment as an object.

A source has ``seeded`` (whether its workload depends on the seed; the
environment draws a seed from its ``np_random`` per reset only then) and
``workload(seed)``. The environment builds one from its kwargs:

* by default :class:`GeneratedWorkloads`, the paper's generator
  (:class:`~synergy_gym.sim.generator.SyntheticWorkload`) with a new seed per reset;
* ``workload=<Workload>``: :class:`FixedWorkload`, the same jobs every episode;
* ``workload=<path>`` (a replay CSV) or ``trace=<path>`` (a real trace): read by
  the reader that an installed package registers under the entry-point group
  ``synergy_gym.workload_readers`` (``replay`` and ``trace``, from ``traces``),
  so the core never imports the packages built on it;
* ``workload=<any object with seeded and workload(seed)>``: used as it is, except that an episode
  runs every job of its workload to the end (a workload whose ``run_until`` is ``"window"``, as
  ``read_workload_csv`` gives, is run with ``"all"``: ``terminated`` means every job finished).

``reset(options={"workload_seed": s})`` runs the episode on the source's workload
for seed ``s`` (without drawing from ``np_random``), and
:meth:`SynergyEnv.workload_for_seed` returns that workload, so that environment
runs, simulator runs and paired comparisons use the same jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from synergy_gym.env.calls import check_reset_options
from synergy_gym.errors import ConfigError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.generator import SyntheticWorkload
from synergy_gym.sim.philly_gpu_mix import gpu_mix
from synergy_gym.sim.profiles import TASKS, ModelZoo
from synergy_gym.sim.workload import Workload

READERS_GROUP = "synergy_gym.workload_readers"


@runtime_checkable
class WorkloadSource(Protocol):
    """Produces an episode's jobs."""

    @property
    def seeded(self) -> bool:
        """Whether the jobs depend on the seed (a generator) or not (fixed jobs)."""
        ...

    def workload(self, seed: int | None) -> Workload: ...


@dataclass(frozen=True)
class GeneratedWorkloads:
    """The paper's generator: a new workload for every seed (``spec.seed`` is replaced)."""

    spec: SyntheticWorkload
    zoo: ModelZoo
    seeded: bool = True

    def workload(self, seed: int | None) -> Workload:
        return replace(self.spec, seed=int(seed or 0)).build(self.zoo)


@dataclass(frozen=True)
class FixedWorkload:
    """The same jobs every episode, run until all have finished."""

    jobs: Workload
    seeded: bool = False

    def workload(self, seed: int | None = None) -> Workload:
        return self.jobs


def episode_workload(
    source: WorkloadSource, np_random: np.random.Generator, options: dict | None, zoo: ModelZoo
) -> Workload:
    """The workload of a new episode: for ``options["workload_seed"]`` if given, else for a seed from ``np_random``.

    ``options`` are checked (:func:`~synergy_gym.env.calls.check_reset_options`). A source that
    is not seeded is not asked for a seed (and ``np_random`` is not drawn from).
    """
    options = check_reset_options(options)
    if "workload_seed" in options:
        return source_jobs(source, options["workload_seed"], zoo)
    return source_jobs(source, int(np_random.integers(0, 2**31 - 1)) if source.seeded else None, zoo)


def source_jobs(source: WorkloadSource, seed: int | None, zoo: ModelZoo) -> Workload:
    """``source.workload(seed)`` as an episode runs it: every job to the end (``run_until="all"``), over ``zoo``."""
    jobs = source.workload(seed)
    if not isinstance(jobs, Workload):
        raise ConfigError(f"workload source {type(source).__name__}: workload({seed!r}) must return a Workload, "
                          f"got {type(jobs).__name__}")
    check_zoo(jobs, zoo, f"workload source {type(source).__name__}: workload({seed!r})")
    return jobs if jobs.run_until == "all" else replace(jobs, run_until="all")


def check_zoo(jobs: Workload, zoo: ModelZoo, where: str) -> None:
    """Refuse jobs over another model zoo than ``zoo`` (the environment's): their model indices would name other
    models in the observation, the levels and ``render`` than the simulator runs."""
    other = jobs.zoo
    if other is zoo or (
        other.names == zoo.names
        and np.array_equal(other.tput_tensor(), zoo.tput_tensor())
        and np.array_equal(other.cpu_grid, zoo.cpu_grid)
        and np.array_equal(other.mem_grid, zoo.mem_grid)
        and all(a.task == b.task and a.iter_time_s == b.iter_time_s for a, b in zip(other.models, zoo.models))
    ):
        return
    raise ConfigError(
        f"{where}: the jobs use another model zoo ({', '.join(other.names)}) than the environment, which observes "
        f"and sizes jobs by the default zoo ({', '.join(zoo.names)}); build the workload on ModelZoo.default()"
    )


def job_shapes(source: WorkloadSource, zoo: ModelZoo) -> list[tuple[int, int, str]]:
    """``(model, GPUs, what the job is)`` of the jobs ``source`` can give: a fixed workload's own, every model at
    each GPU count the generator draws; none for another source (its jobs are known at each reset only)."""
    if isinstance(source, FixedWorkload):
        jobs = source.jobs
        first: dict[tuple[int, int], int] = {}
        for i, m, g in zip(jobs.job_id.tolist(), jobs.model.tolist(), jobs.gpus.tolist()):
            first.setdefault((m, g), i)  # one job of each (model, GPUs) is enough to name
        return [(m, g, f"job {i} ({zoo[m].name}, {g} GPUs)") for (m, g), i in first.items()]
    if isinstance(source, GeneratedWorkloads):
        spec = source.spec
        counts = gpu_mix(spec.max_gpus)[0].tolist() if spec.multigpu else [1]
        drawn = "; the generator draws such jobs with multigpu=True" if spec.multigpu else ""
        tasks = {task for task, weight in zip(TASKS, spec.class_split) if weight > 0}  # the models it can draw
        models = [m for m in range(len(zoo)) if zoo[m].task in tasks]
        return [(m, g, f"a job of {g} GPU{'s' * (g > 1)} ({zoo[m].name}{drawn})") for m in models for g in counts]
    return []


def _reader(name: str) -> Callable[..., Workload]:
    for ep in entry_points(group=READERS_GROUP):
        if ep.name == name:
            return ep.load()
    raise ConfigError(
        f"no {name!r} workload reader is installed (entry point group {READERS_GROUP}); "
        "install synergy-gym with its traces package, or pass a Workload or a workload source"
    )


def source_from_config(cfg: Any, cluster: ClusterSpec, zoo: ModelZoo) -> WorkloadSource:
    """The workload source that an :class:`~synergy_gym.env.config.EnvConfig` asks for; fixed jobs are checked to fit."""
    given = cfg.workload
    if given is None and cfg.trace is None:
        spec = SyntheticWorkload(
            jobs_per_hour=float(cfg.jobs_per_hour), num_jobs=int(cfg.num_jobs), multigpu=bool(cfg.multigpu),
            class_split=tuple(cfg.class_split), max_gpus=cluster.total_gpus,
        )  # validates the generator's arguments now, not at the first reset
        return GeneratedWorkloads(spec, zoo)
    if isinstance(given, WorkloadSource):
        return given
    if isinstance(given, Workload):
        jobs, where = replace(given, run_until="all"), None
    elif given is not None:
        if not isinstance(given, (str, Path)) or not str(given).strip():  # '' would read as the folder '.'
            raise ConfigError(
                f"env kwarg workload must be a replay CSV path, a Workload or a workload source, got {given!r}"
            )
        jobs, where = _reader("replay")(Path(given)), str(given)
    else:
        if not isinstance(cfg.trace, (str, Path)) or not str(cfg.trace).strip():
            raise ConfigError(f"env kwarg trace must be the path of a trace file or folder, got {cfg.trace!r}")
        where = str(cfg.trace)
        jobs = _reader("trace")(Path(cfg.trace), class_split=tuple(cfg.class_split), max_jobs=int(cfg.num_jobs))
    check_zoo(jobs, zoo, f"env kwarg {'workload' if given is not None else 'trace'}")
    jobs.check_fits(cluster, where)
    return FixedWorkload(jobs)
