"""``synergy-gym evaluate``: score trained models against the baselines on identical workloads.

Runs each ``--model`` and every baseline the environment can express – the
fair share (``<order>+fair``), the best-case demand (``<order>+tune``) and a
random valid action – on the same held-out seeds, prints a table and writes
``results.csv``, ``results.json`` (the fields of ``compare``: policy, load,
seed, mean/median/p99 JCT, makespan, jobs measured, wall time) and
``jct_cdf.png`` to ``--out``. With several models (e.g. one per training seed)
the table gives each policy's mean over models with a 95% confidence interval.
The environment and its kwargs come from the model's run folder
(``config.json``) unless given.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.config import EVAL_SEED_BASE, TrainConfig, load_config_file
from agents.train import baseline_names, load_model, parse_env_kwargs, resolve_device
from agents.wrappers import AgentPolicy
from synergy_gym.action_policies import RandomMaskedPolicy, fair_share_policy, tune_policy
from synergy_gym.cli_args import parse_seed_list
from synergy_gym.errors import ConfigError
from synergy_gym.evaluation import evaluate
from synergy_gym.files import atomic_write_bytes, atomic_write_text
from synergy_gym.plots import jct_cdf_png

FIELDS = ("policy", "load", "seed", "mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h", "jobs_measured", "wall_s")


def _run_config(model_path: Path) -> TrainConfig | None:
    saved = model_path.parent / "config.json"
    return TrainConfig.from_mapping(load_config_file(saved), source=str(saved)) if saved.is_file() else None


def _load_agent(model_path: Path, cfg: TrainConfig | None, device: str, name: str) -> AgentPolicy:
    from stable_baselines3.common.vec_env import VecNormalize

    model = load_model(model_path, cfg.algo if cfg else None, device)
    stats = model_path.parent / ("best_vecnormalize.pkl" if model_path.name.startswith("best") else "vecnormalize.pkl")
    vec_norm = None
    if stats.is_file():
        import pickle

        with open(stats, "rb") as fh:
            vec_norm = pickle.load(fh)
        if not isinstance(vec_norm, VecNormalize):
            raise ConfigError(f"{stats} does not hold VecNormalize statistics")
        vec_norm.training = False
    return AgentPolicy(model, vec_norm, name=name)


def confidence_interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of a 95% t-interval (half-width NaN for one value)."""
    values = np.asarray(values, dtype=float)
    if values.size < 2:
        return float(values.mean()), float("nan")
    from scipy import stats

    half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    return float(values.mean()), float(half)


def run_evaluation(
    models: list[Path], env_id: str | None, env_kwargs: dict[str, Any] | None, seeds: list[int], device: str
) -> tuple[pd.DataFrame, dict[str, np.ndarray], pd.DataFrame]:
    """Per-seed results of every model and baseline, their pooled JCTs, and a per-policy summary."""
    configs = [_run_config(m) for m in models]
    base = next((c for c in configs if c is not None), None)
    env_id = env_id or (base.env_id if base else "Synergy-small-v0")
    kwargs = dict(base.env_kwargs) if base and env_kwargs is None else dict(env_kwargs or {})
    agents = []
    for i, (path, cfg) in enumerate(zip(models, configs)):
        name = "agent" if len(models) == 1 else f"agent[{i}]"
        agents.append(_load_agent(path, cfg, device, name))
    names = baseline_names(TrainConfig(env_kwargs=kwargs))
    baselines = [
        (names["fair"], fair_share_policy()),
        (names["tune"], tune_policy()),
        ("random", RandomMaskedPolicy(0)),
    ]
    frames, jcts = [], {}
    for policy_name, policy, group in [(a.name, a, "agent") for a in agents] + [(n, p, n) for n, p in baselines]:
        df = evaluate(policy, env_id, seeds, name=policy_name, keep_jcts=True, **kwargs)
        df["group"] = group
        frames.append(df)
        jcts[policy_name] = np.concatenate([np.asarray(x) for x in df["jct_h"]])
    results = pd.concat(frames, ignore_index=True)
    load = kwargs.get("jobs_per_hour")
    if load is None:
        import gymnasium as gym

        load = gym.spec(env_id).kwargs.get("jobs_per_hour")
    results["load"] = load
    results["jobs_measured"] = results["jobs_finished"]
    summary_rows = []
    for group, rows in results.groupby("group", sort=False):
        per_member = rows.groupby("policy", sort=False)["mean_jct_h"].mean().to_numpy()
        mean, half = confidence_interval(per_member)
        summary_rows.append({"policy": "agent" if group == "agent" else group, "models": len(per_member),
                             "mean_jct_h": mean, "ci95_h": half,
                             "p99_jct_h": float(rows["p99_jct_h"].mean()), "makespan_h": float(rows["makespan_h"].mean())})
    return results, jcts, pd.DataFrame(summary_rows)


def format_summary(summary: pd.DataFrame, seeds: list[int]) -> str:
    tune = summary.loc[summary["policy"].str.endswith("+tune"), "mean_jct_h"]
    tune_mean = float(tune.iloc[0]) if len(tune) else float("nan")
    lines = [f"held-out seeds: {', '.join(map(str, seeds))}",
             f"{'policy':<14}{'models':>7}{'mean JCT h':>12}{'± 95% CI':>10}{'p99 h':>9}{'makespan h':>12}{'vs tune':>9}"]
    for r in summary.itertuples():
        ci = "-" if math.isnan(r.ci95_h) else f"{r.ci95_h:.2f}"
        lines.append(f"{r.policy:<14}{r.models:>7}{r.mean_jct_h:>12.2f}{ci:>10}{r.p99_jct_h:>9.2f}{r.makespan_h:>12.1f}"
                     f"{r.mean_jct_h / tune_mean:>8.3f}×")
    return "\n".join(lines)


def register(subparsers) -> None:
    p = subparsers.add_parser("evaluate", help="score trained models against the baselines", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, action="append", required=True, help="SB3 model zip (repeat for several runs)")
    p.add_argument("--episodes", type=int, default=None, help="held-out seeds to use (default: the run's eval_episodes)")
    p.add_argument("--seeds", default=None, help="explicit env seeds: 1000000..1000009 or a,b,c")
    p.add_argument("--env", dest="env_id", default=None, help="environment id (default: the run's)")
    p.add_argument("--env-kwargs", nargs="*", default=None, metavar="KEY=VALUE", help="env kwargs (default: the run's)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--json", type=Path, default=None, help="also write the results JSON here")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: runs/evaluate-<timestamp>)")
    p.set_defaults(run=main)


def write_outputs(results: pd.DataFrame, jcts: dict[str, np.ndarray], out: Path, json_path: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    table = results[list(FIELDS)]
    atomic_write_text(out / "results.csv", table.to_csv(index=False))
    records = [{k: _json_value(v) for k, v in row.items()} for row in table.to_dict("records")]
    text = json.dumps({"results": records}, indent=2) + "\n"
    atomic_write_text(out / "results.json", text)
    if json_path is not None:
        atomic_write_text(json_path, text)
    load = results["load"].iloc[0]
    atomic_write_bytes(out / "jct_cdf.png", jct_cdf_png({(name, load): values for name, values in jcts.items()}))


def _json_value(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value


def main(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    models = [Path(m) for m in args.model]
    for m in models:
        if not m.is_file():
            raise ConfigError(f"model file {str(m)!r} does not exist")
    if args.seeds is not None:
        seeds = list(parse_seed_list(args.seeds, "--seeds"))
    else:
        cfg = _run_config(models[0])
        n = args.episodes if args.episodes is not None else (cfg.eval_episodes if cfg else 5)
        if n < 1:
            raise ConfigError(f"--episodes must be a positive integer, got {n}")
        seeds = [EVAL_SEED_BASE + i for i in range(n)]
    env_kwargs = parse_env_kwargs(args.env_kwargs) if args.env_kwargs is not None else None
    results, jcts, summary = run_evaluation(models, args.env_id, env_kwargs, seeds, device)
    print(format_summary(summary, seeds))
    out = args.out or Path("runs") / f"evaluate-{datetime.now():%Y%m%d-%H%M%S}"
    write_outputs(results, jcts, out, args.json)
    print(f"wrote results.csv, results.json, jct_cdf.png to {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from synergy_gym.cli import main as cli_main

    sys.exit(cli_main(["evaluate", *sys.argv[1:]]))
