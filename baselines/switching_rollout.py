"""A clairvoyant rollout that picks, event by event, which environment heuristic decides the event.

At the first decision of every event the rollout tries each candidate heuristic on a copy of the
environment (``copy.deepcopy(env.unwrapped)``): the copy lets that heuristic take the event's
decisions until the event ends (it stops, or nothing is left to decide), then the *base* heuristic
(``tetris+greedy`` by default) finishes the whole episode, and the candidate whose episode has the
least total JCT decides the real event (ties: the base heuristic, then the order of
``--policies``). It is one step of policy improvement (Bertsekas' rollout) over event-sized macro
actions, built for the preemptive mode (``preemptive=True``), where one event takes several
decisions and the action-level rollout of :mod:`synergy_gym.baselines.rollout_bound` would cost
hundreds of rollouts a decision; it runs in the default mode too.

**Clairvoyant.** The copies hold the episode's whole workload (every future arrival and run
time), so this is not a policy an agent with the environment's information could run: it
measures how much a policy that *mixes the project's heuristics* could gain over the base on a
given workload, knowing the future. A small gain says the room is not in choosing between these
rules; it says nothing about actions none of them takes.

**No worse than the base.** The base heuristic is always a candidate and its value is the one
chosen at the previous event (determinism), so the episode's total JCT is at most the base's
(:meth:`SwitchingRollout.run_episode` asserts it).

**Cost.** One rollout per candidate but the base per event. On ``Synergy-small-scarce-v0`` with
``preemptive=True`` (about 460 events an episode, a ``tetris+greedy`` episode about 1.1 s) and the
five default candidates, 753–1,300 s an episode (8 seeds), two episodes sharing 2 cores (``--workers 2``).

    python -m synergy_gym.baselines.switching_rollout --env Synergy-small-scarce-v0 --preemptive \\
        --seeds 1000000..1000007 --workers 2 --json docs/results/switching_rollout_small_scarce_preemptive.json
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from synergy_gym.baselines.base_episode import base_action, base_episode, finish_with_base, total_jct_s
from synergy_gym.baselines.env_heuristics import EnvHeuristic
from synergy_gym.baselines.rollout_bound import BASES, TIE_TOLERANCE_S, base_policy, check_env_id_and_json
from synergy_gym.baselines.rollout_rows import SeedRow, summary_line, write_rows
from synergy_gym.baselines.seed_pool import check_workers, results_in_order
from synergy_gym.cli.args import list_items, parse_seed_list, usage_error
from synergy_gym.errors import ConfigError, SynergyGymError

#: The candidates by default: the deterministic heuristics that preempt or pack differently.
DEFAULT_POLICIES: tuple[str, ...] = ("tetris+greedy", "tetris", "srtf+tune", "srtf+price", "las+tune")


def play_event(env: Any, obs: dict[str, Any], policy: EnvHeuristic) -> tuple[dict[str, Any], bool, bool, dict[str, Any]]:
    """Let ``policy`` take ``env``'s (unwrapped) decisions until the event ends or the episode does.

    Returns the last step's ``(obs, terminated, truncated, info)``: both flags false when only the event ended.

    An event ends when the policy stops or nothing is left to decide; either way the simulator's
    clock moves on to the next event (:mod:`synergy_gym.env.decision_loop`).
    """
    now = env.sim.now
    while True:
        obs, _, terminated, truncated, info = env.step(base_action(policy, env, obs))
        if terminated or truncated or env.sim.now != now:
            return obs, terminated, truncated, info


@dataclass
class SwitchingEpisode:
    """One episode of the switching rollout."""

    seed: int
    base_mean_jct_h: float  # the base heuristic's episode on the same workload
    mean_jct_h: float
    total_jct_s: float
    events: int
    switches: int  # events decided by a heuristic other than the base
    rollouts: int
    chosen: dict[str, int]  # events decided by each heuristic
    truncated: bool  # the episode hit the environment's round limit
    wall_s: float


@dataclass
class SwitchingRollout:
    """Per-event choice among ``policies``, each judged by finishing the episode with ``base_name`` (clairvoyant)."""

    base_name: str = "tetris+greedy"
    policies: tuple[str, ...] = DEFAULT_POLICIES
    base: EnvHeuristic = field(init=False, repr=False)
    candidates: dict[str, EnvHeuristic] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.base = base_policy(self.base_name)
        names = list(dict.fromkeys(self.policies))
        if len(names) != len(self.policies):
            raise ConfigError(f"--policies names a heuristic twice: {','.join(self.policies)}")
        self.candidates = {name: base_policy(name) for name in names if name != self.base_name}
        if not self.candidates:
            raise ConfigError(f"--policies needs a heuristic other than the base {self.base_name!r}, got "
                              f"{','.join(self.policies)}")

    def value(self, env: Any, obs: dict[str, Any], name: str) -> float:
        """Total JCT (s) if heuristic ``name`` decides ``env``'s current event and the base the rest (``env`` untouched)."""
        twin = copy.deepcopy(env.unwrapped)
        obs, terminated, truncated, _ = play_event(twin, obs, self.candidates[name])
        return total_jct_s(twin) if terminated or truncated else finish_with_base(twin, obs, self.base)[0]

    def run_episode(self, env: Any, seed: int) -> SwitchingEpisode:
        """One episode of ``env`` (workload seed ``seed``) with the switching rollout."""
        started = time.perf_counter()
        base_h, known = base_episode(env, self.base, seed)
        base_total = known
        obs, _ = env.reset(seed=int(seed), options={"workload_seed": int(seed)})
        u = env.unwrapped
        chosen: Counter[str] = Counter()
        rollouts = 0
        while True:
            best, best_value = self.base_name, known
            for name in self.candidates:
                v = self.value(u, obs, name)
                rollouts += 1
                if v < best_value - TIE_TOLERANCE_S:
                    best, best_value = name, v
            chosen[best] += 1
            known = best_value
            policy = self.base if best == self.base_name else self.candidates[best]
            obs, terminated, truncated, info = play_event(u, obs, policy)
            if terminated or truncated:
                break
        total = total_jct_s(u)
        if abs(total - known) > TIE_TOLERANCE_S or total > base_total + TIE_TOLERANCE_S:
            raise AssertionError(f"seed {seed}: total JCT {total} s, expected {known} s (base {base_total} s)")
        events = sum(chosen.values())
        return SwitchingEpisode(
            seed=int(seed), base_mean_jct_h=base_h, mean_jct_h=float(info["mean_jct_h"]), total_jct_s=total, events=events,
            switches=events - chosen[self.base_name], rollouts=rollouts, chosen=dict(chosen), truncated=bool(truncated),
            wall_s=time.perf_counter() - started,
        )


def episode_on_new_env(env_id: str, env_kwargs: dict[str, Any], rollout: SwitchingRollout, seed: int) -> SwitchingEpisode:
    """:meth:`SwitchingRollout.run_episode` on a fresh ``gym.make(env_id, **env_kwargs)`` (a worker's task)."""
    env = gym.make(env_id, **env_kwargs)
    try:
        return rollout.run_episode(env, seed)
    finally:
        env.close()


def _row(ep: SwitchingEpisode, rollout: SwitchingRollout) -> SeedRow:
    """The JSON row of one episode, in :mod:`~synergy_gym.baselines.rollout_bound`'s shape: its ``decisions``
    are the events (all of them ``sampled``), its ``deviations`` the switches, its ``mean_candidates`` the candidates
    an event; ``deviation_kinds`` is ``None`` (``events_by_heuristic`` says which heuristic decided)."""
    return SeedRow(
        seed=ep.seed, base_mean_jct_h=ep.base_mean_jct_h, rollout_mean_jct_h=ep.mean_jct_h,
        diff_pct=100.0 * (ep.mean_jct_h - ep.base_mean_jct_h) / ep.base_mean_jct_h, decisions=ep.events,
        deviations=ep.switches, rollouts=ep.rollouts, mean_candidates=float(len(rollout.candidates) + 1),
        truncated=ep.truncated, wall_s=ep.wall_s, sampled=ep.events, deviation_kinds=None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m synergy_gym.baselines.switching_rollout", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--env", default="Synergy-small-scarce-v0", help="environment id (default Synergy-small-scarce-v0)")
    parser.add_argument("--preemptive", action="store_true", help="make the environment with preemptive=True")
    parser.add_argument("--base", default="tetris+greedy",
                        help=f"base heuristic: {', '.join(BASES)} (default tetris+greedy)")
    parser.add_argument("--policies", default=",".join(DEFAULT_POLICIES),
                        help=f"candidate heuristics, comma-separated (default {','.join(DEFAULT_POLICIES)})")
    parser.add_argument("--seeds", default="1000000..1000007", help="workload seeds: 1000000..1000019 or a,b,c")
    parser.add_argument("--workers", type=int, default=1, help="seeds run in parallel processes (default 1)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write the rows and summary to this file, in an existing folder (rewritten after each seed)")
    args = parser.parse_args(argv)
    try:
        seeds = parse_seed_list(args.seeds, "--seeds")
        check_workers(args.workers)
        rollout = SwitchingRollout(args.base, tuple(list_items(args.policies, "--policies")))
        check_env_id_and_json(args.env, args.json)
    except SynergyGymError as exc:
        return usage_error(parser, exc)
    env_kwargs = {"preemptive": True} if args.preemptive else {}
    meta = {"env": args.env, "env_kwargs": env_kwargs, "base": args.base, "policies": list(rollout.policies),
            "clairvoyant": True, "jct": "mean over all jobs of the episode, hours (info['mean_jct_h'])"}
    rows: list[SeedRow] = []
    chosen: list[dict[str, int]] = []
    kwargs = f" {env_kwargs}" if env_kwargs else ""
    print(f"{args.env}{kwargs}, per-event choice among {','.join(rollout.policies)}, base {args.base}")
    print(f"{'seed':>8} {'base h':>9} {'rollout h':>10} {'diff %':>8} {'events':>7} {'switches':>8} {'wall s':>8}  chosen")
    tasks = [(args.env, env_kwargs, rollout, seed) for seed in seeds]
    try:
        with results_in_order(episode_on_new_env, tasks, args.workers) as episodes:
            for ep in episodes:
                rows.append(_row(ep, rollout))
                chosen.append(ep.chosen)
                others = ", ".join(f"{k} {v}" for k, v in sorted(ep.chosen.items(), key=lambda kv: -kv[1]) if k != args.base)
                r = rows[-1]
                print(f"{r.seed:>8} {r.base_mean_jct_h:>9.3f} {r.rollout_mean_jct_h:>10.3f} {r.diff_pct:>+8.2f} "
                      f"{r.decisions:>7} {r.deviations:>8} {r.wall_s:>8.0f}  {others or '-'}", flush=True)
                if args.json is not None:
                    write_rows(args.json, meta, rows, [{"events_by_heuristic": c} for c in chosen])
    except SynergyGymError as exc:  # raised in a worker, e.g. an environment setting the scenario refuses
        return usage_error(parser, exc)
    print(summary_line(rows, "per episode"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
