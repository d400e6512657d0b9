"""How often a ``hint_policy`` run's models depart from their heuristic: ``python -m synergy_gym.agents.hint_departures``.

For each run folder of ``synergy-gym train`` with ``hint_policy`` (:mod:`synergy_gym.agents.heuristic_hint`): its
untrained model (built as the run built it, with its seed) and its ``last_model.zip`` (with its statistics, as
``evaluate`` runs it), one episode each on the workload of one seed (default 2,000,000, the first validation seed):
how many decisions were not the heuristic's (and the two most frequent kinds of departure, such as "admit for
preempt": the policy admitted a job where the heuristic preempted one), and the episode's mean JCT against the
heuristic's. Every folder is checked before the first episode; bad input is one line.

    python -m synergy_gym.agents.hint_departures RUN_DIR [RUN_DIR …] [--seed N]
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym

from synergy_gym.agents.heuristic_hint import HeuristicHint, departures, hint_heuristic, model_hint
from synergy_gym.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    """``python -m synergy_gym.agents.hint_departures RUN_DIR… [--seed N]``: for each run folder of a ``hint_policy`` run,
    its untrained model (the run's own seed; observations as they are) and its ``last_model.zip`` (with its
    statistics, as ``evaluate`` runs it), the departures from the heuristic on the workload of one seed and the JCT
    against the heuristic's."""
    import argparse

    from stable_baselines3.common.vec_env import DummyVecEnv

    from synergy_gym.agents.models import build_model
    from synergy_gym.agents.wrappers import AgentPolicy
    from synergy_gym.cli.args import parse_seed_list
    from synergy_gym.errors import SynergyGymError

    parser = argparse.ArgumentParser(prog="python -m synergy_gym.agents.hint_departures", description=main.__doc__)
    parser.add_argument("runs", nargs="+", type=Path, help="run folders of synergy-gym train with hint_policy")
    parser.add_argument("--seed", default="2000000", help="the workload seed (default: the first validation seed)")
    args = parser.parse_args(argv)
    try:
        (seed,) = parse_seed_list(args.seed, limit=1)
        runs = [_hinted_run(run) for run in args.runs]  # every folder checked before the first episode
    except SynergyGymError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    for run, cfg, last in runs:
        heuristic = hint_heuristic(cfg.hint_policy)
        env = gym.make(cfg.env_id, **cfg.env_kwargs)
        baseline = departures(heuristic, heuristic, env, seed).mean_jct_h
        hinted = DummyVecEnv([partial(HeuristicHint, gym.make(cfg.env_id, **cfg.env_kwargs), cfg.hint_policy)])
        untrained = AgentPolicy(build_model(cfg, hinted, "cpu", tb_dir=None), None)
        rows = [("step 0, stochastic", departures(untrained, heuristic, env, seed, False)),
                ("last, deterministic", departures(last, heuristic, env, seed, True)),
                ("last, stochastic", departures(last, heuristic, env, seed, False))]
        head: Any = last.model.policy.action_net  # the per-slot head (SlotScorer)
        print(f"{run}: {cfg.hint_policy} {baseline:.3f} h on seed {seed}; last weight "
              f"{float(head.hint_weight.detach()):.3f}; " + "; ".join(
                  f"{name}: {c.departed:,} of {c.decisions:,} depart{_most(c.kinds)}, {c.mean_jct_h:.3f} h "
                  f"({c.mean_jct_h / baseline:.3f}×)" for name, c in rows))
    return 0


def _most(kinds: Any) -> str:
    """The two most frequent kinds of departure, as `` (most: admit for preempt 2,806, …)``; nothing without any."""
    return f" (most: {', '.join(f'{kind} {n:,}' for kind, n in kinds.most_common(2))})" if kinds else ""


def _hinted_run(run: Path) -> tuple[Path, Any, Any]:
    """A run folder's config and last model (an ``AgentPolicy``), checked: a ``hint_policy`` run whose model has it."""
    from synergy_gym.agents.config import load_run_config
    from synergy_gym.agents.models import load_agent
    from synergy_gym.agents.normalization import resolve_stats
    from synergy_gym.cli.files import require_file

    cfg = load_run_config(run / "config.json")
    if cfg.hint_policy is None:
        raise ConfigError(f"{run}: its config.json has no hint_policy")
    model = require_file(run / "last_model.zip", "the run's last model", ConfigError)
    stats = resolve_stats(model, advice="put the run's vecnormalize.pkl back beside it")
    last = load_agent(model, cfg, "cpu", "last", stats=stats, normalize=stats is not None)
    if model_hint(last.model) != cfg.hint_policy:
        raise ConfigError(f"{model}: the model's hint_policy is {model_hint(last.model)!r}, its run's config.json says "
                          f"{cfg.hint_policy!r}: is it another run's?")
    return run, cfg, last


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
