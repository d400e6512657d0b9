"""A one-step policy rollout (Bertsekas) over an environment heuristic, clairvoyant by default: how much room a policy has.

At every decision the rollout policy tries candidate actions on copies of the environment
(``copy.deepcopy(env.unwrapped)``): each copy takes the candidate, then the *base* heuristic
(``srtf+price`` by default, :mod:`synergy_gym.baselines.env_heuristics`) finishes the whole episode, and the
candidate whose episode has the least total JCT is taken (ties: the base heuristic's own action,
then the lowest action index). The real environment then takes that action, and so on.

**Sampled decisions.** With ``every`` = K > 1 only every K-th decision (the first, the (K+1)-th,
...) is improved, the others take the base action: the cost falls K-fold. The gain is not a bound on
the full rollout's either way (an improvement changes the states later decisions see), only a
measure of how often and how much single decisions beat the base: how the preemptive mode (about
1,900 decisions and 85 valid actions a decision; ``all`` or ``heuristics`` candidates, :func:`check_env`) is measured.

**Clairvoyant** (``future="known"``, the default). The copies hold the episode's whole workload, so
each rollout sees every future arrival and every job's true run time: *not* a policy an agent with
the environment's information could run, but an optimistic reference for what a policy can gain over
the base on a given workload (not an upper bound on all policies either: one rollout step is one
policy-improvement step).

**Hidden future** (``future="hidden"``). Each copy first forgets the jobs that have not arrived
(:meth:`~synergy_gym.sim.simulator.Simulator.forget_future`) and scores a candidate by the total JCT
of the jobs already there: a policy with the environment's information, which may be worse than the base.

**Sampled futures** (``future="sampled"``, ``futures`` = N). At each sampled decision N model environments
keep the jobs that have arrived and draw the jobs to come from the scenario's generator
(:func:`~synergy_gym.baselines.sampled_futures.future_models`); a candidate's value is its mean total JCT
over the N models (the same N for every candidate: a paired comparison). Also the environment's information.

**No worse than the base** (known future). The base action is always a candidate, so the value of the
chosen action never exceeds that of following the base from the current state, which is (by
determinism) the value chosen one decision earlier: the episode's total JCT is at most the
base heuristic's (sequential improvement; :meth:`RolloutPolicy.run_episode` asserts it).

**Candidate sets** (``all``, ``reduced``, ``heuristics``): :mod:`synergy_gym.baselines.rollout_candidates`.

**Departing only when the futures agree** (``depart="agree"``, sampled futures). By default the
candidate with the least mean wins; with many candidates and few futures that is mostly the one
whose futures were luckiest (a winner's curse). ``agree`` takes a candidate other than the base only
if it beats the base on every sampled future, and then the best mean among those that do.

**Cost.** One full-episode base rollout per candidate per sampled decision (with a known future the
base candidate's value carries over from the previous decision; with N sampled futures, N rollouts
per candidate, the base one included, after N model environments replay the episode so far). On
``Synergy-small-scarce-v0`` (~300 decisions, ~47 valid actions, ~28 after dedupe, ~14 ``reduced``)
a rollout episode takes a few minutes on one core; with ``preemptive=True`` a sampled decision takes
30–90 s (``--every 100``: 488–1,799 s an episode; with 2 sampled futures, 729–1,943 s); with the
``heuristics`` candidates (4.6 on average) 1–3 s (``--every 50``: 55–110 s an episode; with 8 sampled
futures and ``--depart agree``, 754–1,139 s).

    python -m synergy_gym.baselines.rollout_bound --env Synergy-small-scarce-v0 --base srtf+price \\
        --seeds 1000000..1000004 --json docs/results/rollout_bound_small_scarce.json
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import synergy_gym  # registers the environments
from synergy_gym.baselines.base_episode import base_action, base_episode, finish_with_base, total_jct_s
from synergy_gym.baselines.env_heuristics import VARIANT_NAMES, EnvHeuristic, env_heuristic
from synergy_gym.baselines.rollout_candidates import BASE_NAMES, CANDIDATE_SETS, candidate_actions, deterministic_heuristics
from synergy_gym.baselines.rollout_rows import SeedRow, summary_line, write_rows
from synergy_gym.baselines.sampled_futures import future_models
from synergy_gym.baselines.seed_pool import check_count, check_workers, results_in_order
from synergy_gym.cli.args import parse_seed_list, usage_error
from synergy_gym.cli.files import check_output_file
from synergy_gym.errors import ConfigError, SynergyGymError, UnknownNameError

#: What the copies know of the future: every arrival (clairvoyant), none, or arrivals drawn anew (see the docstring).
FUTURES: tuple[str, ...] = ("known", "hidden", "sampled")
#: When the rollout may leave the base action (see the docstring): the least mean, or only if every future agrees.
DEPARTURE_RULES: tuple[str, ...] = ("best", "agree")
#: Two totals closer than this (job-seconds) are a tie (they differ only by float summation order).
TIE_TOLERANCE_S = 1e-6
#: The possible bases: the deterministic environment heuristics and their named variants.
BASES: tuple[str, ...] = BASE_NAMES + VARIANT_NAMES


def base_policy(name: str) -> EnvHeuristic:
    """The environment heuristic ``name`` (one of :data:`BASES`), or :class:`UnknownNameError`."""
    if name not in BASES:
        raise UnknownNameError("base policy", name, BASES)
    return env_heuristic(name)


def check_env(env: Any, candidates: str, preemptive_named: str = "env kwarg preemptive=True") -> None:
    """Refuse (:class:`~synergy_gym.errors.ConfigError`) ``reduced`` candidates in a preemptive environment
    (``env`` itself, or ``None`` with ``preemptive_named`` the flag that asks for one).

    They decode every action as a slot admission; a preemptive environment's ahead admissions
    and preemptions are not.
    """
    preemptive = env is None or env.unwrapped.cfg.preemptive
    if preemptive and candidates == "reduced":
        raise ConfigError(f"--candidates {candidates} runs only non-preemptive environments ({preemptive_named} "
                          "needs --candidates all or heuristics)")


def check_env_id_and_json(env_id: str, json_path: Path | None) -> None:
    """Refuse, before any rollout, an environment id that is not one of the project's scenarios (the heuristics
    read its observations and masks) and a ``--json`` path that cannot be written (a folder, a missing parent)."""
    if env_id not in synergy_gym.SCENARIOS:
        raise UnknownNameError("environment id", env_id, tuple(synergy_gym.SCENARIOS))
    if json_path is not None:
        check_output_file(json_path, "--json")


@dataclass
class Decision:
    """What the rollout did at one decision."""

    action: int
    base_action: int
    value_s: float  # total JCT if the chosen action is followed by the base heuristic (the mean over sampled futures)
    base_value_s: float  # the same for the base action
    candidates: int  # candidate actions evaluated (after dedupe; the base one included)
    rollouts: int  # episodes simulated for this decision (one per candidate and sampled future)


@dataclass
class RolloutPolicy:
    """One-step rollout over ``base``: try each candidate on a copy, finish the episode with ``base``, keep the best.

    Clairvoyant by default (the copies hold the future workload); see the module docstring. Use
    :meth:`run_episode` for a whole episode (with a known future it reuses the base candidate's
    value across decisions), or :meth:`decide` for one decision.
    """

    base_name: str = "srtf+price"
    candidates: str = "all"
    dedupe: bool = True
    every: int = 1  # improve every ``every``-th decision only (the module docstring's sampled decisions)
    future: str = "known"  # one of FUTURES
    futures: int = 2  # futures drawn per sampled decision (``future="sampled"``)
    depart: str = "best"  # one of DEPARTURE_RULES
    base: EnvHeuristic = field(init=False, repr=False)
    heuristics: dict[str, EnvHeuristic] = field(init=False, repr=False)  # the ``heuristics`` candidates' policies

    def __post_init__(self) -> None:
        self.base = base_policy(self.base_name)
        if self.candidates not in CANDIDATE_SETS:
            raise UnknownNameError("candidate set", self.candidates, CANDIDATE_SETS)
        self.every = check_count("--every", self.every)
        if self.future not in FUTURES:
            raise UnknownNameError("future", self.future, FUTURES)
        self.futures = check_count("--futures", self.futures)
        if self.depart not in DEPARTURE_RULES:
            raise UnknownNameError("departure rule", self.depart, DEPARTURE_RULES)
        if self.depart == "agree" and self.future != "sampled":
            raise ConfigError(f"--depart agree applies only with --future sampled, not --future {self.future}")
        self.heuristics = deterministic_heuristics()

    # -- candidates ------------------------------------------------------------------------
    def candidate_actions(self, env: Any, obs: dict[str, np.ndarray], base_act: int) -> list[int]:
        """The candidate actions in ``env``'s current state: the base action first, then by index
        (:func:`~synergy_gym.baselines.rollout_candidates.candidate_actions`)."""
        return candidate_actions(env, obs, base_act, self.candidates, self.base, self.heuristics, self.dedupe)

    # -- evaluation --------------------------------------------------------------------------
    def value(self, env: Any, action: int) -> float:
        """Total JCT (s) of the episode if ``env`` takes ``action`` now and ``base`` finishes it (``env`` untouched)."""
        twin = copy.deepcopy(env.unwrapped)
        if self.future == "hidden":
            twin.sim.forget_future()
        obs, _, terminated, truncated, _ = twin.step(action)
        if terminated or truncated:
            return total_jct_s(twin)
        return finish_with_base(twin, obs, self.base)[0]

    def decide(
        self, env: Any, obs: dict[str, np.ndarray], base_value_s: float | None = None, seed: int | None = None,
        history: Sequence[int] = (),
    ) -> Decision:
        """The rollout's action in ``env``'s current state; ``base_value_s``, if known (a known future only), spares the
        base candidate's rollout.

        Sampled futures need the episode's workload ``seed`` and the actions taken since its reset (``history``).
        """
        if base_value_s is not None and self.future != "known":
            raise ConfigError(f"base_value_s carries over only with a known future, not future={self.future!r}")
        b = base_action(self.base, env, obs)
        actions = self.candidate_actions(env, obs, b)
        if self.future == "sampled":
            if seed is None:
                raise ConfigError("a rollout over sampled futures needs the episode's workload seed")
            models = future_models(env, seed, history, self.futures)
        else:
            models = [env]
        rollouts = 0
        per_future: list[np.ndarray] = []  # each candidate's total JCT on each model
        for a in actions:
            if a == b and base_value_s is not None:
                per_future.append(np.array([base_value_s]))
            else:
                per_future.append(np.array([self.value(m, a) for m in models]))
                rollouts += len(models)
        values = [float(v.mean()) for v in per_future]
        allowed = list(range(len(actions)))  # the candidates that may win: all, or with ``agree`` the base and those
        if self.depart == "agree":  # better than it on every future
            allowed = [k for k in allowed if k == 0 or bool(np.all(per_future[k] < per_future[0] - TIE_TOLERANCE_S))]
        best = min(values[k] for k in allowed)
        if values[0] <= best + TIE_TOLERANCE_S:  # the base action wins ties
            i = 0
        else:
            i = next(k for k in allowed if values[k] <= best + TIE_TOLERANCE_S)
        return Decision(
            action=actions[i], base_action=b, value_s=values[i], base_value_s=values[0], candidates=len(actions),
            rollouts=rollouts,
        )

    def run_episode(self, env: Any, seed: int, verify: bool = False) -> RolloutEpisode:
        """Run one episode of ``env`` (workload seed ``seed``) with the rollout policy.

        ``verify`` re-simulates the base candidate at every sampled decision instead of reusing the
        value carried from the previous one, and asserts that both agree (the copy is faithful).
        """
        check_env(env, self.candidates)
        started = time.perf_counter()
        obs, _ = env.reset(seed=int(seed), options={"workload_seed": int(seed)})
        u = env.unwrapped
        carry = self.future == "known"  # else no value carries over: each decision scores its own base candidate
        known: float | None = None
        decisions: list[Decision] = []
        info: dict[str, Any] = {}
        while True:
            if len(decisions) % self.every:  # not sampled: the base action (its value is known, or not used)
                b = base_action(self.base, env, obs)
                v = math.nan if known is None else known
                d = Decision(action=b, base_action=b, value_s=v, base_value_s=v, candidates=1, rollouts=0)
            else:
                d = self.decide(env, obs, known if carry and not verify else None, seed, [d.action for d in decisions])
            if verify and known is not None and abs(d.base_value_s - known) > TIE_TOLERANCE_S:
                raise AssertionError(f"base rollout {d.base_value_s} s differs from the previous decision's value {known} s")
            decisions.append(d)
            obs, _, terminated, truncated, info = env.step(d.action)
            known = d.value_s if carry else None
            if terminated or truncated:
                break
        total = total_jct_s(u)
        if carry and abs(total - d.value_s) > TIE_TOLERANCE_S:
            raise AssertionError(f"the episode's total JCT {total} s differs from its last rollout's {d.value_s} s")
        sampled = decisions[:: self.every]
        kinds = Counter(f"{u.layout.kind(d.base_action)} -> {u.layout.kind(d.action)}"
                        for d in decisions if d.action != d.base_action)
        return RolloutEpisode(
            seed=int(seed), mean_jct_h=float(info["mean_jct_h"]), total_jct_s=total, decisions=len(decisions),
            deviations=sum(d.action != d.base_action for d in decisions),
            rollouts=sum(d.rollouts for d in decisions),
            mean_candidates=float(np.mean([d.candidates for d in sampled])), sampled=len(sampled),
            deviation_kinds=dict(sorted(kinds.items())), truncated=bool(truncated), wall_s=time.perf_counter() - started,
            actions=[d.action for d in decisions],
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
    mean_candidates: float  # over the sampled decisions
    sampled: int  # decisions the rollout tried to improve (all with ``every`` = 1)
    deviation_kinds: dict[str, int]  # deviations by "base action's kind -> chosen action's kind"
    truncated: bool
    wall_s: float
    actions: list[int]


def compare_seed(env_id: str, policy: RolloutPolicy, seed: int, env_kwargs: dict[str, Any] | None = None) -> SeedRow:
    """Base and rollout on one workload seed, the same way ``synergy_gym.evaluate`` scores an episode."""
    env = gym.make(env_id, **(env_kwargs or {}))
    try:
        check_env(env, policy.candidates)  # before the base episode
        base_h, base_total = base_episode(env, policy.base, seed)
        ep = policy.run_episode(env, seed)
    finally:
        env.close()
    if policy.future == "known" and ep.total_jct_s > base_total + TIE_TOLERANCE_S:  # sequential improvement
        raise AssertionError(f"seed {seed}: rollout total JCT {ep.total_jct_s} s exceeds the base's {base_total} s")
    return SeedRow(
        seed=int(seed), base_mean_jct_h=base_h, rollout_mean_jct_h=ep.mean_jct_h,
        diff_pct=100.0 * (ep.mean_jct_h - base_h) / base_h, decisions=ep.decisions, deviations=ep.deviations,
        rollouts=ep.rollouts, mean_candidates=ep.mean_candidates, truncated=ep.truncated, wall_s=ep.wall_s,
        sampled=ep.sampled, deviation_kinds=ep.deviation_kinds,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m synergy_gym.baselines.rollout_bound", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--env", default="Synergy-small-scarce-v0", help="environment id (default Synergy-small-scarce-v0)")
    parser.add_argument("--preemptive", action="store_true", help="make the environment with preemptive=True")
    parser.add_argument("--base", default="srtf+price", help=f"base heuristic: {', '.join(BASES)} (default srtf+price)")
    parser.add_argument("--seeds", default="1000000..1000004", help="workload seeds: 1000000..1000019 or a,b,c")
    parser.add_argument("--candidates", default="all", help=f"candidate set: {', '.join(CANDIDATE_SETS)} (default all)")
    parser.add_argument("--no-dedupe", action="store_true", help="evaluate actions with identical effect separately")
    parser.add_argument("--every", type=int, default=1, help="improve every K-th decision only (default 1: all)")
    parser.add_argument("--future", default="known",
                        help="known: the copies see every arrival (clairvoyant); hidden: none to come; sampled: "
                             "drawn from the scenario's generator (default known)")
    parser.add_argument("--futures", type=int, default=None, help="futures per decision, --future sampled (default 2)")
    parser.add_argument("--depart", default="best",
                        help="best: the least mean over the futures; agree: leave the base action only for one that "
                             "beats it on every sampled future (default best)")
    parser.add_argument("--workers", type=int, default=1, help="seeds run in parallel processes (default 1)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write the rows and summary to this file, in an existing folder (rewritten after each seed)")
    args = parser.parse_args(argv)
    env_kwargs = {"preemptive": True} if args.preemptive else {}
    try:
        seeds = parse_seed_list(args.seeds, "--seeds")
        check_workers(args.workers)
        policy = RolloutPolicy(args.base, args.candidates, dedupe=not args.no_dedupe, every=args.every, future=args.future,
                               futures=2 if args.futures is None else args.futures, depart=args.depart)
        if args.futures is not None and args.future != "sampled":
            raise ConfigError(f"--futures applies only with --future sampled, not --future {args.future}")
        check_env_id_and_json(args.env, args.json)
        if args.preemptive:
            check_env(None, args.candidates, "--preemptive")
    except SynergyGymError as exc:
        return usage_error(parser, exc)
    meta = {"env": args.env, "env_kwargs": env_kwargs, "base": args.base, "candidates": args.candidates,
            "dedupe": policy.dedupe, "every": policy.every, "future": policy.future,
            **({"futures": policy.futures, "depart": policy.depart} if policy.future == "sampled" else {}),
            "clairvoyant": policy.future == "known",
            "jct": "mean over all jobs of the episode, hours (info['mean_jct_h'])"}
    rows: list[SeedRow] = []
    sampled = f", one decision in {policy.every} improved" if policy.every > 1 else ""
    sampled += {"known": "", "hidden": ", future hidden (the environment's information)",
                "sampled": f", {policy.futures} sampled future{'s' * (policy.futures > 1)} (the environment's information)"
                           f"{', departing only where they agree' * (policy.depart == 'agree')}",
                }[policy.future]
    print(f"{args.env}{f' {env_kwargs}' if env_kwargs else ''}, rollout over {args.base}, candidates={args.candidates}"
          f"{'' if policy.dedupe else ' (no dedupe)'}{sampled}")
    print(f"{'seed':>8} {'base h':>9} {'rollout h':>10} {'diff %':>8} {'decisions':>9} {'sampled':>7} {'deviations':>10} "
          f"{'cand':>6} {'wall s':>8}")
    tasks = [(args.env, policy, seed, env_kwargs) for seed in seeds]
    try:
        with results_in_order(compare_seed, tasks, args.workers) as results:
            for r in results:
                rows.append(r)
                print(f"{r.seed:>8} {r.base_mean_jct_h:>9.3f} {r.rollout_mean_jct_h:>10.3f} {r.diff_pct:>+8.2f} "
                      f"{r.decisions:>9} {r.sampled:>7} {r.deviations:>10} {r.mean_candidates:>6.1f} {r.wall_s:>8.1f}",
                      flush=True)
                if args.json is not None:
                    write_rows(args.json, meta, rows)
    except SynergyGymError as exc:  # e.g. an environment setting the scenario refuses (raised in a worker too)
        return usage_error(parser, exc)
    print(summary_line(rows, "per rollout episode"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
