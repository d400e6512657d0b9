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
* ``bound`` – lower bounds on every policy's mean JCT, taken as simulator policies by
  ``--sim-policies`` and ``--baselines`` and run by default: ``no-wait-bound``
  (:mod:`synergy_gym.sim.bounds`: every job alone at its demand) and ``contention-bound``
  (:mod:`synergy_gym.sim.contention_bound`: a linear program per seed that counts the
  cluster's capacity; its ``wall_s`` is the solve time, and it has a mean JCT only);
* ``agent`` – each ``--model`` (optional; repeatable). Each model gets its own
  row, named by its ``--label`` (repeatable, one per ``--model``, in the same
  order; default: the ``--model`` argument as given, e.g. ``pretrained:small-scarce``
  or ``runs/x/best_model.zip``); several models also give a row ``agent``: their
  mean with a 95 % CI over the models.

``--baselines`` picks the baselines: ``all`` (the default: every env heuristic
and the ``--sim-policies``), ``env``, ``sim``, ``none``, or names separated by
commas; a name that is both an env heuristic and a simulator policy (fifo+tune,
srtf+tune) runs both, ``env:NAME`` / ``sim:NAME`` pick one, and any simulator
policy ``<order>+<allocation>`` of ``compare`` may be named.

Statistics are over all jobs of each episode: ``mean_jct_h`` is the mean over
episodes of the episode's mean JCT, with ``mean_jct_ci95_h`` the half-width of
its t-based 95 % confidence interval over episodes; ``p99_jct_h`` and
``makespan_h`` are means over episodes. The table is sorted by mean JCT and
names the best env heuristic (the lowest mean JCT, never ``random``). Written to ``--out`` (default
``runs/evaluate-<timestamp>``): ``results.json`` (and ``--json FILE``),
``{"results": [...], "meta": {...}}`` (:mod:`synergy_gym.cli.results_json`) with
rows ``{policy, source, episodes, mean_jct_h, mean_jct_ci95_h, p99_jct_h,
makespan_h, truncated, wall_s, ci95_over, per_seed: {seed: mean_jct_h}}``, agent rows
also ``paired_vs_best_env`` (:func:`synergy_gym.agents.eval_summary.paired_vs_best_env`:
the per-seed difference to the best env heuristic, its 95 % CI over seeds, and on how
many seeds the agent is better); ``truncated`` counts the episodes cut off at ``max_rounds`` (the agents' mean
row: the seeds on which any model's was); ``results.csv``, one row per policy and seed, its ``load`` the
generator's jobs per hour (empty for jobs from a file: env kwarg ``workload=`` or ``trace=``);
``jct_cdf.png``, the CDF of the agents, the best env heuristic, fifo+tune and the
no-waiting bound (every policy with ``--plot-all``; the contention bound has no per-job JCTs and no curve):
of every job, or of the finished jobs where episodes were truncated (a curve's legend says how many were; a
policy that finished no job is named in the title).

Optional records: ``--decisions DIR`` writes, for every policy that acts
through the environment (agents and env heuristics; simulator policies and the
bound make no environment decisions and get none), ``DIR/<label>.jsonl`` with
one JSON line per decision of the first seed's episode: ``seed``, ``round``,
``time_h``, ``kind`` (``admit``, ``preempt`` or ``stop``), ``job_id``, ``slot``, ``level``,
``ahead`` (slot and level after the environment's fallback for a masked action; ahead:
placed before the running jobs), ``row`` (a preemption's running row), ``action``, ``stop``,
``invalid``, ``n_valid`` (valid actions, stop included), ``filled_slots`` and ``features``
(the chosen slot's – or row's – features ``{name: value}`` as observed); a stop has ``slot``,
``level``, ``job_id`` and ``features`` null. The label becomes the file name
with characters other than letters, digits and ``._+=-`` replaced by ``_``.
``--jobs-csv FILE`` writes every job of every episode of every policy:
``policy, source, seed, job_id, arrival_h, start_h, finish_h, jct_h, gpus,
model`` (start: the job's first start; for the no-waiting bound the first round boundary
at or after its arrival; the contention bound has no jobs; start, finish and JCT empty for a job that never
started / did not finish in an episode cut off at ``max_rounds``).

``--model pretrained:NAME`` takes a policy shipped with the package
(:mod:`synergy_gym.agents.pretrained_policies`; ``pretrained_names()``: ``small``, ``small-scarce``,
``small-scarce-preemptive``). With
``--model`` the environment and its kwargs come from the model's run (``config.json``,
RL Zoo's ``args.yml``) unless given; a model whose spaces do not fit the
environment is refused (:mod:`synergy_gym.agents.model_checks`). Seeds: ``--seeds``
(``1000000..1000019`` or ``a,b,c``), else ``--episodes`` held-out seeds from 1,000,000
(default: the run's ``eval_episodes``, or 5); both together are refused.

This module runs the evaluation (:func:`run_evaluation`, :func:`run_policies`) and holds
the command line; :mod:`synergy_gym.agents.eval_policies` picks and names the policies,
:mod:`synergy_gym.agents.models` loads the models, :mod:`synergy_gym.agents.eval_summary`
summarises the results and :mod:`synergy_gym.agents.eval_outputs` writes them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from synergy_gym.agents.config import DEFAULT_EPISODES, EVAL_SEED_BASE, check_device
from synergy_gym.agents.env_kwargs import parse_env_kwargs
from synergy_gym.agents.eval_outputs import (
    FIELDS,
    OUTPUT_FILES,
    Stage,
    check_record_paths,
    jobs_table,
    staged_writer,
    write_decisions,
    write_outputs,
)
from synergy_gym.agents.eval_policies import agent_labels, parse_baselines, parse_sim_policies
from synergy_gym.agents.eval_size import evaluation_estimate
from synergy_gym.agents.eval_summary import format_summary, summarise
from synergy_gym.agents.extras import require_extra
from synergy_gym.agents.model_checks import (
    check_agent_fits,
    check_env_id,
    check_trained_env,
    effective_env_kwargs,
    env_space_parts,
)
from synergy_gym.agents.models import (
    check_model_zip,
    device_without_models,
    inference_threads,
    load_agent,
    resolve_device,
)
from synergy_gym.agents.normalization import resolve_stats
from synergy_gym.agents.pretrained_policies import resolve_model_argument
from synergy_gym.agents.provenance import run_config, trained_on
from synergy_gym.cli.args import MAX_LISTED_SEEDS, parse_seed_list
from synergy_gym.cli.files import atomic_write_text, check_output_dir, check_output_file, require_file, timestamped_dir
from synergy_gym.cli.guards import check_size, quiet_notice
from synergy_gym.cli.progress import Progress
from synergy_gym.cli.results_json import build_meta, utc_now
from synergy_gym.cli.staging import is_new
from synergy_gym.env.config import EnvConfig
from synergy_gym.errors import ConfigError
from synergy_gym.experiments.evaluation import evaluate

if TYPE_CHECKING:  # pragma: no cover
    from synergy_gym.agents.wrappers import AgentPolicy

#: Told (source, name) as each policy starts to run; may return a callback told (episodes done, total) after each.
PolicyProgress = Callable[[str, str], "Callable[[int, int], None] | None"]


def run_policies(
    env_id: str,
    env_kwargs: dict[str, Any],
    seeds: list[int],
    env_names: tuple[str, ...] = (),
    sim_names: tuple[str, ...] = (),
    agents: list[AgentPolicy] | tuple = (),
    progress: PolicyProgress | None = None,
    keep_jobs: bool = False,
    log_decisions: bool = False,
) -> tuple[pd.DataFrame, dict[tuple[str, str], np.ndarray]]:
    """One row per (policy, seed) with a ``source`` column, and each policy's pooled per-job JCTs.

    ``random`` is seeded with each episode's seed, so its result for a seed does
    not depend on the other seeds evaluated. With ``keep_jobs`` a column ``jobs``
    holds each episode's jobs (:func:`synergy_gym.experiments.evaluation.job_frame`), with
    ``log_decisions`` a column ``decision_log`` the first seed's decisions of the
    agents and env heuristics (:mod:`synergy_gym.agents.eval_outputs`). The pooled JCTs are of the finished
    jobs (a truncated episode's unfinished ones have none); the column ``load`` is :func:`workload_load`.
    ``progress`` is told each policy as it starts, and the callback it returns each finished episode.
    """
    from synergy_gym.baselines.env_heuristics import env_heuristic
    from synergy_gym.baselines.sim_on_env import BOUNDS, simulate_on_env

    runs: list[tuple[str, str, Any]] = [("agent", a.name, a) for a in agents]
    runs += [("env", n, None) for n in env_names] + [("sim", n, None) for n in sim_names]
    frames, jcts = [], {}
    for source, name, policy in runs:
        episode = progress(source, name) if progress is not None else None
        if source == "sim":
            df = simulate_on_env(name, env_id, seeds, keep_jcts=True, keep_jobs=keep_jobs, on_episode=episode,
                                 **env_kwargs)
        else:  # (evaluate reseeds random with each episode's seed)
            policy = policy if policy is not None else env_heuristic(name, 0)
            df = evaluate(policy, env_id, seeds, name=name, keep_jcts=True, keep_jobs=keep_jobs,
                          log_decisions=log_decisions, on_episode=episode, **env_kwargs)
        df.insert(1, "source", "bound" if source == "sim" and name in BOUNDS else source)
        frames.append(df)
        jcts[(name, df["source"].iloc[0])] = np.concatenate([np.asarray(x, dtype=float) for x in df["jct_h"]])
    results = pd.concat(frames, ignore_index=True)
    for column in FIELDS:
        if column not in results:
            results[column] = np.nan
    for column in ("jobs_finished", "jobs_total", "decisions", "invalid_actions"):  # counts; empty for sim rows
        results[column] = results[column].astype("Int64")
    results["load"] = workload_load(env_id, env_kwargs)
    results["env"] = env_id
    return results, jcts


def workload_load(env_id: str, env_kwargs: dict[str, Any]) -> float:
    """The load (jobs per hour) of the episodes' workloads: the generator's ``jobs_per_hour``, NaN for fixed jobs.

    Jobs from a file (env kwarg ``workload=`` or ``trace=``) arrive at the file's times, so they have no load
    of the generator's: NaN (empty in ``results.csv``), as ``compare`` leaves a fixed workload's load.
    """
    kwargs = effective_env_kwargs(env_id, env_kwargs)
    if kwargs.get("workload") is not None or kwargs.get("trace") is not None:
        return float("nan")
    return float(kwargs["jobs_per_hour"])


def run_evaluation(
    models: list[Path],
    env_id: str | None,
    env_kwargs: dict[str, Any] | None,
    seeds: list[int],
    device: str = "cpu",
    env_names: tuple[str, ...] | None = None,
    sim_names: tuple[str, ...] | None = None,
    progress: PolicyProgress | None = None,
    labels: list[str] | None = None,
    keep_jobs: bool = False,
    log_decisions: bool = False,
    stats: list[Path | None] | None = None,
    normalize: bool = True,
    allow_env_mismatch: bool = False,
    say: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, dict[tuple[str, str], np.ndarray], pd.DataFrame]:
    """Per-seed results of every model and baseline, their pooled JCTs, and the per-policy summary.

    ``env_names`` / ``sim_names`` None: every env heuristic and the default simulator policies.
    ``labels``: the models' row names (:func:`synergy_gym.agents.eval_policies.agent_labels`).
    ``keep_jobs`` / ``log_decisions``: see :func:`run_policies`. ``stats``: each model's normalisation
    statistics (None: found beside it; :mod:`synergy_gym.agents.normalization`), ``normalize`` false to run
    every model on unnormalised observations. A model trained on another environment id or kwargs is
    refused unless ``allow_env_mismatch`` (then ``say`` is told the difference).
    """
    if env_names is None or sim_names is None:
        all_env, all_sim = parse_baselines("all")
        env_names = all_env if env_names is None else env_names
        sim_names = all_sim if sim_names is None else sim_names
    env_id, kwargs = evaluation_env(models, env_id, env_kwargs)
    env_parts = env_space_parts(env_id, kwargs)  # an unknown id or kwarg fails here, before any run
    given = list(stats or [None] * len(models))
    if len(given) != len(models):
        raise ConfigError(f"--vecnormalize: give one per --model ({len(models)}), got {len(given)}")
    checked = []
    for path, stats_path in zip(models, given):  # every model's file and statistics first, then the (slower) loading
        check_model_zip(path)
        checked.append(resolve_stats(path, stats_path, normalize))
    agents = []
    names = agent_labels(models, labels)
    for path, stats_path, name in zip(models, checked, names):
        cfg = run_config(path)
        agents.append(load_agent(path, cfg, device, name, stats=stats_path, normalize=stats_path is not None))
        check_agent_fits(path, agents[-1], cfg, env_id, kwargs, env_parts)  # spaces first: no flag makes those fit
        note = check_trained_env(path, trained_on(path), env_id, kwargs, allow=allow_env_mismatch)
        if note is not None and say is not None:
            say(note)
    if not agents and not env_names and not sim_names:
        raise ConfigError("nothing to evaluate: give --model or some --baselines")
    results, jcts = run_policies(env_id, kwargs, seeds, tuple(env_names), tuple(sim_names), agents, progress,
                                 keep_jobs=keep_jobs, log_decisions=log_decisions)
    return results, jcts, summarise(results)


def evaluation_env(models: list[Path], env_id: str | None, env_kwargs: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The environment id and kwargs the evaluation runs: those given, else what the first model with records was trained
    on (its run's ``config.json``, RL Zoo's ``args.yml``: :func:`~synergy_gym.agents.provenance.trained_on`), else the
    default."""
    base = next((r for r in (trained_on(m) for m in models) if r is not None and r.env_id is not None), None)
    env_id = env_id or (base.env_id if base and base.env_id else "Synergy-small-v0")
    return env_id, dict(base.env_kwargs) if base and env_kwargs is None else dict(env_kwargs or {})


# -- command line --------------------------------------------------------------------------------


def _seeds(args: argparse.Namespace, models: list[Path]) -> list[int]:
    """``--seeds``, else ``--episodes`` (default: the first model's run's ``eval_episodes``) held-out seeds; not both."""
    if args.seeds is not None and args.episodes is not None:
        raise ConfigError(f"--episodes {args.episodes} and --seeds {args.seeds!r} contradict each other: --seeds names "
                          "the episodes' seeds, --episodes counts held-out seeds from "
                          f"{EVAL_SEED_BASE:,}; give one of them")
    if args.seeds is not None:
        return list(parse_seed_list(args.seeds, "--seeds"))
    n = args.episodes
    if n is None:
        cfg = run_config(models[0]) if models else None
        n = cfg.eval_episodes if cfg else DEFAULT_EPISODES
    if n < 1:
        raise ConfigError(f"--episodes must be a positive integer, got {n}")
    if n > MAX_LISTED_SEEDS:  # (before the list is built: a billion seeds ran out of memory)
        raise ConfigError(f"--episodes {n:,}: at most {MAX_LISTED_SEEDS:,} episodes")
    return [EVAL_SEED_BASE + i for i in range(n)]


def main(args: argparse.Namespace) -> int:
    """``synergy-gym evaluate``: check every output path, run the policies, print the table and write the files."""
    if args.model:  # agents need the rl extra; the heuristics and simulator policies run without it
        require_extra()
    out = check_output_dir(
        args.out or timestamped_dir("evaluate"), "--out", OUTPUT_FILES,
        create_parents=args.out is None,
    )
    new = is_new(out)  # a folder made by another command while this one runs is not written into
    if args.json is not None:
        check_output_file(args.json, "--json", folders=((out, "--out"),),
                          inputs=[*((m, "--model") for m in args.model or []),
                                  *((v, "--vecnormalize") for v in args.vecnormalize or [])])
    started = utc_now()
    models = [resolve_model_argument(m) for m in args.model or []]
    labels = agent_labels(args.model or [], args.label)
    for flag, given in (("--no-normalize", args.no_normalize), ("--allow-env-mismatch", args.allow_env_mismatch)):
        if given and not models:  # it acts on models only: without one it would do nothing, silently
            raise ConfigError(f"{flag} needs --model")
    sims = parse_sim_policies(args.sim_policies) if args.sim_policies is not None else None
    env_names, sim_names = parse_baselines(args.baselines, sims)
    check_record_paths(out, args.json, args.decisions, args.jobs_csv, labels, env_names)
    for m in models:
        require_file(m, "--model file", ConfigError)
    stats = _stats_files(args, models)
    seeds = _seeds(args, models)
    env_kwargs = parse_env_kwargs(args.env_kwargs) if args.env_kwargs is not None else None
    if args.env_id is not None:
        check_env_id(args.env_id)
    # a bad name is refused either way; without a model, a device other than the CPU would do nothing
    device = resolve_device(args.device) if models else device_without_models(check_device(args.device), ("auto", "cpu"))
    effective = effective_env_kwargs(*evaluation_env(models, args.env_id, env_kwargs))
    EnvConfig.from_kwargs(effective)  # a bad value is its one-line error here, not a traceback in the estimate
    size = evaluation_estimate(effective, len(seeds), len(models), env_names, sim_names)
    check_size(size, args.allow_large)
    quiet_notice("evaluate", size, args.quiet)

    def progress(source: str, name: str) -> Callable[[int, int], None]:
        bar = Progress(f"{source} {name}", total=len(seeds), unit="episode", enabled=not args.quiet)

        def episode(done: int, total: int) -> None:
            bar.update(done, total)
            if done >= total:
                bar.close()

        return episode

    with inference_threads(device if models else None):
        results, jcts, summary = run_evaluation(models, args.env_id, env_kwargs, seeds, device, env_names, sim_names,
                                                progress, labels=labels, keep_jobs=args.jobs_csv is not None,
                                                log_decisions=args.decisions is not None, stats=stats,
                                                normalize=not args.no_normalize,
                                                allow_env_mismatch=args.allow_env_mismatch, say=_note)
    env_id, kwargs = evaluation_env(models, args.env_id, env_kwargs)
    print(format_summary(summary, seeds, str(results["env"].iloc[0]), kwargs))
    meta = build_meta(args, seeds, started, env_id, kwargs,
                      agents=[{"label": label, "model": model} for label, model in zip(labels, args.model or [])])
    with staged_writer(out, args.decisions, args.out is None, new) as stage:  # all files appear, or none
        write_outputs(results, jcts, summary, out, args.json, meta, plot_all=args.plot_all, stage=stage)
        extra = [str(args.json)] if args.json is not None else []
        extra += _write_records(args, results, seeds, stage)
    print(f"wrote {', '.join(OUTPUT_FILES)} to {stage.folder}" + "".join(f"; {e}" for e in extra))
    return 0


def _stats_files(args: argparse.Namespace, models: list[Path]) -> list[Path | None] | None:
    """``--vecnormalize``: one file per ``--model`` (None: found beside each model)."""
    if args.vecnormalize is None:
        return None
    if args.no_normalize:
        raise ConfigError("--vecnormalize and --no-normalize contradict each other: give one of them")
    if len(args.vecnormalize) != len(models):
        raise ConfigError(f"--vecnormalize: give one per --model ({len(models)} given), got {len(args.vecnormalize)}")
    return [require_file(path, "--vecnormalize", ConfigError) for path in args.vecnormalize]


def _note(line: str) -> None:
    print(f"synergy-gym evaluate: note: {line}", file=sys.stderr)


def _write_records(args: argparse.Namespace, results: pd.DataFrame, seeds: list[int], stage: Stage) -> list[str]:
    """Write the ``--decisions`` logs and the ``--jobs-csv`` table asked for; what was written, for the last line."""
    extra = []
    if args.decisions is not None:
        logs = write_decisions(results, args.decisions, stage)
        extra.append(f"{len(logs)} decision logs (seed {seeds[0]}) to {args.decisions}")
    if args.jobs_csv is not None:
        table = jobs_table(results)
        atomic_write_text(stage(args.jobs_csv), table.to_csv(index=False))
        extra.append(f"{len(table)} job rows to {args.jobs_csv}")
    return extra


if __name__ == "__main__":  # pragma: no cover
    from synergy_gym.cli import main as cli_main

    sys.exit(cli_main(["evaluate", *sys.argv[1:]]))
