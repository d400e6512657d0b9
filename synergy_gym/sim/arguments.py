"""One-line errors for realistic slips in :class:`~synergy_gym.sim.simulator.Simulator`'s arguments.

A preset's name for the cluster, a workload's spec not yet built, a policy's name, a dict of settings:
each is refused at construction with the call that makes the right object, before anything runs; so is a
job that could never finish (:func:`check_job_progress`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from synergy_gym.errors import ConfigError, WorkloadError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.job_table import JobTable
from synergy_gym.sim.policy import SchedulingPolicy
from synergy_gym.sim.workload import Workload


def check_simulator_arguments(cluster: object, workload: object, policy: object, config: object,
                              more_jobs: object = None, observer: object = None) -> None:
    """A one-line error for a realistic slip in :class:`Simulator`'s arguments (a name, a spec, a dict, a list where an
    iterator of workloads goes, a value where a function goes)."""
    if not isinstance(cluster, ClusterSpec):
        hint = f"; use cluster_preset({cluster!r}) or load_cluster({cluster!r})" if isinstance(cluster, str) else ""
        raise ConfigError(f"Simulator: cluster must be a ClusterSpec, got {_shown(cluster)}{hint}")
    if not isinstance(workload, Workload):
        hint = "; call its .build() (or .stream() for an open-ended run)" if hasattr(workload, "build") else ""
        raise WorkloadError(f"Simulator: workload must be a Workload, got {_shown(workload)}{hint}")
    if not isinstance(policy, SchedulingPolicy):
        hint = f"; use synergy_gym.baselines.make_policy({policy!r})" if isinstance(policy, str) else ""
        raise ConfigError(f"Simulator: policy must be a SchedulingPolicy, got {_shown(policy)}{hint}")
    if config is not None and not isinstance(config, SimulationConfig):
        hint = "; use SimulationConfig(**settings)" if isinstance(config, dict) else ""
        raise ConfigError(f"Simulator: config must be a SimulationConfig, got {_shown(config)}{hint}")
    if more_jobs is not None and not isinstance(more_jobs, Iterator):
        hint = "; pass iter(...) of it" if isinstance(more_jobs, Iterable) and not isinstance(more_jobs, str) else ""
        raise WorkloadError(f"Simulator: more_jobs must be an iterator of Workloads (SyntheticWorkload.stream()), "
                            f"got {_shown(more_jobs)}{hint}")
    check_function("Simulator: observer", observer, "(simulator, job indices, GPUs)")


def check_function(name: str, value: object, arguments: str) -> None:
    """``value``: None or a function taking ``arguments``; else a one-line error naming ``name`` and the value."""
    if value is not None and not callable(value):
        raise ConfigError(f"{name} must be None or a function {arguments}, got {_shown(value)}")


def _shown(value: object) -> str:
    """``'small'`` for a string (and ``None``), else the type: ``a SyntheticWorkload``."""
    name = type(value).__name__
    return repr(value) if value is None or isinstance(value, str) else f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def check_job_progress(jobs: JobTable, config: SimulationConfig, first: int) -> None:
    """Reject the jobs from index ``first`` on that could never finish: throughput 0, or (round timing) no whole
    iteration in a round, at the slowest allocation a policy may grant (fair share, fallback or target) – as
    the policies believe it and as the jobs progress (with profiled sensitivity the two differ)."""
    sl = slice(first, jobs.n)
    slowest = np.minimum(np.minimum(jobs.tput_fair[sl], jobs.tput_fallback[sl]), jobs.tput_target[sl])
    if jobs.belief is not None:  # progress is at the true throughput of what is granted
        idx = np.arange(first, jobs.n)
        for cpu, mem in ((np.full(idx.size, jobs.fair_cpu), np.full(idx.size, jobs.fair_mem)),
                         (jobs.fallback_cpu[sl], jobs.fallback_mem[sl]), (jobs.target_cpu[sl], jobs.target_mem[sl])):
            slowest = np.minimum(slowest, jobs.true_throughput_many(idx, cpu, mem))
    if not np.all(slowest > 0):
        i = first + int(np.flatnonzero(~(slowest > 0))[0])
        raise WorkloadError(
            f"job {jobs.job_id[i]}: model {jobs.zoo[int(jobs.model[i])].name!r} has throughput 0 at its slowest "
            "allocation (fair share, fallback or target), so it could never finish; check the model's tput matrix"
        )
    if config.timing != "round":
        return
    per_round = np.floor(config.round_s / (jobs.iter_time_s[sl] / slowest))
    if np.any(per_round < 1):
        i = first + int(np.flatnonzero(per_round < 1)[0])
        raise WorkloadError(
            f"job {jobs.job_id[i]}: iter_time_s={jobs.iter_time_s[i]:g} is too long to finish an "
            f"iteration in a {config.round_s:g} s round at its slowest allocation; use timing='exact' "
            f"or a longer round_s (now {config.round_s:g})"
        )
