"""The environment's keyword arguments, validated (:class:`EnvConfig`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from synergy_gym.env.calls import EnvCallError, shown
from synergy_gym.env.levels import LEVEL_KINDS
from synergy_gym.env.masks import INVALID_ACTION_MODES
from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.sim.cluster import ClusterSpec, load_cluster, preset_names
from synergy_gym.sim.config import SimulationConfig, Timing, kernels_removed
from synergy_gym.sim.ledger import Placement
from synergy_gym.sim.profiling import ProfilerConfig
from synergy_gym.sim.validation import check_positive
from synergy_gym.sim.workload import MAX_JOBS, check_jobs_per_hour

RENDER_MODES: tuple[str, ...] = ("ansi", "rgb_array")
#: The most slots (``max_queue``) an environment offers.
MAX_QUEUE = 4096
#: The most rounds (``max_rounds``) an episode may last: round counts stay exact in float64 (below
#: 2**53) and far inside int64, where the simulator's kernels count them.
MAX_ROUNDS = 10**15
#: ``redecide`` values: decide at an event only what changes, or every running job again.
REDECIDE_MODES: tuple[str, ...] = ("changes", "every_event")
#: The running rows (``max_running``) shown by default; another value needs ``redecide="changes"`` with preemption.
MAX_RUNNING_DEFAULT = 32
#: The smallest ``reward_scale`` (seconds a unit of reward): below it a long episode's rewards leave float64's range.
MIN_REWARD_SCALE = 1e-6
#: Keyword arguments that were removed, and why.
REMOVED: dict[str, str] = {"kernels": kernels_removed()}


@dataclass(frozen=True)
class EnvConfig:
    """The environment's keyword arguments (see :class:`~synergy_gym.env.SynergyEnv`), validated."""

    #: Preset name (``default``, ``small``, ``large``), TOML path, mapping or :class:`ClusterSpec`.
    cluster: Any = "default"
    #: Poisson arrival rate of the generated workload, at least ``synergy_gym.sim.workload.MIN_JOBS_PER_HOUR``.
    jobs_per_hour: float = 9.0
    #: Jobs per generated episode (also the number of trace jobs kept), at most ``MAX_JOBS``.
    num_jobs: int = 1000
    #: GPU counts from the Philly trace's mix instead of one GPU per job.
    multigpu: bool = False
    #: Vision/language/speech weights of the generated workload (and of a trace's models):
    #: three non-negative numbers with a positive sum, or a string like ``"20/70/10"`` (or
    #: ``"20,70,10"``) read as those three weights, as the command line's ``--split`` is (which also
    #: asks for percentages that sum to 100; the environment takes any weights). Stored as floats.
    class_split: tuple = (20.0, 70.0, 10.0)
    #: Fixed jobs instead of the generator: a replay CSV path, a :class:`Workload`, or a
    #: workload source (an object with ``seeded`` and ``workload(seed)``, see :mod:`.source`).
    workload: Any = None
    #: A real trace's path (Philly CSV/JSON, Alibaba, Helios): its first ``num_jobs`` jobs.
    trace: Any = None
    #: Truncate the episode after this many rounds (at most ``MAX_ROUNDS``).
    max_rounds: int = 10_000
    #: Rewards are −(job-seconds in the system) / ``reward_scale`` (3600: job-hours).
    reward_scale: float = 3600.0
    #: ``False`` (default): admitted jobs keep their GPUs until they finish; ``True``: the agent
    #: may also preempt running jobs, at every event (see ``redecide``).
    preemptive: bool = False
    #: With ``preemptive=True``: ``"changes"`` (default) – running jobs keep their GPUs and level
    #: at an event unless the agent preempts them (a preempted job waits again, and may be admitted
    #: again at another level in the same event); ``"every_event"`` – at every event all jobs return
    #: to the waiting set and the agent refills the cluster (every running job decided again).
    redecide: str = "changes"
    #: With ``preemptive=True, redecide="changes"``: how many running jobs are shown and
    #: preemptable (the running rows): the most recently admitted ones, in admission order; at
    #: most :data:`MAX_QUEUE`. With more running jobs than this, the older ones cannot be preempted.
    max_running: int = MAX_RUNNING_DEFAULT
    #: Per slot and level, whether it fits the free CPUs and memory now (``slot_fits``); None: on
    #: with ``preemptive=True, redecide="changes"``, off otherwise (the default mode's observation
    #: space stays as it was).
    fit_features: bool | None = None
    #: ``False``: only the first slot (earliest arrival that fits) is offered – allocation only.
    agent_orders: bool = True
    #: ``"fallback"``: a masked action falls back to a valid one (counted in
    #: ``info["invalid_action"]``); ``"raise"``: it raises ``ValueError``.
    invalid_action: str = "fallback"
    #: Allocation levels per job: ``"default"`` (fair, demand and three cheaper points) or
    #: ``"grid"`` (all 45 grid points); see :mod:`synergy_gym.env.levels`.
    levels: str = "default"
    #: Slots: waiting jobs (that fit now, by arrival) offered to the agent, at most :data:`MAX_QUEUE`.
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
    #: Relative measurement noise of optimistic profiling (non-zero only with ``sensitivity="profiled"``).
    #: Each ``reset`` draws the episode's profiling seed from the environment's ``np_random`` (with
    #: ``options={"workload_seed": s}`` too): ``reset(seed=...)`` fixes it, ``sim.config`` holds it.
    profile_noise: float = 0.0
    #: ``None``, ``"ansi"`` or ``"rgb_array"`` (there is no ``"human"`` window: show the
    #: ``rgb_array`` frames yourself; ``gym.make`` refuses ``"human"`` too).
    render_mode: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "class_split", class_split_of(self.class_split))

    @property
    def on_changes(self) -> bool:
        """Preemptive, deciding only where something changes (``redecide="changes"``)."""
        return bool(self.preemptive) and self.redecide == "changes"

    @property
    def with_fit_features(self) -> bool:
        """Whether the observation has ``slot_fits``."""
        return self.on_changes if self.fit_features is None else bool(self.fit_features)

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
        def positive(name: str, integer: bool = False) -> None:
            value = check_positive(f"env kwarg {name}", getattr(self, name), integer=integer)
            if integer:  # stored as an int (a whole float too), as the spaces and kernels need
                object.__setattr__(self, name, value)

        for name in ("multigpu", "preemptive", "agent_orders", "debug"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ConfigError(f"env kwarg {name} must be true or false, got {shown(getattr(self, name))}")
        if self.fit_features is not None and not isinstance(self.fit_features, (bool, np.bool_)):
            raise ConfigError(f"env kwarg fit_features must be true, false or None, got {shown(self.fit_features)}")
        for name in ("invalid_action", "levels", "placement", "timing", "sensitivity", "redecide"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"env kwarg {name} must be a name (a string), got {shown(getattr(self, name))}")
        if self.invalid_action not in INVALID_ACTION_MODES:
            raise UnknownNameError("invalid_action", self.invalid_action, INVALID_ACTION_MODES)
        if self.redecide not in REDECIDE_MODES:
            raise UnknownNameError("redecide", self.redecide, REDECIDE_MODES)
        if self.levels not in LEVEL_KINDS:
            raise UnknownNameError("levels", self.levels, LEVEL_KINDS)
        positive("jobs_per_hour")
        check_jobs_per_hour(self.jobs_per_hour, "env kwarg jobs_per_hour", ConfigError)
        positive("num_jobs", integer=True)
        if self.num_jobs > MAX_JOBS:
            raise ConfigError(f"env kwarg num_jobs {self.num_jobs!r} exceeds the maximum of {MAX_JOBS:,}")
        positive("max_rounds", integer=True)
        if self.max_rounds > MAX_ROUNDS:
            raise ConfigError(f"env kwarg max_rounds {self.max_rounds!r} exceeds the maximum of {MAX_ROUNDS:,}")
        positive("reward_scale")
        if self.reward_scale < MIN_REWARD_SCALE:
            raise ConfigError(f"env kwarg reward_scale {self.reward_scale!r} is below the minimum of {MIN_REWARD_SCALE:g} "
                              "(seconds a unit of reward; a smaller scale makes the rewards infinite)")
        positive("max_queue", integer=True)
        if self.max_queue > MAX_QUEUE:
            raise ConfigError(f"env kwarg max_queue {self.max_queue!r} exceeds the maximum of {MAX_QUEUE:,}")
        positive("max_running", integer=True)
        if self.max_running > MAX_QUEUE:
            raise ConfigError(f"env kwarg max_running {self.max_running!r} exceeds the maximum of {MAX_QUEUE:,}")
        if self.redecide != "changes" and not self.preemptive:
            raise ConfigError(f"env kwarg redecide={shown(self.redecide)} needs preemptive=True "
                              "(without preemption every job is decided once, when it is admitted)")
        if self.max_running != MAX_RUNNING_DEFAULT and not self.on_changes:
            raise ConfigError(f"env kwarg max_running={shown(self.max_running)} needs preemptive=True with "
                              f"redecide='changes' (the only mode with running rows), got preemptive={self.preemptive!r}, "
                              f"redecide={shown(self.redecide)}")
        positive("round_s")
        noise = self.profile_noise
        if isinstance(noise, (bool, np.bool_)) or not isinstance(noise, (int, float, np.integer, np.floating)) \
                or not 0 <= noise < 1:
            raise ConfigError(f"env kwarg profile_noise must be a number in [0, 1), got {shown(noise)}")
        object.__setattr__(self, "profile_noise", float(noise))  # a NumPy number as the profiler takes it
        self.simulation_config()  # validates placement, timing and sensitivity
        if noise != 0 and self.sensitivity != "profiled":
            raise ConfigError(f"env kwarg profile_noise {shown(noise)} needs sensitivity='profiled', "
                              f"got sensitivity={shown(self.sensitivity)}")
        if self.render_mode is not None and not isinstance(self.render_mode, str):
            raise ConfigError(f"env kwarg render_mode must be None, 'ansi' or 'rgb_array', got {shown(self.render_mode)}")
        if self.render_mode not in (None, *RENDER_MODES):
            raise UnknownNameError("render_mode", self.render_mode, RENDER_MODES)
        if self.workload is not None and self.trace is not None:
            raise ConfigError("env kwargs workload and trace cannot be combined")


def as_cluster(value: Any) -> ClusterSpec:
    """The cluster an env kwarg names."""
    if isinstance(value, ClusterSpec):
        return value
    if isinstance(value, Mapping):
        return ClusterSpec.from_mapping(value, source="env kwarg cluster")
    if isinstance(value, (str, Path)):
        text, path = str(value), Path(value)
        if text not in preset_names():
            if path.is_dir() and text.strip():
                raise ConfigError(f"env kwarg cluster {text!r} is a folder, not a TOML file")
            if not path.is_file():
                raise ConfigError(f"env kwarg cluster {text!r} is neither a preset ({', '.join(preset_names())}) nor a file")
        return load_cluster(value, source="env kwarg cluster")
    raise ConfigError(f"env kwarg cluster must be a preset name, a TOML path, a mapping or a ClusterSpec, got {shown(value)}")


def class_split_of(value: Any) -> tuple[float, float, float]:
    """The ``class_split`` kwarg as three float weights: from three numbers or a string like ``"20/70/10"``."""
    example = "like (20, 70, 10) or '20/70/10'"
    if isinstance(value, str):
        try:
            numbers: list[Any] = [float(part) for part in value.replace(",", "/").split("/")]
        except ValueError:
            raise ConfigError(
                f"env kwarg class_split {shown(value)} must be three numbers (vision/language/speech weights) {example}"
            ) from None
    elif isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (bytes, bytearray)):
        numbers = list(value)
    else:
        raise ConfigError(f"env kwarg class_split must be three numbers (vision, language, speech weights) {example}, "
                          f"got {shown(value)}")
    ok = len(numbers) == 3 and all(
        isinstance(w, (int, float, np.integer, np.floating)) and not isinstance(w, (bool, np.bool_))
        and bool(np.isfinite(w)) and w >= 0 for w in numbers
    )
    if not ok or not np.isfinite(sum(float(w) for w in numbers)) or sum(float(w) for w in numbers) <= 0:
        raise ConfigError(f"env kwarg class_split must be three non-negative numbers with a positive sum "
                          f"(vision, language, speech weights) {example}, got {shown(value)}")
    a, b, c = (float(w) for w in numbers)
    return a, b, c


def same_env_kwarg(name: str, a: Any, b: Any) -> bool:
    """Whether two values of the env kwarg ``name`` say the same: ``cluster`` and ``class_split`` as the
    environment reads them (``"small"`` and its :class:`ClusterSpec`, ``[60, 20, 20]`` and ``(60.0, 20.0, 20.0)``),
    arrays element by element; a value that cannot be read is the same only as itself."""
    if a is b:
        return True
    try:
        if name == "cluster":
            return as_cluster(a) == as_cluster(b)
        if name == "class_split":
            return class_split_of(a) == class_split_of(b)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return bool(np.array_equal(a, b))
        return bool(a == b)
    except (ConfigError, TypeError, ValueError):
        return False


def constructor_kwargs(config: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``SynergyEnv(config, **kwargs)``'s env kwargs: the ``config`` mapping's and the keyword arguments together.

    A key that both set to different values (compared by :func:`same_env_kwarg`) is refused: the keyword
    argument would win, silently. Equal values are fine.
    """
    if config is not None and not isinstance(config, Mapping):
        raise EnvCallError(f"SynergyEnv(config): config must be None or a mapping of env kwargs, got {shown(config)}")
    merged = dict(config or {})
    for key, value in kwargs.items():
        if key in merged and not same_env_kwarg(key, merged[key], value):
            raise EnvCallError(
                f"SynergyEnv(config, **kwargs): config sets {key}={shown(merged[key])}, but a keyword argument sets "
                f"{key}={shown(value)}; set each key in one of them"
            )
        merged[key] = value
    return merged
