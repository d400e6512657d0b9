"""Valid actions: which preferences can ever be honoured for a job, and a ``Discrete`` space that samples them."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from synergy_gym.cluster import ClusterSpec
from synergy_gym.job_table import JobTable
from synergy_gym.levels import honourable_points
from synergy_gym.profiles import ModelZoo

#: Action 0: the fair share; action 1: the model's best-case demand; 2..: grid points.
FAIR_ACTION = 0
DEMAND_ACTION = 1


class MaskedDiscrete(spaces.Discrete):
    """``Discrete`` whose :meth:`sample` draws a valid action for the current job unless given a mask.

    Random exploration (``action_space.sample()`` in checkers, DQN's ε-greedy)
    thus never picks a masked action, which the environment's ``step`` rejects.
    """

    def __init__(self, n: int, mask_fn, seed: int | None = None) -> None:
        super().__init__(n, seed=seed)
        self._mask_fn = mask_fn

    def sample(self, mask=None, probability=None):
        if mask is None and probability is None and self._mask_fn is not None:
            mask = self._mask_fn().astype(np.int8)
        return super().sample(mask=mask, probability=probability)

    def __getstate__(self) -> dict:
        # A pickled space (sent between processes by vector envs) is a plain
        # Discrete; the environment re-attaches its masks when it is unpickled.
        state = dict(self.__dict__)
        state["_mask_fn"] = None
        return state


class ActionMasks:
    """Masks per job: actions 0 and 1 always; a grid point when it is as fast as the fair share
    (also when capped at it) and fits one server for the job's GPUs.

    Cached per (model, GPU count) by the zoo's measured matrices, or per job by
    its own estimate when the sensitivity is profiled; the arrays are read-only.
    """

    def __init__(self, cluster: ClusterSpec, zoo: ModelZoo, n_actions: int) -> None:
        self.cluster = cluster
        self.zoo = zoo
        self.n_actions = n_actions
        n_cpu, n_mem = len(zoo.cpu_grid), len(zoo.mem_grid)
        self.n_grid = n_cpu * n_mem
        self.grid_cpu = np.repeat(zoo.cpu_grid, n_mem)
        self.grid_mem = np.tile(zoo.mem_grid, n_cpu)
        #: (CPUs, GB per GPU) of action 2 + k, as Python floats.
        self.grid_points = list(zip(self.grid_cpu.tolist(), self.grid_mem.tolist()))
        self._cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def new_episode(self) -> None:
        """Forget the per-job (profiled) masks of the last episode; the per-(model, GPUs) ones stay valid."""
        self._cache = {k: v for k, v in self._cache.items() if k[0] >= 0}

    def ended(self) -> np.ndarray:
        """The mask once the episode has ended: the two always-valid actions."""
        mask = np.zeros(self.n_actions, dtype=bool)
        mask[[FAIR_ACTION, DEMAND_ACTION]] = True
        return mask

    def of(self, jobs: JobTable, j: int, as_float: bool = False) -> np.ndarray:
        """Valid actions of job ``j`` (read-only)."""
        profiled = jobs.belief is not None
        key = (-1 - j, 0) if profiled else (int(jobs.model[j]), jobs.gpus_l[j])
        masks = self._cache.get(key)
        if masks is None:
            mask = self.from_estimates(jobs, j) if profiled else self.for_model(*key)
            as_f32 = mask.astype(np.float32)
            as_f32.setflags(write=False)
            masks = self._cache[key] = (mask, as_f32)
        return masks[1] if as_float else masks[0]

    def from_estimates(self, jobs: JobTable, j: int) -> np.ndarray:
        """Valid actions of job ``j`` by its own estimated matrix (profiled sensitivity)."""
        idx = np.full(self.n_grid, j)
        fair_cpu, fair_mem = np.minimum(self.grid_cpu, jobs.fair_cpu), np.minimum(self.grid_mem, jobs.fair_mem)
        return self._grid_mask(
            jobs.est_throughput_many(idx, self.grid_cpu, self.grid_mem),
            jobs.est_throughput_many(idx, fair_cpu, fair_mem),
            jobs.tput_fair_l[j],
            jobs.gpus_l[j],
        )

    def for_model(self, model: int, gpus: int) -> np.ndarray:
        """Valid actions for a ``gpus``-GPU job of ``model`` by the zoo's measured matrix."""
        c = self.cluster
        zoo = self.zoo
        fair_cpu, fair_mem = c.fair_cpus_per_gpu, c.fair_mem_gb_per_gpu
        models = np.full(self.n_grid, model)
        return self._grid_mask(
            zoo.throughput_many(models, self.grid_cpu, self.grid_mem),
            zoo.throughput_many(models, np.minimum(self.grid_cpu, fair_cpu), np.minimum(self.grid_mem, fair_mem)),
            zoo.throughput_of(model, fair_cpu, fair_mem),
            gpus,
        )

    def check(self, jobs: JobTable, j: int, action) -> int:
        """``action`` as an int if it is valid for job ``j``; otherwise ``ValueError`` listing the valid ones."""
        if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
            a = int(action)
        else:
            arr = np.asarray(action)
            if arr.size != 1 or arr.dtype.kind not in "iuf" or not float(arr.reshape(())).is_integer():
                raise ValueError(f"action {action!r} is not a single integer")
            a = int(arr.reshape(()))
        mask = self.of(jobs, j)
        if not 0 <= a < mask.size:
            raise ValueError(f"action {a} is out of range: valid actions are 0..{mask.size - 1}")
        if not mask[a]:
            raise ValueError(
                f"action {a} is masked for job {jobs.job_id[j]}; valid actions: {np.flatnonzero(mask).tolist()}"
            )
        return a

    def _grid_mask(self, tput: np.ndarray, capped: np.ndarray, fair_tput: float, gpus: int) -> np.ndarray:
        mask = np.ones(self.n_actions, dtype=bool)
        mask[2 : 2 + self.n_grid] = honourable_points(self.cluster, self.grid_cpu, self.grid_mem, tput, capped, fair_tput, gpus)
        mask.setflags(write=False)
        return mask
