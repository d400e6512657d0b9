"""Priority heuristics with preemption, for ``preemptive=True, redecide="changes"``.

There the running jobs keep their GPUs and level at an event unless a policy preempts them. The
simulator's policies instead plan every round from scratch: walk all runnable jobs in priority
order and run each that fits. A priority heuristic (``fifo+tune``, ``srtf+tune``, ``las+tune``,
``tetris+greedy``, ``srtf+price``, ``fifo+price``) does the same at an event, one action at a
time, with :func:`choose_by_target`:

1. **The target set.** Walk the running rows and the waiting jobs in the slots together, in
   priority order (lower key first; ties: the earlier arrival), with the capacity the rows
   and the slots may share – the free resources plus what the running rows need – and keep
   each job whose need still fits (a job that does not fit is skipped, and smaller ones
   behind it backfill, as Tune's admission and Synergy-Greedy do).
2. **One action.** Preempt the lowest-priority running row outside the target set; when there
   is none, admit the highest-priority waiting job of the target set that can be admitted now –
   *ahead* of the running jobs (placed before them) when it outranks one of them; else stop (but
   with nothing running, admit the highest-priority job the mask offers: with ``agent_orders=False``
   it offers only the first that fits, and stopping would leave the cluster idle for good). A
   job preempted in the event waits for the next one (re-admitting it in the same event, once
   the placement has changed, would cost two decisions for what the next event decides anyway),
   except under ``fifo+tune``, which keeps its placement in arrival order exactly, and the named
   variant ``tetris+greedy+readmit`` (``readmit``), which pays the decisions for the lower JCT.

Each action changes the observation the next one reads, and the walk over the new observation
gives the same target set, so an event costs one decision per preemption and per admission,
and one stop. Every input is read off the observation (:func:`running_rows`), so these stay
same-information baselines. Running jobs beyond the rows (more than ``max_running``) and jobs
admitted earlier in the event are not in the walk: they keep what they hold.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synergy_gym.env.observation import (
    CLUSTER_FEATURES,
    RUNNING_SLOT_FEATURES,
    SLOT_FEATURES,
    hours,
)

_FREE_GPUS = CLUSTER_FEATURES.index("free_gpus")
_RUN = {name: RUNNING_SLOT_FEATURES.index(name) for name in RUNNING_SLOT_FEATURES}
_AGE = SLOT_FEATURES.index("age")
_WAS_RUNNING = SLOT_FEATURES.index("was_running")
_EPS = 1e-6


def has_running_rows(obs: dict[str, np.ndarray]) -> bool:
    """Whether the observation is of ``redecide="changes"`` (it shows running rows)."""
    return "running_slots" in obs


def running_rows(obs: dict[str, np.ndarray]) -> np.ndarray:
    """The filled running rows (n × :data:`RUNNING_SLOT_FEATURES`), in row order."""
    width = len(RUNNING_SLOT_FEATURES)
    rows = np.asarray(obs["running_slots"]).reshape(-1, width)
    return rows[: int(np.asarray(obs["running_mask"]).sum())]


def run_feature(rows: np.ndarray, name: str) -> np.ndarray:
    """One column of :func:`running_rows` (float64) by its name in :data:`RUNNING_SLOT_FEATURES`."""
    return rows[:, _RUN[name]].astype(float)


def row_need_at_level(rows: np.ndarray) -> np.ndarray:
    """What each running row needs at its level: (GPU, CPU, memory) shares of the cluster (n × 3)."""
    gpu = run_feature(rows, "gpu_share")
    return np.stack([gpu, gpu * run_feature(rows, "level_cpu"), gpu * run_feature(rows, "level_mem")], axis=1)


def target_set(keys: np.ndarray, ages: np.ndarray, needs: np.ndarray, capacity: np.ndarray,
               takes: np.ndarray | None = None) -> np.ndarray:
    """Which jobs the priority walk keeps: by ``keys`` (ties: the larger age, i.e. the earlier arrival),
    each whose ``needs`` row still fits in what is left of ``capacity``; a kept job takes its ``takes``
    row (default: its needs) from what is left."""
    takes = needs if takes is None else takes
    keep = np.zeros(keys.size, dtype=bool)
    left = capacity.astype(float).copy()
    for i in np.lexsort((-ages, keys)):
        if np.all(needs[i] <= left + _EPS):
            keep[i] = True
            left -= takes[i]
    return keep


def choose_by_target(
    obs: dict[str, np.ndarray],
    mask: np.ndarray,
    wait_key: np.ndarray,
    run_key: np.ndarray,
    wait_need: np.ndarray,
    run_need: np.ndarray,
    free: np.ndarray,
    admissible: np.ndarray,
    admit: Callable[[int], int],
    exact_order: bool = False,
    run_takes: np.ndarray | None = None,
    readmit: bool = False,
) -> int:
    """One action of the walk (module docstring) over the filled slots and :func:`running_rows`.

    ``wait_key``, ``wait_need`` (slots × 3: GPU, CPU and memory shares) and ``admissible`` (the job
    can be admitted now as the policy wants it) are over the filled slots; ``run_key`` and
    ``run_need`` over the running rows; ``free`` (3) what neither holds now, in the units of the
    needs; ``admit(slot)`` the action admitting ``slot``'s job. ``exact_order``: keep the placement
    in priority order exactly – an admission that outranks some running jobs but not all first
    preempts those it outranks (they are admitted again after it), where by default it is placed
    ahead of all of them. ``run_takes`` (running rows × 3): what each running job takes from the
    capacity when the walk keeps it (default: ``run_need``; ``free`` is then what is free beside
    those). ``readmit``: a job preempted in this event may be admitted again in it (by default it waits for
    the next event, as the module docstring says). Returns an admission, a preemption (action
    ``stop − running rows + row``) or stop.
    """
    stop = mask.size - 1
    first_preempt = stop - np.asarray(obs["running_mask"]).size
    rows = running_rows(obs)
    n_wait, n_run = wait_key.size, rows.shape[0]
    ages = np.concatenate([obs["slots"][:n_wait, _AGE].astype(float), run_feature(rows, "age")])
    keys = np.concatenate([wait_key, run_key])
    run_takes = run_need if run_takes is None else run_takes
    needs = np.concatenate([wait_need, run_need]) if n_run else wait_need
    takes = np.concatenate([wait_need, run_takes]) if n_run else wait_need
    capacity = free + run_takes.sum(axis=0) if n_run else free
    keep = target_set(keys, ages, needs, capacity, takes)
    out = np.flatnonzero(~keep[n_wait:] & (mask[first_preempt : first_preempt + n_run] > 0))
    if out.size:  # the lowest priority first (ties: the later arrival)
        return first_preempt + int(out[np.lexsort((ages[n_wait + out], -run_key[out]))[0]])
    if not (exact_order or readmit):  # a job preempted in this event waits for the next one
        admissible = admissible & (obs["slots"][:n_wait, _WAS_RUNNING] == 0)
    ready = np.flatnonzero(keep[:n_wait] & admissible)
    if not ready.size:
        if n_run == 0 and admissible.any():  # nothing runs, and the mask offers none of the jobs the walk keeps
            # (``agent_orders=False`` offers only the first that fits): the best offered, not an idle cluster until
            # the end – nothing would change before the next event either.
            return admit(first_by_key(np.flatnonzero(admissible), wait_key, ages))
        return stop
    q = first_by_key(ready, wait_key, ages)
    outranked = (run_key > wait_key[q]) | ((run_key == wait_key[q]) & (ages[n_wait:] < ages[q]))
    if exact_order and outranked.any() and not outranked.all():
        # Placed ahead of every running job it would be placed before all of them; so first the
        # lowest-priority running job it outranks waits again (it is admitted again after it).
        rows_ok = outranked & (mask[first_preempt : first_preempt + n_run] > 0)
        if rows_ok.any():
            cand = np.flatnonzero(rows_ok)
            return first_preempt + int(cand[np.lexsort((ages[n_wait + cand], -run_key[cand]))[0]])
    # Ahead of the running jobs when it outranks one of them (Tune then places it first, as a
    # round planned from scratch in priority order would).
    return admit(q) + (ahead_offset(obs) if outranked.any() else 0)


def first_by_key(slots: np.ndarray, wait_key: np.ndarray, ages: np.ndarray) -> int:
    """The slot of ``slots`` with the lowest key (ties: the earlier arrival, the larger age)."""
    return int(slots[np.lexsort((-ages[slots], wait_key[slots]))[0]])


def ahead_offset(obs: dict[str, np.ndarray]) -> int:
    """What turns an admission action into the same admission placed ahead of the running jobs."""
    return int(np.asarray(obs["slot_levels"]).size // 3)


def runtime_h(rows: np.ndarray, name: str) -> np.ndarray:
    """A running row's run time feature ``name`` (squashed) in hours."""
    return np.asarray(hours(run_feature(rows, name)), dtype=float)
