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
    """A workload to run every policy on; ``make()`` returns a fresh copy each call.

    ``make`` takes no argument and returns ``(workload, more_jobs)``: a :class:`Workload`
    and an iterator of further jobs or ``None`` (as :meth:`SyntheticWorkload.stream
    <synergy_gym.sim.generator.SyntheticWorkload.stream>` does; a fixed workload ``w`` is
    ``lambda: (w, None)``).
    """

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
    Anything else – an empty ``cases`` or ``policies``, a case whose ``make`` is not callable,
    a ``progress`` or ``on_done`` that is neither None nor callable – is one line naming it
    (:class:`~synergy_gym.errors.ConfigError`), before any run. What ``make()`` returns is
    checked as it is called: anything but ``(workload, more_jobs)`` is one line naming the case.
    """
    case_list = check_cases(cases)
    check_policies(policies)
    if not isinstance(cluster, ClusterSpec):
        raise ConfigError(f"run_cases(): cluster must be a ClusterSpec, got {shown(cluster)}")
    if not case_list:
        raise ConfigError("run_cases(): cases is empty; give at least one WorkloadCase")
    if not policies:
        raise ConfigError("run_cases(): policies is empty; give at least one name: SchedulingPolicy")
    for name, hook in (("progress", progress), ("on_done", on_done)):
        if hook is not None and not callable(hook):
            raise ConfigError(f"run_cases(): {name} must be None or a function, got {shown(hook)}")
    out: list[CaseResult] = []
    for case in case_list:
        for name, policy in policies.items():
            workload, more = _made(case)
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
        if not callable(case.make):
            hint = "; give its stream method (spec.stream), not the spec" if hasattr(case.make, "stream") else ""
            raise ConfigError(f"run_cases(): case {case.label!r}: make must be a function returning "
                              f"(workload, more_jobs), got {_kind(case.make)}{hint}")
    return given


def _made(case: WorkloadCase) -> tuple[Workload, JobStream | None]:
    """``case.make()``, if it is ``(workload, more_jobs or None)``; else one line naming the case."""
    made = case.make()
    if (isinstance(made, (tuple, list)) and len(made) == 2 and isinstance(made[0], Workload)
            and (made[1] is None or hasattr(made[1], "__next__"))):
        return made[0], made[1]
    hint = ("; return (workload, None) for a fixed workload (SyntheticWorkload.stream, not .build, returns both)"
            if isinstance(made, Workload) else "")
    raise ConfigError(f"run_cases(): case {case.label!r}: make() must return (workload, more_jobs or None), "
                      f"got {_kind(made)}{hint}")


def _kind(value: Any) -> str:
    """What a value is, for a message: ``a Workload``, ``a tuple of (Workload, list)``, ``'text'``."""
    if value is None or isinstance(value, (str, int, float)):
        return shown(value)
    if isinstance(value, tuple):
        return f"a tuple of ({', '.join(type(v).__name__ for v in value[:4])}{', ...' if len(value) > 4 else ''})"
    return f"a {type(value).__name__}"


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

