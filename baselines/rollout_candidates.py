"""The candidate actions a one-step rollout tries at a decision (:mod:`synergy_gym.baselines.rollout_bound`).

* ``all``: every valid action (mask true), stop and preemptions included.
* ``reduced``: the base action, stop, every valid slot at the level the base heuristic would give
  that slot (``fifo+price``, ``srtf+price``: max speed-up − λ · cost; the others: the demand level), and every valid
  level of the base action's slot. Non-preemptive environments only (it reads every action as a slot
  admission).
* ``heuristics``: the base action and the action each deterministic environment heuristic
  (:data:`BASE_NAMES`) would take in this state, in either mode: at most seven, 4.6 on average at the sampled
  decisions of the preemptive ``Synergy-small-scarce-v0``.
  A narrow set keeps a lookahead over sampled futures cheap and its pick less a matter of luck.

With ``dedupe`` (the default) actions that admit the same job at the same CPU and memory target (two
allocation levels that are the same grid point; an admission ahead of the running jobs is not the
same as one after them) are kept once: the environment's state after either differs only in the
level index it records, which neither the observation nor the simulator reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from synergy_gym.baselines.base_episode import base_action
from synergy_gym.baselines.env_heuristics import EnvHeuristic, PriceAllocator, env_heuristics
from synergy_gym.errors import ConfigError, UnknownNameError

#: Candidate sets (see the module docstring).
CANDIDATE_SETS: tuple[str, ...] = ("all", "reduced", "heuristics")
#: The deterministic environment heuristics (``random`` would make rollouts unrepeatable): a rollout's possible bases
#: and the ``heuristics`` candidates.
BASE_NAMES: tuple[str, ...] = tuple(n for n in env_heuristics() if n != "random")


def deterministic_heuristics() -> dict[str, EnvHeuristic]:
    """A fresh instance of each of :data:`BASE_NAMES`, by name."""
    return {name: policy for name, policy in env_heuristics().items() if name in BASE_NAMES}


def _slot_level(base: EnvHeuristic, obs: dict[str, np.ndarray], mask: np.ndarray, slot: int) -> int:
    """The level ``base`` would give ``slot`` if it chose that slot."""
    if isinstance(base, PriceAllocator):
        return base.level(obs, mask, slot)
    return EnvHeuristic.demand_level(obs, mask, slot)


def candidate_actions(
    env: Any, obs: dict[str, np.ndarray], base_act: int, candidates: str, base: EnvHeuristic,
    heuristics: Mapping[str, EnvHeuristic] | None = None, dedupe: bool = True,
) -> list[int]:
    """The ``candidates`` set in ``env``'s current state (``obs`` its observation): ``base_act`` first, then by index.

    ``heuristics`` are the policies of the ``heuristics`` set (default: every one of :data:`BASE_NAMES`).
    """
    u = env.unwrapped
    mask = np.asarray(u.action_masks(), dtype=bool)
    layout = u.layout
    n_levels, stop = layout.n_levels, layout.stop
    if candidates == "all":
        chosen = set(np.flatnonzero(mask).tolist())
    elif candidates == "heuristics":
        chosen = {base_action(h, u, obs) for h in (heuristics or deterministic_heuristics()).values()}
    elif candidates == "reduced":
        if u.cfg.preemptive:
            raise ConfigError("candidates 'reduced' runs only non-preemptive environments (use 'all' or 'heuristics')")
        sobs = EnvHeuristic.structured(obs)
        chosen = {stop}
        for slot in EnvHeuristic.valid_slots(sobs, mask):
            chosen.add(int(slot) * n_levels + _slot_level(base, sobs, mask, int(slot)))
        if base_act != stop:
            slot = base_act // n_levels
            chosen.update(slot * n_levels + int(k) for k in np.flatnonzero(mask[slot * n_levels : (slot + 1) * n_levels]))
    else:
        raise UnknownNameError("candidate set", candidates, CANDIDATE_SETS)
    chosen.discard(base_act)
    ordered = [base_act, *sorted(chosen)]
    return distinct_outcomes(u, ordered) if dedupe else ordered


def distinct_outcomes(u: Any, actions: list[int]) -> list[int]:
    """``actions`` without those that repeat an earlier one's effect (the same kind, job and CPU/memory target)."""
    layout, slot_jobs, n_levels = u.layout, u.slot_jobs, u.layout.n_levels
    seen: set[tuple] = set()
    kept: list[int] = []
    for a in actions:
        kind = layout.kind(a)
        if kind in ("stop", "preempt"):
            key: tuple = (kind, a)
        else:  # an admission (ahead ones are offset by ``layout.ahead``)
            slot_level = a - layout.ahead if kind == "admit ahead" else a
            j, level = int(slot_jobs[slot_level // n_levels]), slot_level % n_levels
            key = (kind, j, float(u.state.level_cpu[j, level]), float(u.state.level_mem[j, level]))
        if key not in seen:
            seen.add(key)
            kept.append(a)
    return kept
