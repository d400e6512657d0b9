"""The environment's keyword arguments, validated (:class:`EnvConfig`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from synergy_gym.env.levels import LEVEL_KINDS
from synergy_gym.env.masks import INVALID_ACTION_MODES
from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.sim.cluster import ClusterSpec, load_cluster
from synergy_gym.sim.config import SimulationConfig, Timing, kernels_removed
from synergy_gym.sim.ledger import Placement
from synergy_gym.sim.profiling import ProfilerConfig
from synergy_gym.sim.validation import check_positive
from synergy_gym.sim.workload import MAX_JOBS

RENDER_MODES: tuple[str, ...] = ("ansi", "rgb_array")
#: Keyword arguments that were removed, and why.
REMOVED: dict[str, str] = {"kernels": kernels_removed()}


@dataclass(frozen=True)
class EnvConfig:
    """The environment's keyword arguments (see :class:`~synergy_gym.env.SynergyEnv`), validated."""

    #: Preset name (``default``, ``small``, ``large``), TOML path, mapping or :class:`ClusterSpec`.
    cluster: Any = "default"
    #: Poisson arrival rate of the generated workload.
    jobs_per_hour: float = 9.0
    #: Jobs per generated episode (also the number of trace jobs kept), at most ``MAX_JOBS``.
    num_jobs: int = 1000
    #: GPU counts from the Philly trace's mix instead of one GPU per job.
    multigpu: bool = False
    #: Vision/language/speech weights of the generated workload.
    class_split: tuple = (20.0, 70.0, 10.0)
    #: Fixed jobs instead of the generator: a replay CSV path, a :class:`Workload`, or a
    #: workload source (an object with ``seeded`` and ``workload(seed)``, see :mod:`.source`).
    workload: Any = None
    #: A real trace's path (Philly CSV/JSON, Alibaba, Helios): its first ``num_jobs`` jobs.
    trace: Any = None
    #: Truncate the episode after this many rounds.
    max_rounds: int = 10_000
    #: Rewards are −(job-seconds in the system) / ``reward_scale`` (3600: job-hours).
    reward_scale: float = 3600.0
    #: ``False`` (default): admitted jobs keep their GPUs until they finish; ``True``: at every
    #: event all jobs return to the waiting set and the agent refills the cluster.
    preemptive: bool = False
    #: ``False``: only the first slot (earliest arrival that fits) is offered – allocation only.
    agent_orders: bool = True
    #: ``"fallback"``: a masked action falls back to a valid one (counted in
    #: ``info["invalid_action"]``); ``"raise"``: it raises ``ValueError``.
    invalid_action: str = "fallback"
    #: Allocation levels per job: ``"default"`` (fair, demand and three cheaper points) or
    #: ``"grid"`` (all 45 grid points); see :mod:`synergy_gym.env.levels`.
    levels: str = "default"
    #: Slots: waiting jobs (that fit now, by arrival) offered to the agent.
    max_queue: int = 32
    #: Round (lease) length in seconds.
    round_s: float = 300.0
    #: ``first_fit`` (the paper's) or ``consolidate``.
    placement: Placement = "first_fit"
    #: ``round`` (the paper's timing) or ``exact``.
    timing: Timing = "round"
    #: Assert every server's capacity every round.
    debug: bool = False
    #: ``true`` (measured sensitivity) or ``profiled`` (each job's estimate from optimistic profiling).
    sensitivity: str = "true"
    #: Relative measurement noise of optimistic profiling.
    profile_noise: float = 0.0
    #: ``None``, ``"ansi"`` or ``"rgb_array"``.
    render_mode: str | None = None

    def simulation_config(self, profile_seed: int = 0) -> SimulationConfig:
        """The simulator settings these kwargs ask for (the env keeps no round log)."""
        return SimulationConfig(
            round_s=self.round_s, placement=self.placement, timing=self.timing, debug=self.debug,
            record_rounds=False, sensitivity=self.sensitivity,
            profiler=ProfilerConfig(noise=self.profile_noise, seed=profile_seed),
        )

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> EnvConfig:
        valid = [f.name for f in fields(cls)]
        for key in kwargs:
            if key in REMOVED:
                raise ConfigError(f"env kwarg {key!r} was removed: {REMOVED[key]}")
            if key not in valid:
                raise ConfigError(f"unknown env kwarg {key!r}; valid: {', '.join(valid)}")
        cfg = cls(**dict(kwargs))
        cfg.validate()
        return cfg

    def validate(self) -> None:
        def positive(name: str, integer: bool = False, allow_none: bool = False) -> None:
            check_positive(f"env kwarg {name}", getattr(self, name), integer=integer, allow_none=allow_none)

        for name in ("multigpu", "preemptive", "agent_orders", "debug"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ConfigError(f"env kwarg {name} must be true or false, got {getattr(self, name)!r}")
        if self.invalid_action not in INVALID_ACTION_MODES:
            raise UnknownNameError("invalid_action", str(self.invalid_action), INVALID_ACTION_MODES)
        if self.levels not in LEVEL_KINDS:
            raise UnknownNameError("levels", str(self.levels), LEVEL_KINDS)
        positive("jobs_per_hour")
        positive("num_jobs", integer=True)
        if self.num_jobs > MAX_JOBS:
            raise ConfigError(f"env kwarg num_jobs {self.num_jobs!r} exceeds the maximum of {MAX_JOBS:,}")
        positive("max_rounds", integer=True)
        positive("reward_scale")
        positive("max_queue", integer=True)
        positive("round_s")
        self.simulation_config()  # validates placement, timing, sensitivity and profile noise
        if self.render_mode not in (None, *RENDER_MODES):
            raise UnknownNameError("render_mode", str(self.render_mode), RENDER_MODES)
        if self.workload is not None and self.trace is not None:
            raise ConfigError("env kwargs workload and trace cannot be combined")


def as_cluster(value: Any) -> ClusterSpec:
    """The cluster an env kwarg names."""
    if isinstance(value, ClusterSpec):
        return value
    if isinstance(value, Mapping):
        return ClusterSpec.from_mapping(value, source="env kwarg cluster")
    if isinstance(value, (str, Path)):
        return load_cluster(value)
    raise ConfigError(f"env kwarg cluster must be a preset name, a TOML path, a mapping or a ClusterSpec, got {value!r}")
