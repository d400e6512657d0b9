"""The cluster: homogeneous servers with GPUs, CPU cores and DRAM.

A :class:`ClusterSpec` is immutable and validated on construction. It can be
built from keyword arguments, from a named preset (:func:`cluster_preset`) or
from a TOML file (:func:`load_cluster`)::

    # cluster.toml
    [cluster]
    num_servers = 16
    gpus_per_server = 8
    cpus_per_server = 24
    mem_gb_per_server = 500
    storage_mb_s_per_server = 500   # optional; only optimistic profiling uses it

Fields left out take these defaults, but a file must set at least one: an
empty file (or ``[cluster]`` table) is refused, and so is a key outside
``[cluster]`` when the file has one. A file that is not UTF-8 text or not
valid TOML, and every bad value (a string, a bool, NaN, ±inf, ≤ 0, a
fractional count), is a one-line :class:`ConfigError` that starts with the
file's path. Loading costs nothing per server: a file of 10^8 servers (the
most, :data:`MAX_SERVERS`; and 10^9 GPUs in all, :data:`MAX_GPUS`) loads as
fast as one of 16.

The GPU-proportional ("fair") share of a GPU is one server's CPUs and memory
divided by its GPUs: 3 CPUs and 62.5 GB per GPU on the default cluster.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any

from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.sim.validation import check_positive, check_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


#: The most servers, and GPUs in all, a :class:`ClusterSpec` may have. Far above what can be simulated (the
#: scale benchmarks reach 1,024 servers, 8,192 GPUs; ``docs/speed.md``) but enough to describe, so that the
#: command line's size guards can weigh a cluster of 10^8 servers and refuse it; beyond, the simulator's
#: integer arithmetic would overflow.
MAX_SERVERS = 100_000_000
MAX_GPUS = 1_000_000_000
_LIMIT_WHY = "far more than can be simulated: the simulator keeps arrays per GPU; its scale benchmarks reach 8,192"


@dataclass(frozen=True)
class ClusterSpec:
    """A homogeneous cluster; defaults are the paper's 16 × (8 GPUs, 24 CPUs, 500 GB)."""

    num_servers: int = 16
    gpus_per_server: int = 8
    cpus_per_server: float = 24.0
    mem_gb_per_server: float = 500.0
    #: Storage read bandwidth of a server (MB/s), shared by its GPUs; used only
    #: by optimistic profiling's memory model.
    storage_mb_s_per_server: float = 500.0

    def __post_init__(self) -> None:
        for name in ("num_servers", "gpus_per_server"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name), integer=True))
        if self.num_servers > MAX_SERVERS:
            raise ConfigError(f"num_servers must be at most {MAX_SERVERS:,}, got {self.num_servers:,} ({_LIMIT_WHY})")
        if self.num_servers * self.gpus_per_server > MAX_GPUS:
            raise ConfigError(
                f"the cluster may have at most {MAX_GPUS:,} GPUs, got {self.num_servers:,} servers × "
                f"{self.gpus_per_server:,} GPUs = {self.num_servers * self.gpus_per_server:,} ({_LIMIT_WHY})"
            )
        for name in ("cpus_per_server", "mem_gb_per_server", "storage_mb_s_per_server"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name)))

    @cached_property
    def total_gpus(self) -> int:
        return self.num_servers * self.gpus_per_server

    @property
    def total_cpus(self) -> float:
        return self.num_servers * self.cpus_per_server

    @property
    def total_mem_gb(self) -> float:
        return self.num_servers * self.mem_gb_per_server

    @property
    def fair_cpus_per_gpu(self) -> float:
        """CPUs that GPU-proportional allocation gives each GPU."""
        return self.cpus_per_server / self.gpus_per_server

    @property
    def fair_mem_gb_per_gpu(self) -> float:
        """GB of DRAM that GPU-proportional allocation gives each GPU."""
        return self.mem_gb_per_server / self.gpus_per_server

    def describe(self) -> str:
        return (
            f"{self.num_servers} servers × ({self.gpus_per_server} GPUs, "
            f"{self.cpus_per_server:g} CPUs, {self.mem_gb_per_server:g} GB) = "
            f"{self.total_gpus} GPUs"
        )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str = "cluster") -> ClusterSpec:
        """Build from a mapping, rejecting unknown keys by name."""
        if not isinstance(values, Mapping):
            raise ConfigError(f"{source}: a cluster must be a mapping of its fields, got {values!r}")
        known = {f.name for f in fields(cls)}
        for key in values:
            if key not in known:
                raise ConfigError(
                    f"{source}: unknown cluster field {key!r}; valid: {', '.join(sorted(known))}"
                )
        try:
            return cls(**dict(values))
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None


_PRESETS: dict[str, dict[str, int]] = {
    # The paper's simulated cluster (Synergy §6): 128 GPUs.
    "default": {},
    # A quarter of it (32 GPUs) for quick experiments and small environments.
    "small": {"num_servers": 4},
    # Four times it (512 GPUs) for scaling experiments.
    "large": {"num_servers": 64},
}


def preset_names() -> tuple[str, ...]:
    return tuple(_PRESETS)


def cluster_preset(name: str) -> ClusterSpec:
    """A named cluster: ``default`` (16×8 GPUs), ``small`` (4×8) or ``large`` (64×8)."""
    if not isinstance(name, str):
        raise ConfigError(f"cluster preset must be a name ({', '.join(preset_names())}), got {name!r}")
    if name not in _PRESETS:
        raise UnknownNameError("cluster preset", name, preset_names())
    return ClusterSpec(**_PRESETS[name])


def load_cluster(spec: str | Path, source: str = "cluster") -> ClusterSpec:
    """A preset name or the path of a TOML file (keys at top level or under ``[cluster]``).

    ``source`` names the argument in the messages of a name that is neither a preset nor a file
    (``cluster 'smal' is neither a preset (…) nor a file``); the command line passes ``"--cluster"``.
    Errors in a file start with its path.
    """
    if not isinstance(spec, (str, Path)):
        raise ConfigError(f"{source} must be a preset name ({', '.join(preset_names())}) or a TOML file's path, got {spec!r}")
    text_spec = str(spec)
    if text_spec in _PRESETS:
        return cluster_preset(text_spec)
    path = Path(spec)
    if path.is_dir():
        raise ConfigError(f"{source} {text_spec!r} is a folder, not a TOML file")
    if not path.is_file():
        raise ConfigError(
            f"{source} {text_spec!r} is neither a preset ({', '.join(preset_names())}) nor a file"
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(check_text(str(path), raw).decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    outside = [key for key in data if key != "cluster"]
    if "cluster" in data and outside:
        raise ConfigError(f"{path}: key(s) {', '.join(outside)} outside [cluster]; put every cluster field under it")
    table = data.get("cluster", data)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [cluster] must be a table")
    if not table:
        names = [f.name for f in fields(ClusterSpec)]
        raise ConfigError(
            f"{path}: sets no cluster field; expected {', '.join(names[:-1])} (and optionally {names[-1]}), "
            "at top level or under [cluster]"
        )
    return ClusterSpec.from_mapping(table, source=str(path))
