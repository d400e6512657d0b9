"""One harness that runs many policies on identical workloads.

A :class:`WorkloadCase` makes a fresh copy of a workload (and its stream of
further jobs) for every policy, so each policy sees exactly the same jobs.
``compare`` and agent evaluation both run through :func:`run_cases`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

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
    """Run every policy on every case, in order; returns one result per (case, policy)."""
    out: list[CaseResult] = []
    for case in cases:
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
