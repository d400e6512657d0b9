"""Resource-sensitivity profiles of the model zoo.

Each model has a throughput matrix over (CPUs per GPU, GB of DRAM per GPU),
normalised to 1.0 at the fair share of the paper's cluster (3 CPUs, 62.5 GB
per GPU). The figures are those of the Synergy paper (Mohan et al., "Looking
Beyond GPUs for DNN Scheduling on Multi-Tenant Clusters", OSDI 2022) and its
simulator (msr-fiddle/synergy, MIT licence); see ``synergy_gym/data/README.md``.

Rules the simulator applies:

* Throughput at an allocation is the matrix value at the largest grid point
  not above it in either dimension: a job never runs faster than what it was
  given. Allocations below the lowest grid level use the lowest level (the
  zoo's language models ask for 20 GB, just under the 20.83 GB level; their
  matrices are flat, so this changes nothing).
* Speed in iterations per second is matrix value / ``iter_time_s`` (the
  iteration time at the fair share).
* Best-case demand is the model's (CPUs, GB) per GPU. A multi-GPU job's demand
  scales with its GPUs, capped at one server: per GPU it is
  ``min(demand, max(fair, server / gpus))``, so a job larger than a server asks
  for its fair share.
"""

from __future__ import annotations

import csv
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, overload

import numpy as np

from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.sim.validation import check_positive, is_number, shown

TASKS: tuple[str, ...] = ("vision", "language", "speech")

# Tolerance when comparing an allocation with a grid level (allocations are
# computed in floating point, e.g. 500 / 24 GB).
_GRID_EPS = 1e-6


@dataclass(frozen=True)
class ModelProfile:
    """One model of the zoo."""

    name: str
    task: str
    iter_time_s: float
    demand_cpus_per_gpu: float
    demand_mem_gb_per_gpu: float
    cpu_grid: np.ndarray  # CPUs per GPU of each cpu level, increasing
    mem_grid: np.ndarray  # GB per GPU of each memory level, increasing
    tput: np.ndarray  # [cpu level, mem level] normalised throughput
    #: Optimistic profiling's memory model (see ``data/README.md``): memory per GPU at
    #: which the dataset is fully cached, and storage MB/s per GPU needed at the fair
    #: share when nothing is cached.
    dataset_gb_per_gpu: float = 64.9
    read_mb_s_at_fair: float = 920.7

    def __post_init__(self) -> None:
        """Refuse, in one line naming the model and the field, a profile the simulator would compute nonsense from.

        The numbers must be finite and positive, each grid strictly increasing (levels are looked up by
        bisection), the throughputs finite and ≥ 0; the arrays are kept as read-only float64.
        """
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a model's name must be a non-empty string, got {shown(self.name)}")
        where = f"model {self.name!r}"
        if not (isinstance(self.task, str) and self.task in TASKS):
            raise ConfigError(f"{where}: task must be one of {', '.join(TASKS)}, got {shown(self.task)}")
        for name in ("iter_time_s", "demand_cpus_per_gpu", "demand_mem_gb_per_gpu", "dataset_gb_per_gpu",
                     "read_mb_s_at_fair"):
            object.__setattr__(self, name, check_positive(f"{where}: {name}", getattr(self, name)))
        for name in ("cpu_grid", "mem_grid"):
            grid = _float_array(where, name, getattr(self, name))
            if not (grid.ndim == 1 and grid.size and np.all(np.isfinite(grid)) and grid[0] > 0
                    and np.all(np.diff(grid) > 0)):
                got = grid.tolist() if grid.ndim else grid.item()
                raise ConfigError(f"{where}: {name} must be finite, positive and strictly increasing levels "
                                  f"(a 1-D array), got {shown(got)}")
            object.__setattr__(self, name, grid)
        tput = _float_array(where, "tput", self.tput)
        if tput.ndim != 2:
            raise ConfigError(f"{where}: tput must be a 2-D array (cpu levels × memory levels), got shape {tput.shape}")
        levels = (self.cpu_grid.size, self.mem_grid.size)
        if tput.shape != levels:
            raise ConfigError(f"{where}: tput has shape {tput.shape}, expected {levels} (cpu levels × memory levels of "
                              f"its grids)")
        bad = ~(np.isfinite(tput) & (tput >= 0))
        if bad.any():
            i, j = (int(k) for k in np.argwhere(bad)[0])
            raise ConfigError(f"{where}: tput[{i}, {j}] is {float(tput[i, j])!r}; a throughput must be finite and ≥ 0")
        object.__setattr__(self, "tput", tput)

    def throughput(self, cpus_per_gpu: float, mem_gb_per_gpu: float) -> float:
        """Normalised throughput at an allocation (largest grid point not above it)."""
        return float(self.tput[grid_level(self.cpu_grid, cpus_per_gpu), grid_level(self.mem_grid, mem_gb_per_gpu)])

    @property
    def speedup(self) -> float:
        """Throughput at the best-case demand, relative to the fair share."""
        return self.throughput(self.demand_cpus_per_gpu, self.demand_mem_gb_per_gpu)


def _float_array(where: str, name: str, value: Any) -> np.ndarray:
    """``value`` as a read-only float64 array (the same array if it is one already) if it holds only numbers."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64 and not value.flags.writeable:
        return value
    try:
        arr = np.asarray(value)
    except ValueError:  # a ragged nesting of lists
        arr = np.asarray(None)
    if arr.dtype.kind == "O" and arr.ndim and all(is_number(v) for v in arr.ravel().tolist()):
        arr = arr.astype(np.float64)
    if arr.dtype.kind not in "iuf":
        raise ConfigError(f"{where}: {name} must be an array of numbers, got {shown(value)}")
    arr = np.array(arr, dtype=np.float64)
    arr.setflags(write=False)
    return arr


def grid_level(grid: np.ndarray, amount):
    """Index of the largest grid level not above ``amount`` (0 below the lowest); vectorised."""
    level = np.maximum(np.searchsorted(grid, np.asarray(amount) + _GRID_EPS, side="right") - 1, 0)
    return int(level) if np.ndim(level) == 0 else level


@dataclass(frozen=True)
class ModelZoo:
    """The models a workload may use, indexed by position."""

    models: tuple[ModelProfile, ...]
    _tput: np.ndarray = field(init=False, repr=False, compare=False)
    _tput_lists: list = field(init=False, repr=False, compare=False)
    _cpu_grid_list: list = field(init=False, repr=False, compare=False)
    _mem_grid_list: list = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.models is not None and not isinstance(self.models, (tuple, list)):
            raise ConfigError(f"a model zoo's models must be a tuple of ModelProfile, got {shown(self.models)}")
        if not self.models:
            raise ConfigError(f"a model zoo needs at least one model, got {self.models!r}")
        for i, m in enumerate(self.models):
            if not isinstance(m, ModelProfile):
                raise ConfigError(f"a model zoo's models must be ModelProfile objects, got {shown(m)} at position {i}")
        object.__setattr__(self, "models", tuple(self.models))
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            dup = next(name for name in names if names.count(name) > 1)
            raise ConfigError(f"model {dup!r} appears more than once in the zoo")
        first = self.models[0]
        for m in self.models:  # (each profile's tput matches its own grids: ModelProfile checks it)
            if not (np.array_equal(m.cpu_grid, first.cpu_grid) and np.array_equal(m.mem_grid, first.mem_grid)):
                raise ConfigError(f"model {m.name!r} uses a different grid from {first.name!r}")
        tensor = np.stack([m.tput for m in self.models])
        tensor.setflags(write=False)
        object.__setattr__(self, "_tput", tensor)
        object.__setattr__(self, "_tput_lists", tensor.tolist())
        object.__setattr__(self, "_cpu_grid_list", first.cpu_grid.tolist())
        object.__setattr__(self, "_mem_grid_list", first.mem_grid.tolist())

    @classmethod
    def default(cls) -> ModelZoo:
        """The paper's ten models, from the package's data file."""
        return _load_zoo_csv()

    def __len__(self) -> int:
        return len(self.models)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models)

    @property
    def cpu_grid(self) -> np.ndarray:
        return self.models[0].cpu_grid

    @property
    def mem_grid(self) -> np.ndarray:
        return self.models[0].mem_grid

    def index(self, name: str) -> int:
        for i, m in enumerate(self.models):
            if m.name == name:
                return i
        raise UnknownNameError("model", name, self.names)

    def __iter__(self) -> Iterator[ModelProfile]:
        return iter(self.models)

    @overload
    def __getitem__(self, key: int | str) -> ModelProfile: ...

    @overload
    def __getitem__(self, key: slice) -> tuple[ModelProfile, ...]: ...

    def __getitem__(self, key: int | str | slice) -> ModelProfile | tuple[ModelProfile, ...]:
        """A model by its index (negative counts from the end, as for a list) or by its name (a slice: a tuple)."""
        if isinstance(key, str):
            return self.models[self.index(key)]
        if isinstance(key, slice):
            return self.models[key]
        n = len(self.models)
        where = f"look a model up by its index (0..{n - 1}) or its name ({', '.join(self.names)})"
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
            raise TypeError(f"model zoo: no model {key!r}: {where}")
        if not -n <= key < n:
            raise IndexError(f"model zoo: no model {key!r}: {where}")
        return self.models[key]

    def models_of_task(self, task: str) -> tuple[int, ...]:
        return tuple(i for i, m in enumerate(self.models) if m.task == task)

    def tput_tensor(self) -> np.ndarray:
        """Throughput matrices stacked as [model, cpu level, mem level] (read-only)."""
        return self._tput

    def levels_of(self, cpus_per_gpu: float, mem_gb_per_gpu: float) -> tuple[int, int]:
        """Grid levels (cpu, mem) of an allocation, in pure Python (fast for scalars)."""
        ci = max(bisect_right(self._cpu_grid_list, cpus_per_gpu + _GRID_EPS) - 1, 0)
        mi = max(bisect_right(self._mem_grid_list, mem_gb_per_gpu + _GRID_EPS) - 1, 0)
        return ci, mi

    def throughput_of(self, model: int, cpus_per_gpu: float, mem_gb_per_gpu: float) -> float:
        """:meth:`ModelProfile.throughput` of model index ``model``, in pure Python (fast for scalars)."""
        ci, mi = self.levels_of(cpus_per_gpu, mem_gb_per_gpu)
        return self._tput_lists[model][ci][mi]

    def throughput_many(self, model: np.ndarray, cpus_per_gpu: np.ndarray, mem_gb_per_gpu: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`ModelProfile.throughput` for many jobs."""
        ci = grid_level(self.cpu_grid, cpus_per_gpu)
        mi = grid_level(self.mem_grid, mem_gb_per_gpu)
        return self._tput[np.asarray(model), ci, mi]


def capped_demand_per_gpu(
    demand_per_gpu: np.ndarray, gpus: np.ndarray, fair_per_gpu: float, server_capacity: float
) -> np.ndarray:
    """Per-GPU demand of g-GPU jobs, capped so the job's total fits one server.

    ``min(demand, max(fair, capacity / g))``: never below the fair share for a
    job that asked for more than fair, never above what one server holds.
    """
    gpus = np.asarray(gpus, dtype=float)
    return np.minimum(demand_per_gpu, np.maximum(fair_per_gpu, server_capacity / gpus))


def _load_zoo_csv() -> ModelZoo:
    data = resources.files("synergy_gym.data")
    rows = list(csv.DictReader(data.joinpath("model_profiles.csv").read_text(encoding="utf-8").splitlines()))
    datasets = {
        r["model"]: (float(r["dataset_gb_per_gpu"]), float(r["read_mb_s_at_fair"]))
        for r in csv.DictReader(data.joinpath("model_datasets.csv").read_text(encoding="utf-8").splitlines())
    }
    order: list[str] = []
    by_model: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        if row["model"] not in by_model:
            order.append(row["model"])
            by_model[row["model"]] = []
        by_model[row["model"]].append(row)
    models = []
    for name in order:
        group = by_model[name]
        cpu_grid = np.array(sorted({float(r["cpus_per_gpu"]) for r in group}))
        mem_grid = np.array(sorted({float(r["mem_gb_per_gpu"]) for r in group}))
        tput = np.zeros((len(cpu_grid), len(mem_grid)))
        for r in group:
            ci = int(np.searchsorted(cpu_grid, float(r["cpus_per_gpu"])))
            mi = int(np.searchsorted(mem_grid, float(r["mem_gb_per_gpu"])))
            tput[ci, mi] = float(r["tput_norm"])
        for arr in (cpu_grid, mem_grid, tput):
            arr.setflags(write=False)
        head = group[0]
        models.append(
            ModelProfile(
                name=name,
                task=head["task"],
                iter_time_s=float(head["iter_time_s"]),
                demand_cpus_per_gpu=float(head["demand_cpus_per_gpu"]),
                demand_mem_gb_per_gpu=float(head["demand_mem_gb_per_gpu"]),
                cpu_grid=cpu_grid,
                mem_grid=mem_grid,
                tput=tput,
                dataset_gb_per_gpu=datasets[name][0],
                read_mb_s_at_fair=datasets[name][1],
            )
        )
    return ModelZoo(tuple(models))
