"""``synergy-gym evaluate``: trained agents, environment heuristics and simulator policies on identical workloads.

Every policy runs one episode per seed, and the seed *is* the workload seed: the
environment resets with ``reset(seed=s, options={"workload_seed": s})`` and the
simulator runs ``env.unwrapped.workload_for_seed(s)`` on the env's cluster with
its round settings (:mod:`synergy_gym.baselines.sim_on_env`), so all policies see the same
jobs and per-seed differences are paired. Three sources:

* ``env`` – the environment heuristics of :mod:`synergy_gym.baselines.env_heuristics`
  (fifo+tune, srtf+tune, las+tune, tetris, tetris+greedy, fifo+price, srtf+price, random),
  which act through the environment and read only the observation and the mask;
* ``sim`` – the simulator's named policies (default fifo+fair, fifo+tune,
  fifo+opt, srtf+tune, tetris+greedy; ``--sim-policies``);
* ``agent`` – each ``--model`` (optional; repeatable). Each model gets its own
  row, named by its ``--label`` (repeatable, one per ``--model``, in the same
  order; default: ``agent`` for a single model, else the name of each model's
  run folder, with the file name added where folders repeat); several models
  also give a row ``agent``: their mean with a 95 % CI over the models.

``--baselines`` picks the baselines: ``all`` (the default: every env heuristic
and the ``--sim-policies``), ``env``, ``sim``, ``none``, or names separated by
commas; a name that is both an env heuristic and a simulator policy (fifo+tune,
srtf+tune) runs both, ``env:NAME`` / ``sim:NAME`` pick one, and any simulator
policy ``<order>+<allocation>`` of ``compare`` may be named.

Statistics are over all jobs of each episode: ``mean_jct_h`` is the mean over
episodes of the episode's mean JCT, with ``mean_jct_ci95_h`` the half-width of
its t-based 95 % confidence interval over episodes; ``p99_jct_h`` and
``makespan_h`` are means over episodes. The table is sorted by mean JCT and
names the best env heuristic. Written to ``--out`` (default
``runs/evaluate-<timestamp>``): ``results.json`` (and ``--json FILE``), a list
of rows ``{policy, source, episodes, mean_jct_h, mean_jct_ci95_h, p99_jct_h,
makespan_h, truncated, wall_s, ci95_over, per_seed: {seed: mean_jct_h}}``, agent rows
also ``paired_vs_best_env`` (:func:`paired_vs_best_env`: the per-seed difference to the
best env heuristic, its 95 % CI over seeds, and on how many seeds the agent is better);
``results.csv``, one row per policy and seed; ``jct_cdf.png``.

Optional records: ``--decisions DIR`` writes, for every policy that acts
through the environment (agents and env heuristics; simulator policies and the
bound make no environment decisions and get none), ``DIR/<label>.jsonl`` with
one JSON line per decision of the first seed's episode: ``seed``, ``round``,
``time_h``, ``job_id``, ``slot``, ``level`` (slot and level after the
environment's fallback for a masked action), ``action``, ``stop``, ``invalid``,
``n_valid`` (valid actions, stop included), ``filled_slots`` and ``features``
(the chosen slot's features ``{name: value}`` as observed); a stop has ``slot``,
``level``, ``job_id`` and ``features`` null. The label becomes the file name
with characters other than letters, digits and ``._+=-`` replaced by ``_``.
``--jobs-csv FILE`` writes every job of every episode of every policy:
``policy, source, seed, job_id, arrival_h, start_h, finish_h, jct_h, gpus,
model`` (start: the job's first start; for the bound the first round boundary
at or after its arrival; start, finish and JCT empty for a job that never
started / did not finish in an episode cut off at ``max_rounds``).

``--model pretrained:NAME`` takes a policy shipped with the package
(:mod:`synergy_gym.agents.pretrained_policies`: ``small-scarce``, ``small``). With
``--model`` the environment and its kwargs come from the model's run
folder (``config.json``) unless given; a model whose spaces do not fit the
environment is refused (a model of the old per-job preference action space must
be retrained). Seeds: ``--seeds`` (``1000000..1000019`` or ``a,b,c``), else
``--episodes`` held-out seeds from 1,000,000 (default: the run's
``eval_episodes``, or 5).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from synergy_gym.agents.config import EVAL_SEED_BASE, TrainConfig, load_config_file
from synergy_gym.cli.args import parse_seed_list
from synergy_gym.cli.files import atomic_write_bytes, atomic_write_text, check_output_dir, check_output_file, require_file
from synergy_gym.cli.plots import jct_cdf_png
from synergy_gym.errors import ConfigError, PathError, SynergyGymError, UnknownNameError
from synergy_gym.experiments.evaluation import evaluate
from synergy_gym.experiments.statistics import ci95_half_width

if TYPE_CHECKING:  # pragma: no cover
    from synergy_gym.agents.wrappers import AgentPolicy

SOURCES = ("agent", "env", "sim", "bound")
#: One row per policy and seed in ``results.csv``.
FIELDS = ("policy", "source", "seed", "load", "mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h",
          "jobs_finished", "jobs_total", "terminated", "decisions", "invalid_actions", "wall_s")
#: Keys of every row of ``results.json`` (and ``--json``).
SUMMARY_FIELDS = ("policy", "source", "episodes", "mean_jct_h", "mean_jct_ci95_h", "p99_jct_h", "makespan_h",
                  "truncated", "wall_s", "ci95_over", "per_seed")
DEFAULT_EPISODES = 5
OUTPUT_FILES = ("results.csv", "results.json", "jct_cdf.png")
#: Columns of ``--jobs-csv``: one row per job, episode and policy.
JOBS_FIELDS = ("policy", "source", "seed", "job_id", "arrival_h", "start_h", "finish_h", "jct_h", "gpus", "model")
#: The name of the models' mean row (several ``--model``), which no ``--label`` may take then.
MEAN_AGENT = "agent"


# -- labels and file names ---------------------------------------------------------------------


def agent_labels(models: list[Path], labels: list[str] | None) -> list[str]:
    """Each model's row name: its ``--label``, else ``agent`` (one model) or its run folder's name.

    Default names that repeat (two models of one run folder) get the model's file
    name (``run/best_model``), and then their position (``[i]``). Given labels must
    be as many as the models, non-empty and distinct, and with several models none
    may be ``agent`` (the models' mean row).
    """
    if labels:
        if not models:
            raise ConfigError(f"--label needs --model: {len(labels)} label(s) for no --model")
        if len(labels) != len(models):
            raise ConfigError(f"--label: {len(labels)} label(s) for {len(models)} --model argument(s); "
                              f"give one --label per --model, in the same order")
        for label in labels:
            if not label.strip():
                raise ConfigError("--label: a label may not be empty")
        repeated = sorted({x for x in labels if labels.count(x) > 1})
        if repeated:
            raise ConfigError(f"--label {repeated[0]!r} is given twice; each model needs its own label")
        if len(models) > 1 and MEAN_AGENT in labels:
            raise ConfigError(f"--label {MEAN_AGENT!r} is the name of the models' mean row; choose another label")
        return list(labels)
    if len(models) <= 1:
        return [MEAN_AGENT] * len(models)
    names = [m.resolve().parent.name or m.stem for m in models]
    names = [f"{n}/{m.stem}" if names.count(n) > 1 else n for n, m in zip(names, models)]
    return [f"{n}[{i}]" if names.count(n) > 1 else n for i, n in enumerate(names)]


def decisions_file_name(label: str) -> str:
    """``<label>.jsonl`` with characters other than letters, digits and ``._+=-`` as ``_`` (``run/best`` → ``run_best``)."""
    stem = re.sub(r"[^A-Za-z0-9._+=-]", "_", label).lstrip(".-")
    return f"{stem or 'policy'}.jsonl"


def decisions_files(agent_names: list[str], env_names: tuple[str, ...]) -> dict[str, str]:
    """``{file name: label}`` of the decision logs; two policies whose files would coincide are an error."""
    files: dict[str, str] = {}
    for source, label in [("agent", a) for a in agent_names] + [("env", n) for n in env_names]:
        name = decisions_file_name(label)
        if name in files:
            raise ConfigError(f"--decisions: the decisions of {files[name]} and {source} {label!r} would both go "
                              f"to {name}; give the models other --label values")
        files[name] = f"{source} {label!r}"
    return files


# -- which baselines ---------------------------------------------------------------------------


def default_sim_policies() -> tuple[str, ...]:
    from synergy_gym.baselines.sim_on_env import SIM_POLICIES

    return SIM_POLICIES


def parse_sim_policies(text: str) -> tuple[str, ...]:
    """``--sim-policies``: simulator policy names separated by commas, or ``none``."""
    from synergy_gym.baselines.registry import parse_policy_list
    from synergy_gym.baselines.sim_on_env import NO_WAIT_BOUND

    if text.strip().lower() in ("", "none"):
        return ()
    names = [t.strip() for t in text.split(",") if t.strip()]
    bound = (NO_WAIT_BOUND,) if NO_WAIT_BOUND in names else ()
    rest = ",".join(n for n in names if n != NO_WAIT_BOUND)
    if not rest:
        return bound
    try:
        return parse_policy_list(rest) + bound
    except UnknownNameError as exc:
        raise ConfigError(f"--sim-policies {text!r}: {exc}") from None


def parse_baselines(text: str, sim_policies: tuple[str, ...] | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``--baselines`` → (env heuristic names, simulator policy names), each de-duplicated in order.

    ``all``: every env heuristic and ``sim_policies`` (default :data:`synergy_gym.baselines.sim_on_env.SIM_POLICIES`);
    ``env``, ``sim``, ``none``; ``env:NAME``, ``sim:NAME``; a bare NAME selects the env heuristic
    and/or the simulator policy of that name.
    """
    from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES
    from synergy_gym.baselines.registry import make_policy
    from synergy_gym.baselines.sim_on_env import NO_WAIT_BOUND

    sims = default_sim_policies() if sim_policies is None else tuple(sim_policies)
    env: list[str] = []
    sim: list[str] = []
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        if item in ("all", "env", "sim", "none"):
            env += list(HEURISTIC_NAMES) if item in ("all", "env") else []
            sim += list(sims) if item in ("all", "sim") else []
            continue
        source, sep, name = item.partition(":")
        if not sep:
            source, name = "", item
        elif source not in ("env", "sim"):
            raise ConfigError(f"--baselines {text!r}: unknown source {source!r} in {raw.strip()!r}; use env:NAME or sim:NAME")
        is_env = name in HEURISTIC_NAMES and source in ("", "env")
        try:
            if name != NO_WAIT_BOUND:
                make_policy(name)
            is_sim = source in ("", "sim")
        except UnknownNameError:
            is_sim = False
        if not (is_env or is_sim):
            what = {"env": "env heuristic", "sim": "simulator policy"}.get(source, "baseline")
            raise ConfigError(
                f"--baselines {text!r}: unknown {what} {name!r}; valid: all, env, sim, none, the env heuristics "
                f"{', '.join(HEURISTIC_NAMES)}, or a simulator policy <order>+<allocation> such as "
                f"{', '.join(default_sim_policies())}"
            )
        env += [name] if is_env else []
        sim += [name] if is_sim else []
    return tuple(dict.fromkeys(env)), tuple(dict.fromkeys(sim))


# -- models and the spaces they were trained on -------------------------------------------------


#: Settings of a run's ``config.json`` that only runs on the replaced per-job preference action space have.
OLD_RUN_SETTINGS = ("job_dim", "bc_baseline")


def _retrain(path: Path, why: str) -> ConfigError:
    return ConfigError(f"--model {path}: the environment's action space changed (scheduling actions: slot × level, "
                       f"and stop) and {why}; retrain it with synergy-gym train")


def _run_config(model_path: Path) -> TrainConfig | None:
    """The run's ``config.json`` beside the model (None if absent); a run of the old action space must be retrained."""
    from synergy_gym.env.config import REMOVED as REMOVED_ENV_KWARGS

    saved = model_path.parent / "config.json"
    if not saved.is_file():
        return None
    values = load_config_file(saved)
    env_kwargs = values.get("env_kwargs") if isinstance(values.get("env_kwargs"), dict) else {}
    old = [k for k in OLD_RUN_SETTINGS if k in values] + [f"env kwarg {k}" for k in env_kwargs if k in REMOVED_ENV_KWARGS]
    if old:
        raise _retrain(model_path, f"this model's run was trained on the old per-job preference actions "
                                   f"({saved} has {', '.join(old)})")
    return TrainConfig.from_mapping(values, source=str(saved))


def load_agent(model_path: Path, cfg: TrainConfig | None, device: str, name: str) -> AgentPolicy:
    """The model at ``model_path`` with the normalisation statistics beside it, as a policy named ``name``."""
    from stable_baselines3.common.vec_env import VecNormalize

    from synergy_gym.agents.train import load_model
    from synergy_gym.agents.wrappers import AgentPolicy

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
    """Each part of a (Dict) space by name: ``{"slots": "Box(352,)", "action_mask": "Box(161,)", …}``.

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


#: Observation keys of the per-job preference action space (one job at a time, its queue behind it).
OLD_OBSERVATION_KEYS = ("job", "queue")
#: Sizes of that action space: fair share, demand and the 45 grid points (+1 with deferral).
OLD_ACTION_SIZES = (47, 48)


def trained_on_old_action_space(model_parts: dict[str, str]) -> bool:
    """Whether a model's spaces are those of the replaced per-job preference environment."""
    keys = {k.split(".")[0] for k in model_parts}
    if "slots" in keys:
        return False
    return bool(keys & set(OLD_OBSERVATION_KEYS)) or model_parts.get("action") in {f"Discrete({n})" for n in OLD_ACTION_SIZES}


def check_env_id(env_id: str) -> None:
    """An unknown environment id is a one-line error naming the registered scenarios."""
    import gymnasium as gym

    import synergy_gym  # noqa: F401  (registers the environments)
    from synergy_gym.env.scenarios import SCENARIOS

    try:
        gym.spec(env_id)
    except gym.error.Error:
        raise ConfigError(f"--env {env_id!r}: unknown environment; valid: {', '.join(SCENARIOS)}") from None


def _env_parts(env_id: str, kwargs: dict[str, Any]) -> dict[str, str]:
    """The observation and action space parts of ``env_id`` with ``kwargs``."""
    import gymnasium as gym

    check_env_id(env_id)
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


def check_model_spaces(path: Path, model: Any, cfg: TrainConfig | None, env_id: str, kwargs: dict[str, Any],
                       env_parts: dict[str, str]) -> None:
    """Refuse a model whose spaces differ from the environment's, saying why.

    A model of the replaced per-job preference action space (``Discrete(47)``,
    observation keys ``job``/``queue``) is told to be retrained; otherwise the
    env kwargs behind the difference are named (:func:`_mismatch_cause`).
    """
    model_parts = spaces_parts(model.observation_space, model.action_space)
    if trained_on_old_action_space(model_parts) and model_parts != env_parts:
        raise _retrain(path, f"this model was trained on the old per-job preference actions "
                             f"({model_parts.get('action')} in the model vs {env_parts.get('action')} here)")
    differ = [k for k in dict.fromkeys([*model_parts, *env_parts]) if model_parts.get(k) != env_parts.get(k)]
    if differ:
        k = differ[0]
        what = "action space" if k == "action" else f"observation {k!r}"
        raise ConfigError(f"--model {path}: {_mismatch_cause(cfg, model_parts, env_id, kwargs)} "
                          f"({what}: {model_parts.get(k, 'absent')} in the model vs {env_parts.get(k, 'absent')})")


def check_agent_fits(path: Path, agent: AgentPolicy, cfg: TrainConfig | None, env_id: str, kwargs: dict[str, Any],
                     env_parts: dict[str, str]) -> None:
    """Refuse a model (:func:`check_model_spaces`) or its normalisation statistics whose spaces differ from the env's."""
    check_model_spaces(path, agent.model, cfg, env_id, kwargs, env_parts)
    rms = getattr(agent.vec_normalize, "obs_rms", None)
    if rms is None:
        return
    model_parts = spaces_parts(agent.model.observation_space, agent.model.action_space)
    for key, stats in (rms.items() if isinstance(rms, dict) else [("observation", rms)]):
        want = env_parts.get(key, "absent")
        have = f"Box{tuple(np.shape(stats.mean))}"
        if want != have:
            raise ConfigError(f"--model {path}: its normalisation statistics do not fit the environment "
                              f"({_mismatch_cause(cfg, model_parts, env_id, kwargs)}; observation {key!r}: "
                              f"{have} in the statistics vs {want})")


# -- running and summarising -----------------------------------------------------------------------


def confidence_interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of a 95% t-interval (half-width NaN for one value)."""
    values = np.asarray(values, dtype=float)
    std = values.std(ddof=1) if values.size > 1 else float("nan")
    return float(values.mean()), float(ci95_half_width(std, values.size))


def _load_of(env_id: str, kwargs: dict[str, Any]) -> Any:
    return _effective_kwargs(env_id, kwargs).get("jobs_per_hour")


def run_policies(
    env_id: str,
    env_kwargs: dict[str, Any],
    seeds: list[int],
    env_names: tuple[str, ...] = (),
    sim_names: tuple[str, ...] = (),
    agents: list[AgentPolicy] | tuple = (),
    progress: Any = None,
    keep_jobs: bool = False,
    log_decisions: bool = False,
) -> tuple[pd.DataFrame, dict[tuple[str, str], np.ndarray]]:
    """One row per (policy, seed) with a ``source`` column, and each policy's pooled per-job JCTs.

    ``random`` is seeded with each episode's seed, so its result for a seed does
    not depend on the other seeds evaluated. With ``keep_jobs`` a column ``jobs``
    holds each episode's jobs (:func:`synergy_gym.experiments.evaluation.job_frame`), with
    ``log_decisions`` a column ``decision_log`` the first seed's decisions of the
    agents and env heuristics (:func:`jobs_table`, :func:`write_decisions`).
    """
    from synergy_gym.baselines.env_heuristics import env_heuristics
    from synergy_gym.baselines.sim_on_env import NO_WAIT_BOUND, simulate_on_env

    runs: list[tuple[str, str, Any]] = [("agent", a.name, a) for a in agents]
    runs += [("env", n, None) for n in env_names] + [("sim", n, None) for n in sim_names]
    frames, jcts = [], {}
    for source, name, policy in runs:
        if progress is not None:
            progress(source, name)
        if source == "sim":
            df = simulate_on_env(name, env_id, seeds, keep_jcts=True, keep_jobs=keep_jobs, **env_kwargs)
        elif source == "env" and name == "random":
            df = pd.concat([evaluate(env_heuristics(seed)["random"], env_id, [seed], name=name, keep_jcts=True,
                                     keep_jobs=keep_jobs, log_decisions=log_decisions and i == 0, **env_kwargs)
                            for i, seed in enumerate(seeds)], ignore_index=True)
        else:
            policy = policy if policy is not None else env_heuristics(0)[name]
            df = evaluate(policy, env_id, seeds, name=name, keep_jcts=True, keep_jobs=keep_jobs,
                          log_decisions=log_decisions, **env_kwargs)
        df.insert(1, "source", "bound" if source == "sim" and name == NO_WAIT_BOUND else source)
        frames.append(df)
        jcts[(name, df["source"].iloc[0])] = np.concatenate([np.asarray(x, dtype=float) for x in df["jct_h"]])
    results = pd.concat(frames, ignore_index=True)
    for column in FIELDS:
        if column not in results:
            results[column] = np.nan
    for column in ("jobs_finished", "jobs_total", "decisions", "invalid_actions"):  # counts; empty for sim rows
        results[column] = results[column].astype("Int64")
    results["load"] = _load_of(env_id, env_kwargs)
    results["env"] = env_id
    return results, jcts


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (policy, source), sorted by mean JCT (see the module docstring for the columns).

    Several agents (``agent[0]``, ``agent[1]``, …) also give a row ``agent``: the mean over
    models, with the 95 % CI over the models' means (``ci95_over`` = ``"models"``).
    """
    rows = []
    for (policy, source), g in results.groupby(["policy", "source"], sort=False):
        mean, half = confidence_interval(g["mean_jct_h"].to_numpy())
        rows.append({
            "policy": policy, "source": source, "episodes": len(g), "mean_jct_h": mean, "mean_jct_ci95_h": half,
            "p99_jct_h": float(g["p99_jct_h"].mean()), "makespan_h": float(g["makespan_h"].mean()),
            "truncated": int((~g["terminated"].astype(bool)).sum()), "wall_s": float(g["wall_s"].sum()),
            "ci95_over": "episodes", "per_seed": {str(int(s)): float(v) for s, v in zip(g["seed"], g["mean_jct_h"])},
        })
    agents = [r for r in rows if r["source"] == "agent"]
    if len(agents) > 1:
        mean, half = confidence_interval(np.array([r["mean_jct_h"] for r in agents]))
        per_seed = pd.DataFrame([r["per_seed"] for r in agents]).mean(axis=0)
        rows.append({
            "policy": "agent", "source": "agent", "episodes": agents[0]["episodes"], "mean_jct_h": mean,
            "mean_jct_ci95_h": half, "p99_jct_h": float(np.mean([r["p99_jct_h"] for r in agents])),
            "makespan_h": float(np.mean([r["makespan_h"] for r in agents])),
            "truncated": sum(r["truncated"] for r in agents), "wall_s": sum(r["wall_s"] for r in agents),
            "ci95_over": "models", "models": len(agents), "per_seed": {k: float(v) for k, v in per_seed.items()},
        })
    summary = pd.DataFrame(rows)
    return summary.sort_values("mean_jct_h", kind="stable", ignore_index=True)


def paired_vs_best_env(summary: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each agent row's paired per-seed comparison with the best env heuristic of the table (``{}`` without one).

    For every seed both ran: difference = agent's mean JCT − the heuristic's. Per agent row
    (the models' mean row ``agent`` included: its per-seed mean over the models):
    ``{heuristic, seeds, mean_diff_h, ci95_h (t-interval over seeds), relative (mean_diff /
    the heuristic's mean over those seeds), better_seeds (seeds with a lower JCT)}``.
    """
    env_rows = summary[summary["source"] == "env"]
    if not len(env_rows):
        return {}
    best = env_rows.iloc[0]
    out: dict[str, dict[str, Any]] = {}
    for row in summary[summary["source"] == "agent"].itertuples():
        seeds = [s for s in row.per_seed if s in best["per_seed"]]
        if not seeds:
            continue
        agent = np.array([row.per_seed[s] for s in seeds])
        heuristic = np.array([best["per_seed"][s] for s in seeds])
        mean, half = confidence_interval(agent - heuristic)
        out[str(row.policy)] = {
            "heuristic": str(best["policy"]), "seeds": len(seeds), "mean_diff_h": mean, "ci95_h": half,
            "relative": mean / float(heuristic.mean()), "better_seeds": int((agent < heuristic).sum()),
        }
    return out


def _reference(summary: pd.DataFrame) -> tuple[str, float]:
    """The row the table's ratios are to: env fifo+tune, else sim fifo+tune (label and mean JCT)."""
    for source in ("env", "sim"):
        row = summary[(summary["policy"] == "fifo+tune") & (summary["source"] == source)]
        if len(row):
            return f"{source} fifo+tune", float(row["mean_jct_h"].iloc[0])
    return "", float("nan")


def format_summary(summary: pd.DataFrame, seeds: list[int], env_id: str) -> str:
    """The table, sorted by mean JCT, and a line naming the best env heuristic."""
    ref_label, ref = _reference(summary)
    seed_text = f"{seeds[0]}..{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2 else \
        ", ".join(map(str, seeds))
    lines = [f"{env_id}, workload seeds {seed_text} ({len(seeds)} episodes; all jobs of each episode)",
             (f"{'policy':<16}{'source':<8}{'mean JCT h':>11}{'± 95% CI':>10}{'p99 h':>9}{'makespan h':>12}"
              f"{'vs ' + ref_label if ref_label else '':>20}{'wall s':>9}")]
    for r in summary.itertuples():
        ci = "-" if math.isnan(r.mean_jct_ci95_h) else f"{r.mean_jct_ci95_h:.2f}"
        if r.ci95_over == "models":
            ci += "*"
        ratio = f"{r.mean_jct_h / ref:.3f}×" if ref_label else ""
        flag = f"  ({r.truncated} truncated)" if r.truncated else ""
        lines.append(f"{r.policy:<16}{r.source:<8}{r.mean_jct_h:>11.3f}{ci:>10}{r.p99_jct_h:>9.2f}{r.makespan_h:>12.1f}"
                     f"{ratio:>20}{r.wall_s:>9.1f}{flag}")
    if (summary["ci95_over"] == "models").any():
        lines.append("* the CI of the agents' mean is over models, the others' over episodes")
    env_rows = summary[summary["source"] == "env"]
    if len(env_rows):
        best = env_rows.iloc[0]
        vs = f" ({best['mean_jct_h'] / ref - 1:+.1%} vs {ref_label})" if ref_label else ""
        lines.append(f"best env heuristic: {best['policy']}, mean JCT {best['mean_jct_h']:.3f} h{vs}")
    for name, p in paired_vs_best_env(summary).items():
        ci = "" if math.isnan(p["ci95_h"]) else f" ± {p['ci95_h']:.3f}"
        lines.append(f"paired vs {p['heuristic']}: {name} {p['mean_diff_h']:+.3f} h{ci} ({p['relative']:+.1%}), "
                     f"lower JCT on {p['better_seeds']} of {p['seeds']} seeds")
    return "\n".join(lines)


def summary_records(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """The JSON rows: :data:`SUMMARY_FIELDS` (and ``models`` for the agents' mean)."""
    records = []
    paired = paired_vs_best_env(summary)
    for row in summary.to_dict("records"):
        record = {k: _json_value(row.get(k)) for k in SUMMARY_FIELDS}
        if isinstance(row.get("models"), (int, float, np.integer, np.floating)) and not pd.isna(row.get("models")):
            record["models"] = int(row["models"])
        if row["source"] == "agent" and str(row["policy"]) in paired:
            record["paired_vs_best_env"] = _json_value(paired[str(row["policy"])])
        records.append(record)
    return records


def run_evaluation(
    models: list[Path],
    env_id: str | None,
    env_kwargs: dict[str, Any] | None,
    seeds: list[int],
    device: str = "cpu",
    env_names: tuple[str, ...] | None = None,
    sim_names: tuple[str, ...] | None = None,
    progress: Any = None,
    labels: list[str] | None = None,
    keep_jobs: bool = False,
    log_decisions: bool = False,
) -> tuple[pd.DataFrame, dict[tuple[str, str], np.ndarray], pd.DataFrame]:
    """Per-seed results of every model and baseline, their pooled JCTs, and the per-policy summary.

    ``env_names`` / ``sim_names`` None: every env heuristic and the default simulator policies.
    ``labels``: the models' row names (:func:`agent_labels`). ``keep_jobs`` / ``log_decisions``:
    see :func:`run_policies`.
    """
    if env_names is None or sim_names is None:
        all_env, all_sim = parse_baselines("all")
        env_names = all_env if env_names is None else env_names
        sim_names = all_sim if sim_names is None else sim_names
    configs = [_run_config(m) for m in models]
    base = next((c for c in configs if c is not None), None)
    env_id = env_id or (base.env_id if base else "Synergy-small-v0")
    kwargs = dict(base.env_kwargs) if base and env_kwargs is None else dict(env_kwargs or {})
    env_parts = _env_parts(env_id, kwargs)  # an unknown id or kwarg fails here, before any run
    agents = []
    names = agent_labels(models, labels)
    for path, cfg, name in zip(models, configs, names):
        agents.append(load_agent(path, cfg, device, name))
        check_agent_fits(path, agents[-1], cfg, env_id, kwargs, env_parts)
    if not agents and not env_names and not sim_names:
        raise ConfigError("nothing to evaluate: give --model or some --baselines")
    results, jcts = run_policies(env_id, kwargs, seeds, tuple(env_names), tuple(sim_names), agents, progress,
                                 keep_jobs=keep_jobs, log_decisions=log_decisions)
    return results, jcts, summarise(results)


# -- command line --------------------------------------------------------------------------------


def register(subparsers) -> None:
    p = subparsers.add_parser("evaluate", help="agents, env heuristics and simulator policies on the same workloads",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--model", action="append", default=None,
                   help="SB3 model zip, or pretrained:NAME for a shipped policy (agents/pretrained: "
                        "pretrained:small-scarce, pretrained:small); repeat for several models, each gets its own row "
                        "(and several their mean, 'agent', with a CI over models); without it only the baselines run")
    p.add_argument("--label", action="append", default=None,
                   help="a model's row name; repeat: one per --model, in the same order (default: 'agent' for one "
                        "model, else each model's run folder name)")
    p.add_argument("--baselines", default="all",
                   help="all (default), env, sim, none, or names: fifo+tune,srtf+tune,sim:fifo+opt,env:tetris,…")
    p.add_argument("--sim-policies", default=None,
                   help="the simulator policies 'all' and 'sim' include (default: fifo+fair,fifo+tune,fifo+opt,"
                        "srtf+tune,tetris+greedy; 'none' for none)")
    p.add_argument("--episodes", type=int, default=None,
                   help=f"held-out seeds {EVAL_SEED_BASE}.. to use (default: the run's eval_episodes, else {DEFAULT_EPISODES})")
    p.add_argument("--seeds", default=None, help="workload seeds: 1000000..1000019 or a,b,c")
    p.add_argument("--env", dest="env_id", default=None, help="environment id (default: the run's, else Synergy-small-v0)")
    p.add_argument("--env-kwargs", nargs="*", default=None, metavar="KEY=VALUE", help="env kwargs (default: the run's)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (for --model)")
    p.add_argument("--json", type=Path, default=None, help="also write the summary rows (results.json) here")
    p.add_argument("--decisions", type=Path, default=None, metavar="DIR",
                   help="write DIR/<label>.jsonl per agent and env heuristic: one JSON line per decision of the first "
                        "seed's episode (round, time_h, job_id, slot, level, action, stop, invalid, n_valid, "
                        "filled_slots, the slot's features); simulator policies and the bound make no env "
                        "decisions and get no file")
    p.add_argument("--jobs-csv", type=Path, default=None, metavar="FILE",
                   help="write every job of every episode per policy: policy, source, seed, job_id, arrival_h, "
                        "start_h (first start), finish_h, jct_h, gpus, model")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: runs/evaluate-<timestamp>)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(run=main)


def jobs_table(results: pd.DataFrame) -> pd.DataFrame:
    """``--jobs-csv``: the ``jobs`` frames of :func:`run_policies` with policy, source and seed (:data:`JOBS_FIELDS`)."""
    frames = []
    for row in results.itertuples(index=False):
        jobs = getattr(row, "jobs", None)
        if isinstance(jobs, pd.DataFrame):
            frames.append(jobs.assign(policy=row.policy, source=row.source, seed=int(row.seed)))
    if not frames:
        return pd.DataFrame(columns=list(JOBS_FIELDS))
    return pd.concat(frames, ignore_index=True)[list(JOBS_FIELDS)]


def write_decisions(results: pd.DataFrame, folder: Path) -> list[Path]:
    """``--decisions``: ``folder/<label>.jsonl`` per policy with a decision log (the first seed's episode)."""
    written = []
    folder.mkdir(parents=True, exist_ok=True)
    for row in results.itertuples(index=False):
        log = getattr(row, "decision_log", None)
        if not isinstance(log, list):
            continue
        lines = [json.dumps({"seed": int(row.seed), **record}, allow_nan=False) for record in log]
        path = folder / decisions_file_name(str(row.policy))
        atomic_write_text(path, "".join(line + "\n" for line in lines))
        written.append(path)
    return written


def write_outputs(results: pd.DataFrame, jcts: dict[tuple[str, str], np.ndarray], summary: pd.DataFrame, out: Path,
                  json_path: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "results.csv", results[list(FIELDS)].to_csv(index=False))
    text = json.dumps(summary_records(summary), indent=2) + "\n"
    atomic_write_text(out / "results.json", text)
    if json_path is not None:
        atomic_write_text(json_path, text)
    load = results["load"].iloc[0]
    cdf = {(f"{name} ({source})", load): values for (name, source), values in jcts.items() if values.size}
    title = f"CDF of job completion times: {len(cdf)} policies, every job of the evaluation episodes"
    atomic_write_bytes(out / "jct_cdf.png", jct_cdf_png(cdf, title, jobs="jobs of the episodes"))


def _json_value(value):
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value


def _seeds(args: argparse.Namespace, models: list[Path]) -> list[int]:
    if args.seeds is not None:
        return list(parse_seed_list(args.seeds, "--seeds"))
    n = args.episodes
    if n is None:
        cfg = _run_config(models[0]) if models else None
        n = cfg.eval_episodes if cfg else DEFAULT_EPISODES
    if n < 1:
        raise ConfigError(f"--episodes must be a positive integer, got {n}")
    return [EVAL_SEED_BASE + i for i in range(n)]


def main(args: argparse.Namespace) -> int:
    out = check_output_dir(
        args.out or Path("runs") / f"evaluate-{datetime.now():%Y%m%d-%H%M%S}", "--out", OUTPUT_FILES,
        create_parents=args.out is None,
    )
    if args.json is not None:
        check_output_file(args.json, "--json", folders=((out, "--out"),))
    from synergy_gym.agents.pretrained_policies import resolve_model_argument

    models = [resolve_model_argument(m) for m in args.model or []]
    labels = agent_labels(models, args.label)
    sims = parse_sim_policies(args.sim_policies) if args.sim_policies is not None else None
    env_names, sim_names = parse_baselines(args.baselines, sims)
    written = {os.path.abspath(out / name): "--out" for name in OUTPUT_FILES}  # files the run writes, by flag
    if args.json is not None:
        written[os.path.abspath(args.json)] = "--json"
    folders: tuple[tuple[Path, str], ...] = ((out, "--out"),)
    if args.decisions is not None:
        names = decisions_files(labels, env_names)
        inside_out = os.path.abspath(args.decisions.parent) == os.path.abspath(out)  # out/DIR: created with --out
        check_output_dir(args.decisions, "--decisions", tuple(names), create_parents=inside_out)
        for name in names:
            path = os.path.abspath(args.decisions / name)
            if path in written:
                raise PathError(f"--decisions {args.decisions}: {name} would overwrite the {written[path]} file {path}")
            written[path] = "--decisions"
        folders += ((args.decisions, "--decisions"),)
    if args.jobs_csv is not None:
        check_output_file(args.jobs_csv, "--jobs-csv", folders=folders)
        other = written.get(os.path.abspath(args.jobs_csv))
        if other is not None:
            raise PathError(f"--jobs-csv {args.jobs_csv}: is also a file that {other} writes")
    for m in models:
        require_file(m, "model file", ConfigError)
    seeds = _seeds(args, models)
    env_kwargs = None
    if args.env_kwargs is not None:
        from synergy_gym.agents.train import parse_env_kwargs

        env_kwargs = parse_env_kwargs(args.env_kwargs)
    if args.env_id is not None:
        check_env_id(args.env_id)
    device = "cpu"
    if models:
        from synergy_gym.agents.train import resolve_device

        device = resolve_device(args.device)

    def progress(source: str, name: str) -> None:
        if not args.quiet:
            print(f"running {source} {name} on {len(seeds)} episodes", file=sys.stderr, flush=True)

    results, jcts, summary = run_evaluation(models, args.env_id, env_kwargs, seeds, device, env_names, sim_names,
                                            progress, labels=labels, keep_jobs=args.jobs_csv is not None,
                                            log_decisions=args.decisions is not None)
    print(format_summary(summary, seeds, str(results["env"].iloc[0])))
    write_outputs(results, jcts, summary, out, args.json)
    extra = [str(args.json)] if args.json is not None else []
    if args.decisions is not None:
        logs = write_decisions(results, args.decisions)
        extra.append(f"{len(logs)} decision logs (seed {seeds[0]}) to {args.decisions}")
    if args.jobs_csv is not None:
        table = jobs_table(results)
        atomic_write_text(args.jobs_csv, table.to_csv(index=False))
        extra.append(f"{len(table)} job rows to {args.jobs_csv}")
    print(f"wrote {', '.join(OUTPUT_FILES)} to {out}" + "".join(f"; {e}" for e in extra))
    return 0


if __name__ == "__main__":  # pragma: no cover
    from synergy_gym.cli import main as cli_main

    sys.exit(cli_main(["evaluate", *sys.argv[1:]]))
