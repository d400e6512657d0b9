"""Scheduling heuristics as environment policies: they read only the observation and the action mask.

Each has Stable-Baselines3's ``predict(observation, state=None, episode_start=None,
deterministic=True, action_masks=None) -> (action, state)`` signature, takes single or
batched (vector env) observations, and is scored by ``synergy_gym.evaluate`` and
``synergy-gym evaluate --baselines all`` exactly like a trained agent – so it is
the bar an agent with the same information has to clear.

========================  ==========================================================
name                      slot (which waiting job)       level (how much)
========================  ==========================================================
``fifo+tune``             the first (earliest arrival)   its best-case demand
``srtf+tune``             least run time left at demand  its best-case demand
``las+tune``              least attained service         its best-case demand
``tetris``                least remaining time × (GPU + CPU + memory share) over
                          every (slot, level) whose CPUs and memory fit the free
                          resources now (else the fair share of the first slot;
                          with ``levels="grid"`` its demand level)
``tetris+greedy``         least remaining time × (GPU + CPU + memory share) at its
                          best-case demand, among the slots whose demand fits the free
                          CPUs and memory now; *stop* when none fits (the simulator's
                          ``tetris+greedy``: a job runs at its demand or waits)
``fifo+price``            the first                      max speed-up − λ · cost
``srtf+price``            least run time left at demand  max speed-up − λ · cost
``random``                a uniformly random valid action (seeded)
========================  ==========================================================

Cost is the level's CPUs and memory per GPU relative to the fair share, averaged
(1.0 at the fair share); λ (``price``, default :data:`DEFAULT_PRICE` = 0.5) was chosen
among 0.5, 1, 1.5 and 3 for ``srtf+price`` on tuning workload seeds 0–19 of
``Synergy-small-v0`` and ``Synergy-small-scarce-v0`` (mean JCT 15.86 / 18.01 / 18.61 /
18.85 h and 26.56 / 26.51 / 28.90 / 31.13 h). The heuristics but ``tetris+greedy``
never *stop* while a job fits, as Synergy-Tune admits every job it can;
``tetris+greedy`` leaves GPUs idle rather than start a job below its demand, which
pays with ``preemptive=True`` (the waiting job starts at the next event) and not in
the default mode (a job admitted below its demand keeps its GPUs until it ends, but
a stop leaves the GPUs idle until the next event). "First slot at its
demand" (``fifo+tune``) reproduces the simulator's ``fifo+tune`` exactly in
preemptive mode while every waiting job has a slot (``max_queue``), and in the default mode on
single-GPU workloads; ``las+tune`` is
meant for ``preemptive=True``.

With ``levels="grid"`` the demand level is the valid level with the highest
speed-up (the cheapest among equals); ``tetris`` admits the first slot there
when no (slot, level) fits, as the grid has no fair-share level.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from synergy_gym.baselines.preempting import (
    choose_by_target,
    has_running_rows,
    row_need_at_level,
    run_feature,
    running_rows,
    runtime_h,
)
from synergy_gym.env.levels import DEMAND_LEVEL, level_count
from synergy_gym.env.observation import CLUSTER_FEATURES, LEVEL_FEATURES, SLOT_FEATURES, hours, slot_arrays
from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.sim.profiles import ModelZoo
from synergy_gym.sim.validation import check_positive

#: λ of the price allocators: a level's speed-up is worth λ per unit of cost (1.0 = the fair share).
DEFAULT_PRICE = 0.5
_N_DEFAULT_LEVELS = level_count(ModelZoo.default(), "default")
_RUNTIME_FAIR = SLOT_FEATURES.index("runtime_fair")
_RUNTIME_DEMAND = SLOT_FEATURES.index("runtime_demand")
_ATTAINED = SLOT_FEATURES.index("attained")
_GPU_SHARE = SLOT_FEATURES.index("gpu_share")
_CPU, _MEM, _SPEEDUP = (LEVEL_FEATURES.index(k) for k in ("cpu", "mem", "speedup"))
_FREE_GPUS, _FREE_CPU, _FREE_MEM = (CLUSTER_FEATURES.index(k) for k in ("free_gpus", "free_cpus", "free_mem"))


class EnvHeuristic:
    """Base class: :meth:`choose` picks one action from one observation and its mask."""

    name = "heuristic"

    def predict(
        self,
        observation: dict[str, np.ndarray],
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        """The action for ``observation`` (one or a batch), and ``state`` unchanged."""
        del episode_start, deterministic  # Stable-Baselines3's signature; a heuristic has no use for them
        mask = np.asarray(action_masks if action_masks is not None else observation["action_mask"]) > 0
        if mask.shape != (expected := np.shape(observation["action_mask"])):
            raise ConfigError(f"action_masks must have the observation's action_mask shape {expected}, got {mask.shape}")
        if mask.ndim == 1:
            return np.array(self.choose(self.structured(observation), mask)), state
        picks = [
            self.choose(self.structured({k: v[i] for k, v in observation.items()}), mask[i]) for i in range(mask.shape[0])
        ]
        return np.array(picks), state

    def choose(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        """One action for one observation whose ``slots`` and ``slot_levels`` are (slots, …) arrays."""
        raise NotImplementedError

    @staticmethod
    def structured(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        slots, levels = slot_arrays(obs)
        return {**obs, "slots": slots, "slot_levels": levels}

    # -- reading the observation --------------------------------------------------------------
    @staticmethod
    def valid_slots(obs: dict[str, np.ndarray], mask: np.ndarray) -> np.ndarray:
        """Slots with at least one valid level (empty when only stop is valid)."""
        q, n_levels = obs["slot_levels"].shape[:2]
        return np.flatnonzero(mask[: q * n_levels].reshape(q, n_levels).any(axis=1))

    @staticmethod
    def slot_valid(obs: dict[str, np.ndarray], mask: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Whether each of ``slots`` has a valid level (its job can be admitted now)."""
        q, n_levels = obs["slot_levels"].shape[:2]
        return mask[: q * n_levels].reshape(q, n_levels)[slots].any(axis=1)

    @staticmethod
    def level_mask(obs: dict[str, np.ndarray], mask: np.ndarray, slot: int) -> np.ndarray:
        n_levels = obs["slot_levels"].shape[1]
        return mask[slot * n_levels : (slot + 1) * n_levels]

    @classmethod
    def demand_level(cls, obs: dict[str, np.ndarray], mask: np.ndarray, slot: int) -> int:
        """The best-case demand level of ``slot``'s job."""
        levels = obs["slot_levels"][slot]
        valid = cls.level_mask(obs, mask, slot)
        if levels.shape[0] == _N_DEFAULT_LEVELS and valid[DEMAND_LEVEL]:
            return DEMAND_LEVEL
        speed = np.where(valid, levels[:, _SPEEDUP], -np.inf)
        best = np.flatnonzero(speed >= speed.max() - 1e-6)
        return int(best[np.argmin(levels[best, _CPU] + levels[best, _MEM])])

    @staticmethod
    def action(obs: dict[str, np.ndarray], slot: int, level: int) -> int:
        return slot * obs["slot_levels"].shape[1] + level

    @staticmethod
    def stop(mask: np.ndarray) -> int:
        return mask.size - 1


class SlotAtDemand(EnvHeuristic):
    """The slot with the smallest key (ties: the earlier slot, i.e. arrival) at its best-case demand."""

    def __init__(
        self, name: str, key: Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray] | None, feature: str = "age"
    ) -> None:
        self.name = name
        self.key = key
        #: The slot feature ``key`` reads (``age``, negated, without a key), for the running rows too.
        self.feature = feature

    def choose(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        if has_running_rows(obs):
            return self.choose_preempting(obs, mask)
        slots = self.valid_slots(obs, mask)
        if slots.size == 0:
            return self.stop(mask)
        slot = int(slots[0]) if self.key is None else int(slots[np.argmin(self.key(obs, slots))])
        return self.action(obs, slot, self.demand_level(obs, mask, slot))

    def choose_preempting(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        """The walk over waiting and running jobs by the key, GPUs alone counted (:mod:`~synergy_gym.baselines.preempting`)."""
        return gpu_walk(self, obs, mask, self.feature, self.key is None,
                        lambda q: self.action(obs, q, self.demand_level(obs, mask, q)))


class PriceAllocator(EnvHeuristic):
    """The level maximising speed-up − λ · cost, for the first slot or the least run time left at demand."""

    def __init__(self, name: str, shortest_first: bool, price: float = DEFAULT_PRICE) -> None:
        self.name, self.shortest_first = name, shortest_first
        self.price = check_positive("price", price, allow_zero=True)  # a finite number ≥ 0, else a ConfigError

    def choose(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        if has_running_rows(obs):
            return gpu_walk(self, obs, mask, "runtime_demand" if self.shortest_first else "age", not self.shortest_first,
                            lambda q: self.action(obs, q, self.level(obs, mask, q)))
        slots = self.valid_slots(obs, mask)
        if slots.size == 0:
            return self.stop(mask)
        slot = int(slots[np.argmin(obs["slots"][slots, _RUNTIME_DEMAND])]) if self.shortest_first else int(slots[0])
        return self.action(obs, slot, self.level(obs, mask, slot))

    def level(self, obs: dict[str, np.ndarray], mask: np.ndarray, slot: int) -> int:
        """The valid level of ``slot`` that maximises speed-up − λ · cost."""
        levels = obs["slot_levels"][slot]
        value = levels[:, _SPEEDUP] - self.price * (levels[:, _CPU] + levels[:, _MEM]) / 2.0
        return int(np.argmax(np.where(self.level_mask(obs, mask, slot), value, -np.inf)))


class TetrisPacker(EnvHeuristic):
    """Least remaining time × resource share over the (slot, level) pairs that fit the free CPUs and memory."""

    name = "tetris"

    def choose(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        slots = self.valid_slots(obs, mask)
        if slots.size == 0:
            return self.stop(mask)
        levels = obs["slot_levels"][slots]  # (k, L, 3)
        n_levels = levels.shape[1]
        valid = mask[: obs["slot_levels"].shape[0] * n_levels].reshape(-1, n_levels)[slots] > 0
        score, fits = _tetris_score(obs, slots[:, None], levels)
        fits &= valid
        if not fits.any():
            slot = int(slots[0])
            return self.action(obs, slot, 0 if n_levels == _N_DEFAULT_LEVELS else self.demand_level(obs, mask, slot))
        i, level = np.unravel_index(int(np.argmin(np.where(fits, score, np.inf))), score.shape)
        return self.action(obs, int(slots[i]), int(level))


class TetrisGreedy(EnvHeuristic):
    """Tetris's score at each job's best-case demand, among the jobs whose demand fits now; else stop.

    The environment's counterpart of the simulator's ``tetris+greedy`` (Synergy-Greedy
    skips a job whose demand does not fit): no job starts below its demand.
    """

    name = "tetris+greedy"

    def __init__(self, readmit: bool = False) -> None:
        #: With ``preemptive=True``: a job preempted in an event may be admitted again in it, at the level the
        #: new placement leaves room for (``tetris+greedy+readmit``); by default it waits for the next event.
        self.readmit = readmit
        if readmit:
            self.name = "tetris+greedy+readmit"

    def choose(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        if has_running_rows(obs):
            return self.choose_preempting(obs, mask)
        slots = self.valid_slots(obs, mask)
        if slots.size == 0:
            return self.stop(mask)
        demand = np.array([self.demand_level(obs, mask, int(slot)) for slot in slots])
        score, fits = _tetris_score(obs, slots, obs["slot_levels"][slots, demand])
        if not fits.any():
            return self.stop(mask)
        i = int(np.argmin(np.where(fits, score, np.inf)))
        return self.action(obs, int(slots[i]), int(demand[i]))

    @staticmethod
    def walk_demand_levels(obs: dict[str, np.ndarray], mask: np.ndarray, filled: np.ndarray) -> np.ndarray:
        """The ``filled`` slots' demand levels in the walk with grid levels: a slot the mask offers at its
        :meth:`demand_level` (the fastest valid level, the cheapest among equals); a slot whose GPUs do not fit
        now has no valid level in the mask and cannot be admitted, so the walk counts it at its fastest grid point
        (the cheapest among equals)."""
        q, n_levels = obs["slot_levels"].shape[:2]
        levels = obs["slot_levels"][filled]
        valid = mask[: q * n_levels].reshape(q, n_levels)[filled] > 0
        offered = valid.any(axis=1, keepdims=True)
        usable = np.where(offered, valid, True)
        speed = np.where(usable, levels[..., _SPEEDUP], -np.inf)
        fastest = usable & (speed >= speed.max(axis=1, keepdims=True, initial=-np.inf) - np.where(offered, 1e-6, 0.0))
        return np.argmin(np.where(fastest, levels[..., _CPU] + levels[..., _MEM], np.inf), axis=1)

    def choose_preempting(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        """The walk by Tetris's score over waiting and running jobs, each at its demand, counting GPUs, CPUs and memory.

        As a refill at every event would (the simulator's Synergy-Greedy, or ``redecide="every_event"``):
        a job is in the target set when its demand fits what the jobs before it leave, a running job
        taking what it holds now (its grant), a waiting one its demand; a job of the target set is
        admitted once its demand fits the free CPUs and memory now.
        """
        filled = np.arange(int(obs["slot_mask"].sum()))
        n_levels = obs["slot_levels"].shape[1]
        if n_levels == _N_DEFAULT_LEVELS:
            demand = np.full(filled.size, DEMAND_LEVEL)
        else:
            demand = self.walk_demand_levels(obs, mask, filled)
        at_demand = obs["slot_levels"][filled, demand]
        score, fits = _tetris_score(obs, filled, at_demand)
        gpu = obs["slots"][filled, _GPU_SHARE].astype(float)
        need = np.stack([gpu, gpu * at_demand[:, _CPU], gpu * at_demand[:, _MEM]], axis=1)
        q = obs["slot_levels"].shape[0]
        admissible = fits & (mask[: q * n_levels].reshape(q, n_levels)[filled, demand] > 0)
        rows = running_rows(obs)
        run_need = row_need_at_level(rows)
        run_score = runtime_h(rows, "runtime_fair") / run_feature(rows, "level_speedup") * run_need.sum(axis=1)
        held = np.stack([run_feature(rows, "gpu_share"), run_feature(rows, "frees_cpu"), run_feature(rows, "frees_mem")],
                        axis=1)
        free = np.array([float(obs["cluster"][k]) for k in (_FREE_GPUS, _FREE_CPU, _FREE_MEM)])
        return choose_by_target(obs, mask, score, run_score, need, run_need, free, admissible,
                                lambda i: self.action(obs, int(filled[i]), int(demand[i])), run_takes=held,
                                readmit=self.readmit)


def _tetris_score(obs: dict[str, np.ndarray], slots: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tetris's score (remaining hours × GPU + CPU + memory share of the cluster) of the ``levels``
    rows (… × 3 level features) of ``slots`` (broadcast against them), and whether each fits the
    free CPUs and memory."""
    gpu = obs["slots"][slots, _GPU_SHARE]
    cpu, mem = gpu * levels[..., _CPU], gpu * levels[..., _MEM]  # shares of the cluster
    fits = (cpu <= obs["cluster"][_FREE_CPU] + 1e-6) & (mem <= obs["cluster"][_FREE_MEM] + 1e-6)
    remaining_h = hours(obs["slots"][slots, _RUNTIME_FAIR].astype(float)) / levels[..., _SPEEDUP]
    return remaining_h * (gpu + cpu + mem), fits


def gpu_walk(
    heuristic: EnvHeuristic, obs: dict[str, np.ndarray], mask: np.ndarray, feature: str, oldest_first: bool,
    admit: Callable[[int], int],
) -> int:
    """One action of the walk over waiting and running jobs by slot ``feature`` (ascending; ``oldest_first``:
    descending, for ``age``), counting GPUs alone (Tune admits any job whose GPUs fit). By arrival
    (``oldest_first``) the placement stays in arrival order exactly, as the simulator's FIFO places."""
    filled = np.arange(int(obs["slot_mask"].sum()))
    rows = running_rows(obs)
    sign = -1.0 if oldest_first else 1.0
    wait_key = sign * obs["slots"][filled, SLOT_FEATURES.index(feature)].astype(float)
    run_key = sign * run_feature(rows, feature)
    need = np.zeros((filled.size, 3))
    need[:, 0] = obs["slots"][filled, _GPU_SHARE]
    run_need = np.zeros((rows.shape[0], 3))
    run_need[:, 0] = run_feature(rows, "gpu_share")
    free = np.array([float(obs["cluster"][_FREE_GPUS]), 0.0, 0.0])
    return choose_by_target(obs, mask, wait_key, run_key, need, run_need, free,
                            heuristic.slot_valid(obs, mask, filled), admit, exact_order=oldest_first)


class RandomValid(EnvHeuristic):
    """A uniformly random valid action (seeded)."""

    name = "random"

    def __init__(self, seed: int | None = 0) -> None:
        self.reseed(seed)

    def reseed(self, seed: int | None) -> None:
        """Draw from ``seed``'s stream from now on (:func:`synergy_gym.evaluate` reseeds with each episode's seed)."""
        self.rng = np.random.default_rng(check_positive("seed", seed, integer=True, allow_zero=True, allow_none=True))

    def choose(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        valid = np.flatnonzero(mask)
        return int(valid[self.rng.integers(valid.size)])


def _runtime_at_demand(obs: dict[str, np.ndarray], slots: np.ndarray) -> np.ndarray:
    return obs["slots"][slots, _RUNTIME_DEMAND]


def _attained(obs: dict[str, np.ndarray], slots: np.ndarray) -> np.ndarray:
    return obs["slots"][slots, _ATTAINED]


def env_heuristics(seed: int | None = 0, price: float = DEFAULT_PRICE) -> dict[str, Any]:
    """Every environment heuristic by name (``random`` seeded with ``seed``; :func:`synergy_gym.evaluate` reseeds it
    with each episode's seed).

    ``seed`` is a whole number ≥ 0 or None (fresh entropy), ``price`` (λ of ``fifo+price`` and ``srtf+price``) a
    finite number ≥ 0; NumPy's numbers count as Python's. Anything else is a one-line
    :class:`~synergy_gym.errors.ConfigError` naming the argument.
    """
    seed = check_positive("seed", seed, integer=True, allow_zero=True, allow_none=True)
    price = check_positive("price", price, allow_zero=True)
    return {
        "fifo+tune": SlotAtDemand("fifo+tune", None),
        "srtf+tune": SlotAtDemand("srtf+tune", _runtime_at_demand, "runtime_demand"),
        "las+tune": SlotAtDemand("las+tune", _attained, "attained"),
        "tetris": TetrisPacker(),
        "tetris+greedy": TetrisGreedy(),
        "fifo+price": PriceAllocator("fifo+price", shortest_first=False, price=price),
        "srtf+price": PriceAllocator("srtf+price", shortest_first=True, price=price),
        "random": RandomValid(seed),
    }


HEURISTIC_NAMES: tuple[str, ...] = tuple(env_heuristics())
"""The environment heuristics of ``--baselines env``, the ceilings and the benchmark."""


def heuristic_variants() -> dict[str, EnvHeuristic]:
    """Variants run only when named (``--baselines env:NAME``, ``bc_policy``, ``relative_to``, ``reference_baselines``,
    ``hint_policy``, the rollouts' ``--base``): ``tetris+greedy+readmit``, ``tetris+greedy`` that with
    ``preemptive=True`` admits a job preempted in an event again in that event (lower JCT, more decisions:
    docs/baselines.md; without preemption the same)."""
    return {"tetris+greedy+readmit": TetrisGreedy(readmit=True)}


VARIANT_NAMES: tuple[str, ...] = tuple(heuristic_variants())
#: Every name :func:`env_heuristic` knows.
NAMED_HEURISTICS: tuple[str, ...] = HEURISTIC_NAMES + VARIANT_NAMES


def env_heuristic(name: str, seed: int | None = 0, price: float = DEFAULT_PRICE) -> Any:
    """The environment heuristic or variant ``name`` (:data:`NAMED_HEURISTICS`); ``seed`` and ``price`` as in
    :func:`env_heuristics`. An unknown name is a one-line :class:`~synergy_gym.errors.UnknownNameError`."""
    table = {**env_heuristics(seed, price), **heuristic_variants()}
    if not isinstance(name, str) or name not in table:
        raise UnknownNameError("env heuristic", name, NAMED_HEURISTICS)
    return table[name]
