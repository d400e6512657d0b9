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
from synergy_gym.errors import ConfigError, SynergyGymError
from synergy_gym.evaluation import evaluate
from synergy_gym.files import atomic_write_bytes, atomic_write_text, check_output_dir, check_output_file, require_file
from synergy_gym.plots import ci95_half_width, jct_cdf_png

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


def space_parts(space, prefix: str = "") -> dict[str, str]:
    """Each part of a (Dict) space by name: ``{"queue": "Box(320,)", "action": "Discrete(47)", …}``.

    Only what a trained network depends on (kinds, shapes, sizes) is compared,
    not the bounds, so a model can be evaluated on another load or cluster of
    the same shape.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        parts: dict[str, str] = {}
        for key, sub in space.spaces.items():
            parts.update(space_parts(sub, f"{prefix}{key}."))
        return parts
    if isinstance(space, spaces.Discrete):
        desc = f"Discrete({int(space.n)})"
    else:
        desc = f"{type(space).__name__}{tuple(space.shape) if space.shape is not None else ''}"
    return {prefix[:-1] if prefix else "observation": desc}


def spaces_parts(observation_space, action_space) -> dict[str, str]:
    """:func:`space_parts` of an observation space, plus ``"action"``: the action space's."""
    return {**space_parts(observation_space), "action": space_parts(action_space)["observation"]}


def _env_parts(env_id: str, kwargs: dict[str, Any]) -> dict[str, str]:
    """The observation and action space parts of ``env_id`` with ``kwargs``."""
    import gymnasium as gym

    import synergy_gym  # noqa: F401  (registers the environments)

    try:
        env = gym.make(env_id, **kwargs)
    except gym.error.Error as exc:
        raise ConfigError(f"--env {env_id!r}: {str(exc).splitlines()[0]}") from None
    try:
        return spaces_parts(env.observation_space, env.action_space)
    finally:
        env.close()


def _effective_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every env kwarg's value: ``kwargs`` over the registered ones over the defaults."""
    from dataclasses import MISSING, fields

    import gymnasium as gym

    from synergy_gym.env import EnvConfig

    values = {f.name: f.default for f in fields(EnvConfig) if f.default is not MISSING}
    try:
        values.update(gym.spec(env_id).kwargs)
    except gym.error.Error:
        pass
    return {**values, **kwargs}


def _mismatch_cause(cfg: TrainConfig | None, model_parts: dict[str, str], env_id: str, kwargs: dict[str, Any]) -> str:
    """``trained with max_queue=32 but the environment has max_queue=8`` – the settings behind a space mismatch.

    Each difference between the run's environment (``config.json``) and the
    requested one is tried alone on the run's; those that alone change the
    spaces are named (all differences when none does by itself).
    """
    if cfg is None:
        return "its run folder has no config.json to tell the environment it was trained on"
    trained, wanted = _effective_kwargs(cfg.env_id, cfg.env_kwargs), _effective_kwargs(env_id, kwargs)
    changes = [("env", cfg.env_id, env_id)] if cfg.env_id != env_id else []
    changes += [(k, trained.get(k), wanted.get(k)) for k in dict.fromkeys([*trained, *wanted]) if trained.get(k) != wanted.get(k)]
    if not changes:
        return f"it was trained on {cfg.env_id} with the same env kwargs"
    causes = []
    for key, old, new in changes:
        try:
            if key == "env":
                parts = _env_parts(new, dict(cfg.env_kwargs))
            else:
                parts = _env_parts(cfg.env_id, {**cfg.env_kwargs, key: new})
        except SynergyGymError:
            continue
        if parts != model_parts:
            causes.append((key, old, new))
    causes = causes or changes
    return (f"this model was trained with {', '.join(f'{k}={old}' for k, old, _ in causes)} "
            f"but the environment has {', '.join(f'{k}={new}' for k, _, new in causes)}")


def check_agent_fits(path: Path, agent: AgentPolicy, cfg: TrainConfig | None, env_id: str, kwargs: dict[str, Any],
                     env_parts: dict[str, str]) -> None:
    """Refuse a model (or its normalisation statistics) whose spaces differ from the environment's."""
    model = agent.model
    model_parts = spaces_parts(model.observation_space, model.action_space)
    differ = [k for k in dict.fromkeys([*model_parts, *env_parts]) if model_parts.get(k) != env_parts.get(k)]
    if differ:
        k = differ[0]
        what = "action space" if k == "action" else f"observation {k!r}"
        raise ConfigError(f"--model {path}: {_mismatch_cause(cfg, model_parts, env_id, kwargs)} "
                          f"({what}: {model_parts.get(k, 'absent')} in the model vs {env_parts.get(k, 'absent')})")
    rms = getattr(agent.vec_normalize, "obs_rms", None)
    if rms is None:
        return
    for key, stats in (rms.items() if isinstance(rms, dict) else [("observation", rms)]):
        want = env_parts.get(key, "absent")
        have = f"Box{tuple(np.shape(stats.mean))}"
        if want != have:
            raise ConfigError(f"--model {path}: its normalisation statistics do not fit the environment "
                              f"({_mismatch_cause(cfg, model_parts, env_id, kwargs)}; observation {key!r}: "
                              f"{have} in the statistics vs {want})")


def confidence_interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of a 95% t-interval (half-width NaN for one value)."""
    values = np.asarray(values, dtype=float)
    std = values.std(ddof=1) if values.size > 1 else float("nan")
    return float(values.mean()), float(ci95_half_width(std, values.size))


def run_evaluation(
    models: list[Path], env_id: str | None, env_kwargs: dict[str, Any] | None, seeds: list[int], device: str
) -> tuple[pd.DataFrame, dict[str, np.ndarray], pd.DataFrame]:
    """Per-seed results of every model and baseline, their pooled JCTs, and a per-policy summary."""
    configs = [_run_config(m) for m in models]
    base = next((c for c in configs if c is not None), None)
    env_id = env_id or (base.env_id if base else "Synergy-small-v0")
    kwargs = dict(base.env_kwargs) if base and env_kwargs is None else dict(env_kwargs or {})
    env_parts = _env_parts(env_id, kwargs)
    agents = []
    for i, (path, cfg) in enumerate(zip(models, configs)):
        name = "agent" if len(models) == 1 else f"agent[{i}]"
        agents.append(_load_agent(path, cfg, device, name))
        check_agent_fits(path, agents[-1], cfg, env_id, kwargs, env_parts)
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
    cdf = {(name, load): values for name, values in jcts.items()}
    title = f"CDF of job completion times: {len(jcts)} policies, every job of the evaluation episodes"
    atomic_write_bytes(out / "jct_cdf.png", jct_cdf_png(cdf, title, jobs="jobs of the episodes"))


def _json_value(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value


OUTPUT_FILES = ("results.csv", "results.json", "jct_cdf.png")


def main(args: argparse.Namespace) -> int:
    out = check_output_dir(
        args.out or Path("runs") / f"evaluate-{datetime.now():%Y%m%d-%H%M%S}", "--out", OUTPUT_FILES,
        create_parents=args.out is None,
    )
    if args.json is not None:
        check_output_file(args.json, "--json", folders=((out, "--out"),))
    device = resolve_device(args.device)
    models = [Path(m) for m in args.model]
    for m in models:
        require_file(m, "model file", ConfigError)
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
    write_outputs(results, jcts, out, args.json)
    print(f"wrote results.csv, results.json, jct_cdf.png to {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from synergy_gym.cli import main as cli_main

    sys.exit(cli_main(["evaluate", *sys.argv[1:]]))
