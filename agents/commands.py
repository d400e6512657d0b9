"""The command lines of ``synergy-gym train``, ``evaluate`` and ``benchmark`` (the ``synergy_gym.commands`` entry points).

Building a parser imports only these light modules; the command's own module
(:mod:`synergy_gym.agents.train`, :mod:`synergy_gym.agents.evaluate`, :mod:`synergy_gym.agents.benchmark`),
with pandas and, once it needs them, PyTorch and Stable-Baselines3, is imported when the command runs
(:class:`~synergy_gym.cli.command.RunLater`).
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from synergy_gym.agents.benchmark_cells import DEFAULT_SEEDS, MODES
from synergy_gym.agents.config import (
    ACTION_HEADS,
    ALGOS,
    DEFAULT_EPISODES,
    DEVICES,
    EVAL_SEED_BASE,
    REWARDS,
    VEC_ENVS,
    TrainConfig,
)
from synergy_gym.cli.args import NonEmptyPath, OnceFile, OnceList
from synergy_gym.cli.command import RunLater
from synergy_gym.env.scenarios import SCENARIOS

TRAIN_DESCRIPTION = "``synergy-gym train``: train a Stable-Baselines3 agent on any registered ``Synergy-*`` environment."
EVALUATE_DESCRIPTION = ("``synergy-gym evaluate``: trained agents, environment heuristics and simulator policies on "
                        "identical workloads.")
BENCHMARK_DESCRIPTION = ("``synergy-gym benchmark``: the standard protocol – agents on every registered scenario and mode, "
                         "every environment heuristic and the bounds on the same held-out workloads, a normalised score "
                         "per cell (0 = env fifo+tune, 100 = the best env heuristic) and paired differences.")


def register_train(subparsers: argparse._SubParsersAction) -> None:
    """Add ``synergy-gym train`` (the ``synergy_gym.commands`` entry point)."""
    d = TrainConfig()  # the defaults, shown in --help (a config file or --resume's config.json may change them)
    p = subparsers.add_parser("train", help="train an SB3 agent on the environment", description=TRAIN_DESCRIPTION,
                              epilog="Defaults are TrainConfig's (agents/config.py); --config and --resume's config.json "
                                     "override them, and the options here override both.")
    p.add_argument("--algo", choices=None, default=None, help=f"one of {', '.join(ALGOS)} (default: {d.algo})")
    p.add_argument("--env", dest="env_id", default=None, help=f"one of {', '.join(SCENARIOS)} (default: {d.env_id})")
    p.add_argument("--env-kwargs", nargs="*", action="extend", default=None, metavar="KEY=VALUE",
                   help="env keyword arguments, e.g. num_jobs=50 preemptive=true (default: none, the scenario's)")
    p.add_argument("--timesteps", type=int, default=None, help=f"environment steps to train for (default: {d.timesteps:,})")
    p.add_argument("--n-envs", type=int, default=None, help=f"training environments (default: {d.n_envs})")
    p.add_argument("--vec-env", default=None, choices=VEC_ENVS,
                   help="subproc: one worker process per environment (when --n-envs > 1); dummy: all in this "
                        "process, faster on a few cores; auto: subproc on more cores than --n-envs, else in this "
                        f"process with the same results as subproc (default: {d.vec_env})")
    p.add_argument("--seed", type=int, default=None,
                   help=f"training seed; envs use seed + rank, a resumed run seed + its checkpoint's step (default: {d.seed})")
    p.add_argument("--device", default=None,
                   help=f"one of {', '.join(DEVICES)} or cuda:N; auto: CUDA when PyTorch sees it (default: {d.device})")
    p.add_argument("--torch-threads", type=int, default=None, metavar="N",
                   help="PyTorch threads (default: 1 on the CPU – small MLPs are slower with more – and PyTorch's "
                        "own on CUDA)")
    p.add_argument("--config", action=OnceFile, default=None,
                   help="TOML or YAML file of any TrainConfig settings, given once, or the name of a reference "
                        "config the package ships: small, small_scarce, small_scarce_preemptive, … (agents/configs/"
                        "NAME.toml) (default: none)")
    p.add_argument("--action-head", default=None, choices=ACTION_HEADS,
                   help=f"linear: SB3's; per_slot: one shared scorer per slot (agents/slot_policy.py) "
                        f"(default: {d.action_head})")
    p.add_argument("--bc-policy", default=None, metavar="NAME",
                   help=f"warm start: imitate this env heuristic first; none: no warm start (default: {d.bc_policy})")
    p.add_argument("--bc-steps", type=int, default=None,
                   help=f"env steps of the heuristic to imitate; 0: no warm start (default: {d.bc_steps})")
    p.add_argument("--attention-heads", type=int, default=None, metavar="N",
                   help="one self-attention layer with N heads over the slot and running-row embeddings; 0: none "
                        f"(default: {d.attention_heads})")
    p.add_argument("--dagger-rounds", type=int, default=None, metavar="N",
                   help="after the warm start, N rounds of DAgger: run the policy, label its states with --bc-policy's "
                        f"actions, fit again on all states so far (default: {d.dagger_rounds})")
    p.add_argument("--reward", default=None, choices=REWARDS,
                   help="absolute: the env's −∫N dt/scale; heuristic_relative: minus the --relative-to heuristic's "
                        f"on the same workload (default: {d.reward})")
    p.add_argument("--relative-to", default=None, metavar="NAME",
                   help=f"env heuristic of the relative reward; best: the best on the evaluation seeds "
                        f"(default: {d.relative_to})")
    p.add_argument("--shared-workload", default=None, action=argparse.BooleanOptionalAction,
                   help="the k-th episode of every training env runs the same workload "
                        f"(default: {'on' if d.shared_workload else 'off'})")
    p.add_argument("--ent-coef-final", type=float, default=None, metavar="X",
                   help=f"entropy coefficient at the end, linear from ent_coef ({d.ent_coef}) (default: constant)")
    p.add_argument("--gamma", type=float, default=None, metavar="X", help=f"discount factor (default: {d.gamma})")
    p.add_argument("--eval-freq", type=int, default=None, help=f"evaluate every N steps (default: {d.eval_freq:,})")
    p.add_argument("--stop-on-stall-after", type=int, default=None, metavar="N",
                   help="from step N on, end training once the validation JCT has not improved over the last third "
                        "of the steps (default: never, run all timesteps)")
    p.add_argument("--eval-episodes", type=int, default=None,
                   help=f"evaluation seeds per evaluation, from {d.eval_seed_base:,} on (default: {d.eval_episodes})")
    p.add_argument("--out", action=NonEmptyPath, default=None, help="run folder (default: runs/<env>__<algo>__<seed>__<time>)")
    p.add_argument("--resume", type=Path, default=None, metavar="CHECKPOINT|RUN_DIR",
                   help="continue a run up to --timesteps in all: from a checkpoint zip (best_model.zip, last_model.zip, "
                        "checkpoints/rl_model_<step>_steps.zip), or from a run folder's latest checkpoint, continuing "
                        "in that folder unless --out says otherwise (after a crash or kill: --resume RUN_DIR); the "
                        "run's config.json applies, --config and the options here override its hyper-parameters "
                        "(env kwargs merge key by key); its algorithm and network stay as trained; it is reseeded "
                        "with --seed + the checkpoint's step, so it trains on new workloads (default: none)")
    p.add_argument("--checkpoint-freq", type=int, default=None, metavar="N",
                   help="save the model and its normalisation statistics to RUN_DIR/checkpoints every N steps (the "
                        f"latest kept; a killed run loses at most N steps); 0: none (default: {d.checkpoint_freq:,})")
    p.add_argument("--allow-large", action="store_true",
                   help="train a run estimated to need over a week or too much memory (default: refused)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar; the evaluation lines are printed either way (default: progress bar on)")
    p.set_defaults(run=RunLater("synergy_gym.agents.train"), unknown_hint=_config_only_hint)


def _config_only_hint(unknown: list[str]) -> str:
    """A hint for ``--some-setting`` that is a TrainConfig setting without an option of its own ('' if none is)."""
    settings = {f.name for f in fields(TrainConfig)}
    named = [name for token in unknown if token.startswith("--")
             if (name := token[2:].split("=", 1)[0].replace("-", "_")) in settings]
    if not named:
        return ""
    return (f" ({', '.join(named)}: {'a setting' if len(named) == 1 else 'settings'} of a --config file (TOML or "
            f"YAML), e.g. {named[0]} = …, with no option of {'its' if len(named) == 1 else 'their'} own)")


def register_evaluate(subparsers: argparse._SubParsersAction) -> None:
    """Add ``synergy-gym evaluate`` (the ``synergy_gym.commands`` entry point)."""
    p = subparsers.add_parser("evaluate", help="agents, env heuristics and simulator policies on the same workloads",
                              description=EVALUATE_DESCRIPTION)
    p.add_argument("--model", action="append", default=None,
                   help="SB3 model zip, or pretrained:NAME for a shipped policy (agents/pretrained: "
                        "pretrained:small-scarce, pretrained:small, pretrained:small-scarce-preemptive); repeat for "
                        "several models, each gets its own row (and several their mean, 'agent', with a CI over "
                        "models); without it only the baselines run")
    p.add_argument("--label", action="append", default=None,
                   help="a model's row name; repeat: one per --model, in the same order (default: the --model "
                        "argument as given)")
    p.add_argument("--baselines", action=OnceList, default="all",
                   help="all (default), env, sim, none, or names: fifo+tune,srtf+tune,sim:fifo+opt,env:tetris,…")
    p.add_argument("--sim-policies", action=OnceList, default=None,
                   help="the simulator policies and bounds 'all' and 'sim' include, separated by commas: any "
                        "<order>+<allocation>, no-wait-bound, contention-bound; 'none' for none (default: fifo+fair,"
                        "fifo+tune,fifo+opt,srtf+tune,tetris+greedy,no-wait-bound,contention-bound)")
    p.add_argument("--episodes", type=int, default=None,
                   help=f"held-out seeds {EVAL_SEED_BASE}.. to use, not with --seeds "
                        f"(default: the run's eval_episodes, else {DEFAULT_EPISODES})")
    p.add_argument("--seeds", action=OnceList, default=None,
                   help="workload seeds: 1000000..1000019 or a,b,c (not with --episodes)")
    p.add_argument("--env", dest="env_id", default=None, help="environment id (default: the run's, else Synergy-small-v0)")
    p.add_argument("--env-kwargs", nargs="*", action="extend", default=None, metavar="KEY=VALUE",
                   help="env kwargs (default: the run's)")
    p.add_argument("--vecnormalize", action="append", type=Path, default=None, metavar="FILE",
                   help="a model's normalisation statistics (VecNormalize pickle); repeat: one per --model, in the same "
                        "order (default: found beside the model, or in RL Zoo's <run>/<env>/vecnormalize.pkl; a model "
                        "whose statistics are missing is refused)")
    p.add_argument("--no-normalize", action="store_true",
                   help="evaluate the models on unnormalised observations on purpose (default: with their statistics)")
    p.add_argument("--allow-env-mismatch", action="store_true",
                   help="evaluate a model on another environment id or kwargs than its run was trained on "
                        "(default: refused, naming both)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (for --model)")
    p.add_argument("--json", action=NonEmptyPath, default=None,
                   help="also write results.json (the summary rows and meta) here")
    p.add_argument("--decisions", action=NonEmptyPath, default=None, metavar="DIR",
                   help="write DIR/<label>.jsonl per agent and env heuristic (characters other than letters, digits "
                        "and ._+=- in the label as _: pretrained:small → pretrained_small.jsonl): one JSON line per "
                        "decision of the first "
                        "seed's episode (round, time_h, job_id, slot, level, action, stop, invalid, n_valid, "
                        "filled_slots, the slot's features); simulator policies and the bound make no env "
                        "decisions and get no file")
    p.add_argument("--jobs-csv", action=NonEmptyPath, default=None, metavar="FILE",
                   help="write every job of every episode per policy: policy, source, seed, job_id, arrival_h, "
                        "start_h (first start), finish_h, jct_h, gpus, model")
    p.add_argument("--plot-all", action="store_true",
                   help="jct_cdf.png shows every policy (default: the agents, the best env heuristic, fifo+tune and "
                        "the no-waiting bound)")
    p.add_argument("--out", action=NonEmptyPath, default=None, help="output folder (default: runs/evaluate-<timestamp>)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--allow-large", action="store_true",
                   help="run an evaluation estimated to need over an hour or too much memory (default: refused)")
    p.set_defaults(run=RunLater("synergy_gym.agents.evaluate"))


def register_benchmark(subparsers: argparse._SubParsersAction) -> None:
    """Add ``synergy-gym benchmark`` (the ``synergy_gym.commands`` entry point)."""
    p = subparsers.add_parser("benchmark", help="agents on every scenario and mode, scored against the env heuristics",
                              description=BENCHMARK_DESCRIPTION)
    p.add_argument("--model", action="append", default=None,
                   help="SB3 model zip, or pretrained:NAME for a shipped policy (pretrained:small-scarce, "
                        "pretrained:small, pretrained:small-scarce-preemptive); repeat for several models; it runs "
                        "in every cell whose spaces it fits, the others are listed with the reason "
                        "(default: none, the heuristics and bounds alone)")
    p.add_argument("--label", action="append", default=None,
                   help="a model's row name; repeat: one per --model, in the same order (default: the --model argument)")
    p.add_argument("--env", action="append", default=None, metavar="ID",
                   help=f"environment ids, separated by commas or repeated, or all (default: all: {', '.join(SCENARIOS)})")
    p.add_argument("--mode", action="append", default=None, metavar="MODE",
                   help=f"modes, separated by commas or repeated, or all: default (the scenario as registered), "
                        f"preemptive (preemptive=true) (default: all: {', '.join(MODES)})")
    p.add_argument("--seeds", action=OnceList, default=None,
                   help=f"workload seeds: 1000000..1000019 or a,b,c (default: {DEFAULT_SEEDS}, the held-out seeds)")
    p.add_argument("--env-kwargs", nargs="*", action="extend", default=None, metavar="KEY=VALUE",
                   help="env kwargs for every cell on top of the scenario's and the mode's, e.g. num_jobs=50; "
                        "repeated groups add up, each key once (default: none; preemptive is the mode's)")
    p.add_argument("--contention-bound", action="store_true",
                   help="also the contention-aware bound: an LP per seed, cached once solved; about 0.5 s a seed on "
                        "Synergy-small-v0, 1 s on Synergy-v0, 7 s on Synergy-small-scarce-v0 and 12 s on Synergy-scarce-v0 "
                        "(default: the no-waiting bound alone)")
    p.add_argument("--no-normalize", action="store_true",
                   help="run every --model on unnormalised observations: models trained without VecNormalize "
                        "(default: with the statistics found beside each model; missing ones are refused)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (for --model; only with it)")
    p.add_argument("--json", action=NonEmptyPath, default=None,
                   help="also write results.json (the rows and meta) here; not one of --out's own files")
    p.add_argument("--out", action=NonEmptyPath, default=None, help="output folder (default: runs/benchmark-<timestamp>)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--allow-large", action="store_true",
                   help="run a benchmark estimated to need over an hour or too much memory (default: refused)")
    p.set_defaults(run=RunLater("synergy_gym.agents.benchmark"))
