"""Where an episode's jobs come from: a workload source, passed to the environment as an object.

A source has ``seeded`` (whether its workload depends on the seed; the
environment draws a seed from its ``np_random`` per reset only then) and
``workload(seed)``. The environment builds one from its kwargs:

* by default :class:`GeneratedWorkloads`, the paper's generator
  (:class:`~synergy_gym.generator.SyntheticWorkload`) with a new seed per reset;
* ``workload=<Workload>``: :class:`FixedWorkload`, the same jobs every episode;
* ``workload=<path>`` (a replay CSV) or ``trace=<path>`` (a real trace): read by
  the reader that an installed package registers under the entry-point group
  ``synergy_gym.workload_readers`` (``replay`` and ``trace``, from ``traces``),
  so the core never imports the packages built on it;
* ``workload=<any object with seeded and workload(seed)>``: used as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from synergy_gym.cluster import ClusterSpec
from synergy_gym.errors import ConfigError
from synergy_gym.generator import SyntheticWorkload
from synergy_gym.profiles import ModelZoo
from synergy_gym.workload import Workload

READERS_GROUP = "synergy_gym.workload_readers"


@runtime_checkable
class WorkloadSource(Protocol):
    """Produces an episode's jobs."""

    seeded: bool

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
    if isinstance(given, WorkloadSource) and not isinstance(given, (str, Path)):
        return given
    if isinstance(given, Workload):
        jobs, where = replace(given, run_until="all"), None
    elif given is not None:
        if not isinstance(given, (str, Path)):
            raise ConfigError(
                f"env kwarg workload must be a replay CSV path, a Workload or a workload source, got {given!r}"
            )
        jobs, where = _reader("replay")(Path(given)), str(given)
    else:
        where = str(cfg.trace)
        jobs = _reader("trace")(Path(cfg.trace), class_split=tuple(cfg.class_split), max_jobs=int(cfg.num_jobs))
    jobs.check_fits(cluster, where)
    return FixedWorkload(jobs)
