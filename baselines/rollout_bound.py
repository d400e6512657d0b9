"""A clairvoyant one-step policy rollout (Bertsekas) over an environment heuristic: how much room a non-preemptive policy has.

At every decision the rollout policy tries candidate actions on copies of the environment
(``copy.deepcopy(env.unwrapped)``): each copy takes the candidate, then the *base* heuristic
(``srtf+price`` by default, :mod:`synergy_gym.baselines.env_heuristics`) finishes the whole episode, and the
candidate whose episode has the least total JCT is taken (ties: the base heuristic's own action,
then the lowest action index). The real environment then takes that action, and so on. Only
non-preemptive environments: one with ``preemptive=True`` is refused (:func:`check_env`) before any work.

**Clairvoyant.** The copies hold the episode's whole workload, so each rollout sees every future
arrival and every job's true run time. The policy is therefore *not* one an agent with the
environment's information could run; it is an optimistic reference for what a non-preemptive
policy can gain over the base heuristic on a given workload (not an upper bound on all
policies either: one-step rollout is one policy-improvement step, not the optimum).

**No worse than the base.** The base action is always a candidate, so the value of the chosen
action never exceeds that of following the base from the current state, which is (by
determinism) the value chosen one decision earlier: the episode's total JCT is at most the
base heuristic's (sequential improvement; :meth:`RolloutPolicy.run_episode` asserts it).

**Candidate sets.**

* ``all``: every valid action (mask true), stop included. With ``dedupe`` (default) actions
  that admit the same job at the same CPU and memory target (two allocation levels that are
  the same grid point) are evaluated once: the environment's state after either differs only
  in the level index it records, which neither the observation nor the simulator reads.
* ``reduced``: the base action, stop, every valid slot at the level the base heuristic would
  give that slot (``srtf+price``: max speed-up − λ · cost; the ``+tune`` heuristics: the
  demand level; others: the demand level), and every valid level of the base action's slot.

**Cost.** One full-episode base rollout per candidate per decision, i.e. about
``Σ_k candidates_k · (episode remaining after k)`` environment steps; the base candidate's
value is known from the previous decision (it continues the trajectory that decision chose)
and is not re-simulated. On ``Synergy-small-scarce-v0`` (300 jobs, ~300 decisions, ~47 valid
actions per decision, ~28 after dedupe, ~14 ``reduced``) a base episode takes ~0.1 s and
a rollout episode a few minutes on one core (see ``docs/results/rollout_bound_small_scarce.json``).

    python -m synergy_gym.baselines.rollout_bound --env Synergy-small-scarce-v0 --base srtf+price \\
        --seeds 1000000..1000004 --json docs/results/rollout_bound_small_scarce.json
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import synergy_gym  # registers the environments
from synergy_gym.baselines.env_heuristics import EnvHeuristic, PriceAllocator, env_heuristics
from synergy_gym.cli.args import parse_seed_list
from synergy_gym.cli.files import atomic_write_text, check_output_file
from synergy_gym.cli.results_json import json_safe
from synergy_gym.errors import ConfigError, SynergyGymError, UnknownNameError
from synergy_gym.experiments.statistics import ci95_half_width

#: Candidate sets (see the module docstring).
CANDIDATE_SETS: tuple[str, ...] = ("all", "reduced")
#: Base heuristics a rollout can use: the deterministic ones (``random`` would make rollouts unrepeatable).
BASE_NAMES: tuple[str, ...] = tuple(n for n in env_heuristics() if n != "random")
#: Two totals closer than this (job-seconds) are a tie (they differ only by float summation order).
TIE_TOLERANCE_S = 1e-6


def base_policy(name: str) -> EnvHeuristic:
    """The environment heuristic ``name`` (one of :data:`BASE_NAMES`), or :class:`UnknownNameError`."""
    if name not in BASE_NAMES:
        raise UnknownNameError("base policy", str(name), BASE_NAMES)
    return env_heuristics()[name]


def check_env(env: Any) -> None:
    """Refuse (:class:`~synergy_gym.errors.ConfigError`) an environment the rollout cannot run: a preemptive one.

    The candidates decode every action as a slot admission; a preemptive environment's ahead
    admissions and preemptions are not, and the rollout measures non-preemptive policies.
    """
    if env.unwrapped.cfg.preemptive:
        raise ConfigError("the rollout runs only non-preemptive environments, got env kwarg preemptive=True")


def check_env_id_and_json(env_id: str, json_path: Path | None) -> None:
    """Refuse, before any rollout, an environment id that is not one of the project's scenarios (the heuristics
    read its observations and masks) and a ``--json`` path that cannot be written (a folder, a missing parent)."""
    if env_id not in synergy_gym.SCENARIOS:
        raise UnknownNameError("environment id", env_id, tuple(synergy_gym.SCENARIOS))
    if json_path is not None:
        check_output_file(json_path, "--json")


def total_jct_s(env: Any) -> float:
    """Sum of the JCTs (seconds) of the jobs that have arrived; an unfinished one counts with its time so far.

    The same jobs and convention as the episode summary's ``mean_jct_h``
    (:func:`synergy_gym.env.summary.episode_summary`): at the end of an episode it is
    ``mean_jct_h · 3600 · jobs counted``.
    """
    sim = env.unwrapped.sim
    jobs = sim.jobs
    arrived = jobs.arrival_s <= sim.now
    finish = np.where(np.isnan(jobs.finish_s), sim.now, jobs.finish_s)
    return float((finish - jobs.arrival_s)[arrived].sum())


def base_action(base: EnvHeuristic, env: Any, obs: dict[str, np.ndarray]) -> int:
    """The base heuristic's action in ``env``'s current state (``obs`` its observation)."""
    action, _ = base.predict(obs, action_masks=env.unwrapped.action_masks())
    return int(np.asarray(action).item())


def finish_with_base(env: Any, obs: dict[str, np.ndarray], base: EnvHeuristic) -> tuple[float, dict[str, Any]]:
    """Run ``env`` (already mid-episode, ``obs`` its observation) to the end with ``base``: (total JCT s, final info)."""
    u = env.unwrapped
    while True:
        obs, _, terminated, truncated, info = u.step(base_action(base, u, obs))
        if terminated or truncated:
            return total_jct_s(u), info


@dataclass
class Decision:
    """What the rollout did at one decision."""

    action: int
    base_action: int
    value_s: float  # total JCT of the episode if the chosen action is followed by the base heuristic
    base_value_s: float  # the same for the base action
    candidates: int  # candidate actions evaluated (after dedupe; the base one included)
    rollouts: int  # episodes simulated for this decision


@dataclass
class RolloutPolicy:
    """One-step rollout over ``base``: try each candidate on a copy, finish the episode with ``base``, keep the best.

    Clairvoyant (the copies hold the future workload); see the module docstring. Use
    :meth:`run_episode` for a whole episode (it reuses the base candidate's value across
    decisions), or :meth:`decide` for one decision.
    """

    base_name: str = "srtf+price"
    candidates: str = "all"
    dedupe: bool = True
    base: EnvHeuristic = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.base = base_policy(self.base_name)
        if self.candidates not in CANDIDATE_SETS:
            raise UnknownNameError("candidate set", str(self.candidates), CANDIDATE_SETS)

    # -- candidates ------------------------------------------------------------------------
    def _slot_level(self, obs: dict[str, np.ndarray], mask: np.ndarray, slot: int) -> int:
        """The level the base heuristic would give ``slot`` if it chose that slot."""
        if isinstance(self.base, PriceAllocator):
            return self.base.level(obs, mask, slot)
        return EnvHeuristic.demand_level(obs, mask, slot)

    def candidate_actions(self, env: Any, obs: dict[str, np.ndarray], base_act: int) -> list[int]:
        """The candidate actions in ``env``'s current state: the base action first, then by index."""
        u = env.unwrapped
        mask = np.asarray(u.action_masks(), dtype=bool)
        n_levels, stop = u.layout.n_levels, u.layout.stop
        if self.candidates == "all":
            chosen = set(np.flatnonzero(mask).tolist())
        else:
            sobs = EnvHeuristic.structured(obs)
            chosen = {stop}
            for slot in EnvHeuristic.valid_slots(sobs, mask):
                chosen.add(int(slot) * n_levels + self._slot_level(sobs, mask, int(slot)))
            if base_act != stop:
                slot = base_act // n_levels
                chosen.update(slot * n_levels + int(k) for k in np.flatnonzero(mask[slot * n_levels : (slot + 1) * n_levels]))
        chosen.discard(base_act)
        ordered = [base_act, *sorted(chosen)]
        if not self.dedupe:
            return ordered
        slot_jobs = u.slot_jobs
        seen: set[tuple] = set()
        kept: list[int] = []
        for a in ordered:
            if a == stop:
                key: tuple = ("stop",)
            else:
                j, level = int(slot_jobs[a // n_levels]), a % n_levels
                key = (j, float(u.state.level_cpu[j, level]), float(u.state.level_mem[j, level]))
            if key not in seen:
                seen.add(key)
                kept.append(a)
        return kept

    # -- evaluation --------------------------------------------------------------------------
    def value(self, env: Any, action: int) -> float:
        """Total JCT (s) of the episode if ``env`` takes ``action`` now and ``base`` finishes it (``env`` untouched)."""
        twin = copy.deepcopy(env.unwrapped)
        obs, _, terminated, truncated, _ = twin.step(action)
        if terminated or truncated:
            return total_jct_s(twin)
        return finish_with_base(twin, obs, self.base)[0]

    def decide(self, env: Any, obs: dict[str, np.ndarray], base_value_s: float | None = None) -> Decision:
        """The rollout's action in ``env``'s current state; ``base_value_s``, if known, spares the base candidate's rollout."""
        b = base_action(self.base, env, obs)
        actions = self.candidate_actions(env, obs, b)
        rollouts = 0
        values: list[float] = []
        for a in actions:
            if a == b and base_value_s is not None:
                values.append(base_value_s)
            else:
                values.append(self.value(env, a))
                rollouts += 1
        best = min(values)
        if values[0] <= best + TIE_TOLERANCE_S:  # the base action wins ties
            i = 0
        else:
            i = next(k for k, v in enumerate(values) if v <= best + TIE_TOLERANCE_S)
        return Decision(
            action=actions[i], base_action=b, value_s=values[i], base_value_s=values[0], candidates=len(actions),
            rollouts=rollouts,
        )

    def run_episode(self, env: Any, seed: int, verify: bool = False) -> RolloutEpisode:
        """Run one episode of ``env`` (workload seed ``seed``) with the rollout policy.

        ``verify`` re-simulates the base candidate at every decision instead of reusing the
        previous decision's value, and asserts that both agree (the copy is faithful).
        """
        check_env(env)
        started = time.perf_counter()
        obs, _ = env.reset(seed=int(seed), options={"workload_seed": int(seed)})
        u = env.unwrapped
        known: float | None = None
        decisions: list[Decision] = []
        info: dict[str, Any] = {}
        while True:
            d = self.decide(env, obs, None if verify else known)
            if verify and known is not None and abs(d.base_value_s - known) > TIE_TOLERANCE_S:
                raise AssertionError(f"base rollout {d.base_value_s} s differs from the previous decision's value {known} s")
            decisions.append(d)
            obs, _, terminated, truncated, info = env.step(d.action)
            known = d.value_s
            if terminated or truncated:
                break
        total = total_jct_s(u)
        if abs(total - d.value_s) > TIE_TOLERANCE_S:
            raise AssertionError(f"the episode's total JCT {total} s differs from its last rollout's {d.value_s} s")
        return RolloutEpisode(
            seed=int(seed), mean_jct_h=float(info["mean_jct_h"]), total_jct_s=total, decisions=len(decisions),
            deviations=sum(d.action != d.base_action for d in decisions),
            rollouts=sum(d.rollouts for d in decisions),
            mean_candidates=float(np.mean([d.candidates for d in decisions])),
            truncated=bool(truncated), wall_s=time.perf_counter() - started, actions=[d.action for d in decisions],
        )


@dataclass
class RolloutEpisode:
    """One rollout episode."""

    seed: int
    mean_jct_h: float
    total_jct_s: float
    decisions: int
    deviations: int  # decisions where the rollout did not take the base heuristic's action
    rollouts: int  # base-finished episodes simulated
    mean_candidates: float
    truncated: bool
    wall_s: float
    actions: list[int]


@dataclass
class SeedRow:
    """One row of the JSON: base and rollout on one workload seed."""

    seed: int
    base_mean_jct_h: float
    rollout_mean_jct_h: float
    diff_pct: float  # (rollout − base) / base · 100
    decisions: int
    deviations: int
    rollouts: int
    mean_candidates: float
    truncated: bool
    wall_s: float


def base_episode(env: Any, base: EnvHeuristic, seed: int) -> tuple[float, float]:
    """The base heuristic's episode on workload ``seed``: (mean JCT h from the final info, total JCT s)."""
    obs, _ = env.reset(seed=int(seed), options={"workload_seed": int(seed)})
    total, info = finish_with_base(env, obs, base)
    return float(info["mean_jct_h"]), total


def compare_seed(env_id: str, policy: RolloutPolicy, seed: int, env_kwargs: dict[str, Any] | None = None) -> SeedRow:
    """Base and rollout on one workload seed, the same way ``synergy_gym.evaluate`` scores an episode."""
    env = gym.make(env_id, **(env_kwargs or {}))
    try:
        check_env(env)  # before the base episode
        base_h, base_total = base_episode(env, policy.base, seed)
        ep = policy.run_episode(env, seed)
    finally:
        env.close()
    if ep.total_jct_s > base_total + TIE_TOLERANCE_S:  # sequential improvement
        raise AssertionError(f"seed {seed}: rollout total JCT {ep.total_jct_s} s exceeds the base's {base_total} s")
    return SeedRow(
        seed=int(seed), base_mean_jct_h=base_h, rollout_mean_jct_h=ep.mean_jct_h,
        diff_pct=100.0 * (ep.mean_jct_h - base_h) / base_h, decisions=ep.decisions, deviations=ep.deviations,
        rollouts=ep.rollouts, mean_candidates=ep.mean_candidates, truncated=ep.truncated, wall_s=ep.wall_s,
    )


def summary(rows: list[SeedRow]) -> dict[str, float]:
    """Means over seeds and the paired difference (mean and 95 % CI half-width, t-distribution; NaN for one seed:
    printed ``-``, ``null`` in the JSON)."""
    base = np.array([r.base_mean_jct_h for r in rows])
    roll = np.array([r.rollout_mean_jct_h for r in rows])
    diff = roll - base
    ci = float(ci95_half_width(diff.std(ddof=1), len(rows))) if len(rows) > 1 else float("nan")
    return {
        "episodes": len(rows), "base_mean_jct_h": float(base.mean()), "rollout_mean_jct_h": float(roll.mean()),
        "paired_diff_h": float(diff.mean()), "paired_diff_ci95_h": ci,
        "paired_diff_pct": float(100.0 * diff.mean() / base.mean()),
        "mean_of_seed_pct": float(np.mean([r.diff_pct for r in rows])),
        "mean_wall_s": float(np.mean([r.wall_s for r in rows])),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m synergy_gym.baselines.rollout_bound", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--env", default="Synergy-small-scarce-v0", help="environment id (default Synergy-small-scarce-v0)")
    parser.add_argument("--base", default="srtf+price", help=f"base heuristic: {', '.join(BASE_NAMES)} (default srtf+price)")
    parser.add_argument("--seeds", default="1000000..1000004", help="workload seeds: 1000000..1000019 or a,b,c")
    parser.add_argument("--candidates", default="all", help=f"candidate set: {', '.join(CANDIDATE_SETS)} (default all)")
    parser.add_argument("--no-dedupe", action="store_true", help="evaluate actions with identical effect separately")
    parser.add_argument("--json", type=Path, default=None,
                        help="write the rows and summary to this file, in an existing folder (rewritten after each seed)")
    args = parser.parse_args(argv)
    try:
        seeds = parse_seed_list(args.seeds, "--seeds")
        policy = RolloutPolicy(args.base, args.candidates, dedupe=not args.no_dedupe)
        check_env_id_and_json(args.env, args.json)
    except SynergyGymError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    meta = {"env": args.env, "base": args.base, "candidates": args.candidates, "dedupe": policy.dedupe,
            "clairvoyant": True, "jct": "mean over all jobs of the episode, hours (info['mean_jct_h'])"}
    rows: list[SeedRow] = []
    print(f"{args.env}, rollout over {args.base}, candidates={args.candidates}{'' if policy.dedupe else ' (no dedupe)'}")
    print(f"{'seed':>8} {'base h':>9} {'rollout h':>10} {'diff %':>8} {'decisions':>9} {'deviations':>10} {'cand':>6} "
          f"{'wall s':>8}")
    for seed in seeds:
        try:
            r = compare_seed(args.env, policy, seed)
        except SynergyGymError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        rows.append(r)
        print(f"{r.seed:>8} {r.base_mean_jct_h:>9.3f} {r.rollout_mean_jct_h:>10.3f} {r.diff_pct:>+8.2f} {r.decisions:>9} "
              f"{r.deviations:>10} {r.mean_candidates:>6.1f} {r.wall_s:>8.1f}", flush=True)
        if args.json is not None:
            record = {**meta, "summary": summary(rows), "rows": [asdict(x) for x in rows]}
            atomic_write_text(args.json, json.dumps(json_safe(record), indent=1, allow_nan=False) + "\n")
    s = summary(rows)
    ci = "-" if math.isnan(s["paired_diff_ci95_h"]) else f"{s['paired_diff_ci95_h']:.3f}"  # one seed: no CI
    print(f"mean: base {s['base_mean_jct_h']:.3f} h, rollout {s['rollout_mean_jct_h']:.3f} h, paired "
          f"{s['paired_diff_h']:+.3f} h ± {ci} ({s['paired_diff_pct']:+.2f} %), "
          f"{s['mean_wall_s']:.0f} s per rollout episode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
