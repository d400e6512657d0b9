"""One harness that runs many policies on identical workloads.

A :class:`WorkloadCase` makes a fresh copy of a workload (and its stream of
further jobs) for every policy, so each policy sees exactly the same jobs.
``compare`` and agent evaluation both run through :func:`run_cases`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from synergy_gym.env.calls import shown
from synergy_gym.errors import ConfigError
from synergy_gym.sim.cluster import ClusterSpec
from synergy_gym.sim.config import SimulationConfig
from synergy_gym.sim.metrics import SimulationResult
from synergy_gym.sim.policy import SchedulingPolicy
from synergy_gym.sim.simulator import Simulator
from synergy_gym.sim.workload import JobStream, Workload


@dataclass(frozen=True)
class WorkloadCase:
    """A workload to run every policy on; ``make`` returns a fresh copy each call."""

    label: str
    make: Callable[[], tuple[Workload, JobStream | None]]
    load: float | None = None
    seed: int | None = None


@dataclass(frozen=True)
class CaseResult:
    case: WorkloadCase
    policy: str
    result: SimulationResult
    #: The jobs the run knew about (the workload plus any streamed extension).
    workload: Workload


#: Called as each run starts: (case, policy name) → progress callback or None.
ProgressFactory = Callable[[WorkloadCase, str], Callable[[int, int], None] | None]


def run_cases(
    cases: Iterable[WorkloadCase],
    policies: Mapping[str, SchedulingPolicy],
    cluster: ClusterSpec,
    config: SimulationConfig | None = None,
    progress: ProgressFactory | None = None,
    on_done: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run every policy on every case, in order; returns one result per (case, policy).

    ``cases``: an iterable of :class:`WorkloadCase`; ``policies``: a mapping of names to
    :class:`~synergy_gym.sim.policy.SchedulingPolicy`; ``cluster``: a :class:`~synergy_gym.sim.cluster.ClusterSpec`.
    Anything else is one line naming it (:class:`~synergy_gym.errors.ConfigError`), before any run.
    """
    case_list = check_cases(cases)
    check_policies(policies)
    if not isinstance(cluster, ClusterSpec):
        raise ConfigError(f"run_cases(): cluster must be a ClusterSpec, got {shown(cluster)}")
    out: list[CaseResult] = []
    for case in case_list:
        for name, policy in policies.items():
            workload, more = case.make()
            sim = Simulator(cluster, workload, policy, config, more_jobs=more)
            callback = progress(case, name) if progress is not None else None
            result = sim.run(progress=callback)
            done = CaseResult(case=case, policy=name, result=result, workload=sim.jobs.workload)
            out.append(done)
            if on_done is not None:
                on_done(done)
    return out


def check_cases(cases: Any) -> list[WorkloadCase]:
    """``run_cases``' ``cases`` as a list: an iterable of :class:`WorkloadCase` (one line naming anything else)."""
    if isinstance(cases, WorkloadCase):
        raise ConfigError(f"run_cases(): cases must be an iterable of WorkloadCase, got one WorkloadCase "
                          f"({cases.label!r}); give [case]")
    if isinstance(cases, (str, bytes, Mapping)) or not isinstance(cases, Iterable):
        raise ConfigError(f"run_cases(): cases must be an iterable of WorkloadCase, got {shown(cases)}")
    given = list(cases)
    for i, case in enumerate(given):
        if not isinstance(case, WorkloadCase):
            raise ConfigError(f"run_cases(): cases[{i}] must be a WorkloadCase, got {shown(case)}")
    return given


def check_policies(policies: Any) -> None:
    """``run_cases``' ``policies``: a mapping of names to :class:`~synergy_gym.sim.policy.SchedulingPolicy`."""
    if not isinstance(policies, Mapping):
        raise ConfigError(f"run_cases(): policies must be a mapping of names to SchedulingPolicy, got {shown(policies)}")
    for name, policy in policies.items():
        if isinstance(policy, SchedulingPolicy):
            continue
        hint = (f"; build a named policy with synergy_gym.baselines.make_policy({policy!r})"
                if isinstance(policy, str) else "")
        raise ConfigError(f"run_cases(): policies[{name!r}] must be a SchedulingPolicy (an ordering and an allocation "
                          f"mechanism), got {shown(policy)}{hint}")

