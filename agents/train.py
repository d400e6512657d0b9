"""``synergy-gym train``: train a Stable-Baselines3 agent on any registered ``Synergy-*`` environment.

Environments: ``Synergy-v0``, ``Synergy-small-v0`` (the default),
``Synergy-scarce-v0`` and ``Synergy-small-scarce-v0`` (``synergy_gym.SCENARIOS``),
with any env keyword arguments (``--env-kwargs num_jobs=50 preemptive=true``).
Algorithms: ``maskable_ppo`` (sb3-contrib, honours the action masks; the
default), ``ppo``, ``a2c`` and ``dqn`` (these sample outside the mask; the
environment falls back to a valid action, ``invalid_action="fallback"``).
Observations (all keys but ``action_mask`` and ``slot_mask``) and rewards are
normalised with ``VecNormalize``; the policy uses
:class:`synergy_gym.agents.features.SynergyExtractor`. With ``bc_steps`` > 0 the policy
first imitates the env heuristic ``bc_policy`` (default ``fifo+tune``, see
:mod:`synergy_gym.baselines.env_heuristics`).

Options against the workload's variance (off by default; :mod:`synergy_gym.agents.config`):
``reward = "heuristic_relative"`` (:mod:`synergy_gym.agents.relative_reward`: the step reward is
−∫(N_agent − N_heuristic) dt / scale with the env heuristic ``relative_to`` run on the
same workload, so the return is −(ΣJCT − ΣJCT_heuristic) / scale),
``shared_workload = true`` (:mod:`synergy_gym.agents.shared_workload`: the k-th episode of every
training env runs the same workload), an entropy schedule (``ent_coef`` →
``ent_coef_final``), ``target_kl`` and ``clip_range``. On the CPU PyTorch runs with one
thread unless ``torch_threads`` says otherwise.

A run folder (``--out``, default ``runs/<env>__<algo>__<seed>__<time>``) holds

``config.json``       the resolved configuration
``versions.json``     package versions and the git commit of the code
``baselines.json``    every env heuristic's mean JCT on the evaluation seeds (scored
                      at the start), the best one, and the heuristic of the relative
                      reward
``tb/``               TensorBoard events: SB3's training curves (``train/ent_coef``
                      with an entropy schedule), ``eval/*`` (``mean_jct_h``,
                      ``p99_jct_h``, ``makespan_h``, ``invalid_action_rate`` – the
                      share of the agent's actions the env fell back from –,
                      ``jct_vs_best_heuristic``, the agent's mean JCT over the best
                      env heuristic's on the same seeds, and ``jct_vs_<heuristic>``
                      for each of ``reference_baselines``, default fifo+tune and
                      srtf+tune), every env heuristic as a constant line
                      (``baseline/<heuristic>/mean_jct_h``, from the start) and,
                      after a warm start, ``bc/accuracy`` and ``bc/final_loss``
``eval.csv``          every evaluation (the same columns); a row at step N describes the
                      model as saved at step N (its last row: ``last_model.zip``)
``best_model.zip``    the checkpoint with the lowest evaluation mean JCT, with
                      ``best_vecnormalize.pkl``
``last_model.zip``    the final checkpoint, with ``vecnormalize.pkl``; also written
                      when training is interrupted with Ctrl-C (exit status 130)
``checkpoints/``      the latest periodic checkpoint, every ``checkpoint_freq`` steps
                      (``rl_model_<step>_steps.zip`` with ``rl_model_vecnormalize_<step>_steps.pkl``)

Every model and statistics file is written atomically (:mod:`synergy_gym.agents.checkpoints`), so
a run killed outright (SIGKILL) leaves whole files and ``--resume RUN_DIR`` continues it from its
latest checkpoint, losing at most ``checkpoint_freq`` steps. ``--resume`` (a checkpoint zip or a run
folder, :mod:`synergy_gym.agents.resume`) trains up to ``timesteps`` in all ("resuming at step
13,108 of 20,000"), reseeded with ``seed`` + the checkpoint's step (its shared workloads continuing past
the checkpoint's, :mod:`synergy_gym.agents.shared_workload`): deterministic for a checkpoint and a seed,
though not the steps an uninterrupted run would have taken; a checkpoint at step 0 (Ctrl-C during the
warm start) imitates first. Nothing is written before the config, the checkpoint and the environment have
been checked, and hyper-parameters that cannot work together are refused
(:mod:`synergy_gym.agents.hyperparameters`).

Evaluation runs every ``eval_freq`` steps (when the first rollout at or after each multiple starts,
after the previous rollout's policy update), once at the end (after the last update) and, after a warm
start, once before reinforcement learning (step 0: the imitation is a checkpoint
candidate too), on validation workload seeds (from ``eval_seed_base`` = 2,000,000 on; training environments use
``seed + rank``; results are reported on the held-out seeds 1,000,000 on with
``synergy-gym evaluate``, never on the seeds that chose the checkpoint). The console shows the run folder at the start
and one line per evaluation (step, mean JCT, against the best heuristic, best so
far), with or without the progress bar (on a terminal a bar; when the output is not a
terminal, a plain line every 10 % of the steps, :mod:`synergy_gym.cli.progress`). With ``stop_on_stall_after`` N, training
ends at the first evaluation from step N on at which the best validation JCT is
older than the last third of the steps so far (evaluation step ≥ 1.5 × the best's): one environment
step later (a rollout that has started ends at its first step), which the final evaluation then scores.

This module holds :func:`train` and the command line; the parts are in
:mod:`synergy_gym.agents.vec_envs` (the training environments), :mod:`synergy_gym.agents.models`
(building and loading models), :mod:`synergy_gym.agents.imitation` (the warm start),
:mod:`synergy_gym.agents.callbacks` (evaluations, checkpoints, entropy schedule),
:mod:`synergy_gym.agents.baseline_scores` (the heuristics' scores) and
:mod:`synergy_gym.agents.run_folder` (the run folder's records).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import pandas as pd

from synergy_gym.agents.baseline_scores import best_heuristic, describe_baselines, evaluate_baselines, heuristic_means
from synergy_gym.agents.checkpoints import (
    remove_partial_files,
    save_model,
    save_stats,
    saved_count,
    set_aside_later_checkpoints,
)
from synergy_gym.agents.config import (
    BEST,
    TrainConfig,
)
from synergy_gym.agents.config_values import config_json
from synergy_gym.agents.extras import TRAIN_MODULES, require_extra
from synergy_gym.agents.hyperparameters import inert_settings
from synergy_gym.agents.imitation import behaviour_clone
from synergy_gym.agents.models import build_model, resolve_device, resume_model, torch_threads_set
from synergy_gym.agents.resume import (
    check_resume,
    evaluation_only,
    kept_history,
    kept_warm_start,
    resume_notes,
    resume_target,
    resumes_in_place,
)
from synergy_gym.agents.run_folder import (
    RUN_FILES,
    check_no_other_run,
    default_run_dir,
    keep_earlier_config,
    run_lock,
    unfinished_evaluation,
    write_baselines,
    write_run_records,
)
from synergy_gym.agents.shared_workload import resumed_episode
from synergy_gym.agents.train_options import config_from_args
from synergy_gym.agents.train_size import check_train_size
from synergy_gym.agents.vec_envs import check_env_kwargs, close_vec_env, make_vec_env
from synergy_gym.cli.files import check_output_dir, claim_folder
from synergy_gym.cli.staging import interrupt_of
from synergy_gym.errors import Interrupted, SynergyGymError

if TYPE_CHECKING:  # pragma: no cover
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv

#: Gets the console lines of a run (None: silent).
Log = Callable[[str], None]


def train(cfg: TrainConfig, out: Path | None = None, resume: Path | None = None, log: Log | None = print,
          callbacks: Sequence[Any] = ()) -> Path:
    """Train as ``cfg`` says (continuing the checkpoint or run folder ``resume`` if given); returns the run folder.

    Every input – the config, the output folder, the device, the environment, the checkpoint to resume
    (:func:`synergy_gym.agents.resume.check_resume`) – is checked before anything is written. A resumed
    run trains up to ``cfg.timesteps`` in all. ``log`` gets one line at the start (the run folder, the
    heuristics' scores, what trains where, a resume's step, settings without effect) and one per
    evaluation (None: silent). ``callbacks``: further SB3 callbacks. Ctrl-C (KeyboardInterrupt)
    during training saves ``last_model.zip`` (and ``vecnormalize.pkl``) and raises
    :class:`synergy_gym.errors.Interrupted` saying so. Without the ``rl`` extra (PyTorch, Stable-Baselines3,
    sb3-contrib, TensorBoard) it raises :class:`~synergy_gym.agents.extras.MissingExtraError` first.
    """
    require_extra(modules=TRAIN_MODULES)
    checkpoint = resume_target(resume) if resume is not None else None
    run_dir = check_output_dir(
        Path(out) if out is not None else default_run_dir(cfg), "--out", RUN_FILES, create_parents=out is None
    )
    in_place = checkpoint is not None and resumes_in_place(checkpoint, run_dir)
    if not in_place:
        check_no_other_run(run_dir)
    device = resolve_device(cfg.device)
    check_env_kwargs(cfg)
    start = check_resume(checkpoint, cfg, in_place) if checkpoint is not None else 0
    config_json(cfg)  # a setting config.json cannot hold is refused here, before the run folder is made (and locked)
    if out is None:  # a default folder: this run's alone, though another chose the same name in the same second
        run_dir = claim_folder(run_dir)
    with run_lock(run_dir):  # one training process in a run folder at a time (two resumes would mix their files)
        history = kept_history(run_dir, start) if in_place else None
        # The notes compare with the checkpoint's run as it was: before its config.json is rewritten (in place).
        notes = [*inert_settings(cfg, start), *(resume_notes(checkpoint, cfg, start, in_place) if checkpoint else [])]
        evaluate_only = checkpoint is not None and evaluation_only(checkpoint, cfg, start, in_place)
        # The final evaluation Ctrl-C cut short, of a run now given more timesteps: run first, as it would have been.
        redo_final = in_place and not evaluate_only and unfinished_evaluation(run_dir, start) is True
        if evaluate_only:
            notes.append(f"the run ended at step {start:,} and its final evaluation did not finish: this session runs "
                         "only that evaluation")
        first_episode = 0
        if checkpoint is not None:
            cfg = kept_warm_start(checkpoint, cfg, start)  # past step 0 the warm start the model had, not one given now
            first_episode = resumed_episode(start, saved_count(checkpoint, "n_envs") or cfg.n_envs)
        say = log or (lambda line: None)
        remove_partial_files(run_dir, RUN_FILES)  # a killed run's half-written files (when it continues here)
        earlier_config = keep_earlier_config(run_dir, cfg, start) if in_place else None
        superseded = set_aside_later_checkpoints(run_dir, start) if in_place else None
        write_run_records(run_dir, cfg, device)
        with torch_training_settings(torch_threads(cfg, device)):
            say(f"run folder: {run_dir}")
            baselines, relative_to = _score_baselines(cfg, run_dir, device, say)
            if checkpoint is not None:
                say(f"resuming at step {start:,} of {cfg.timesteps:,} from {checkpoint}")
            for note in notes:
                say(f"note: {note}")
            if superseded is not None:
                say(f"note: the run's checkpoints past step {start:,} are kept in {superseded} (this run replaces them)")
            if earlier_config is not None:
                say(f"note: config.json now holds this session's settings; those of the steps up to {start:,} are kept in "
                    f"{earlier_config}")
            _train_and_save(cfg, run_dir, device, baselines, relative_to, checkpoint, log, callbacks, history,
                            first_episode, evaluate_only=evaluate_only, redo_final=redo_final)
    return run_dir


def torch_threads(cfg: TrainConfig, device: str) -> int | None:
    """The intra-op threads PyTorch gets: ``cfg.torch_threads``, else 1 on the CPU (None: leave it)."""
    if cfg.torch_threads is not None:
        return cfg.torch_threads
    return 1 if device == "cpu" else None


@contextmanager
def torch_training_settings(threads: int | None) -> Iterator[None]:
    """PyTorch as training wants it: ``threads`` intra-op threads (None: unchanged), no distribution checks; restored after.

    torch.distributions checks every distribution's parameters when it is built (a Categorical
    per policy call: ~15 % of a rollout step's forward pass); the logits are the policy's own,
    so the checks are off while training (what is computed is unchanged).
    """
    import torch

    previous_validate = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        with torch_threads_set(threads):
            yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(previous_validate)


def _score_baselines(cfg: TrainConfig, run_dir: Path, device: str, say: Log) -> tuple[dict[str, pd.DataFrame], str | None]:
    """The env heuristics' results on the evaluation seeds and the relative reward's heuristic (``baselines.json``).

    Says the heuristics' scores and what the run will do; Ctrl-C here ends the run before training.
    """
    try:
        baselines = evaluate_baselines(cfg)
        means = heuristic_means(baselines)
        say(describe_baselines(means, len(cfg.eval_seeds)))
        relative_to = None
        if cfg.reward == "heuristic_relative":
            relative_to = best_heuristic(means) if cfg.relative_to == BEST else cfg.relative_to
        write_baselines(run_dir, cfg, means, relative_to)
        say(_describe_run(cfg, device, relative_to))
    except KeyboardInterrupt:
        raise Interrupted(f"before training started; {run_dir} holds only its config") from None
    return baselines, relative_to


def _describe_run(cfg: TrainConfig, device: str, relative_to: str | None) -> str:
    """The console line saying what trains where: algorithm, env, device and threads, envs, reward."""
    import torch

    threads = torch.get_num_threads()
    return (f"{cfg.algo} on {cfg.env_id}, {device} ({threads} torch thread{'s' if threads != 1 else ''}), "
            f"{cfg.n_envs} env{'s' if cfg.n_envs != 1 else ''}, reward {cfg.reward}"
            + (f" to {relative_to}" if relative_to else "") + (", shared workloads" if cfg.shared_workload else ""))


def _train_and_save(cfg: TrainConfig, run_dir: Path, device: str, baselines: dict[str, pd.DataFrame],
                    relative_to: str | None, resume: Path | None, log: Log | None, callbacks: Sequence[Any],
                    history: list[dict[str, Any]] | None = None, first_episode: int = 0,
                    evaluate_only: bool = False, redo_final: bool = False) -> None:
    """Build the environments and the model (or resume), learn, and save the last model; Ctrl-C saves, then says so.

    ``first_episode``: a resumed run's first shared-workload episode (:func:`~synergy_gym.agents.vec_envs.make_vec_env`).
    ``evaluate_only``, ``redo_final``: the run's final evaluation alone (:func:`~synergy_gym.agents.resume.evaluation_only`),
    or first (:func:`_learn`).
    """
    env: VecEnv | None = None
    model: BaseAlgorithm | None = None
    interrupted = False
    try:
        env = make_vec_env(cfg, relative_to=relative_to, first_episode=first_episode)
        if resume is not None:
            model = resume_model(resume, cfg, env, device, run_dir / "tb")
        else:
            model = build_model(cfg, env, device, run_dir / "tb")
        try:
            _learn(model, env, cfg, run_dir, baselines, resume is None, log, callbacks, history, evaluate_only,
                   redo_final)
        except (KeyboardInterrupt, SystemError) as exc:  # inside a numba kernel Ctrl-C comes back as a SystemError
            if interrupt_of(exc) is None:
                raise
            interrupted = True
        saved = _save_last_model(model, run_dir)
        stopped = None
        if interrupted:
            stopped = f"saved {' and '.join(saved)} at step {model.num_timesteps:,} in {run_dir}"
            if model.num_timesteps == 0 and cfg.imitates:  # during the warm start (or its evaluation)
                stopped += " (before reinforcement learning: --resume runs the warm start again)"
    except KeyboardInterrupt:  # before the model existed, or while saving
        interrupted = True
        raise Interrupted(f"{'no model saved' if model is None else 'saving was cut short'} in {run_dir}") from None
    finally:
        if env is not None:
            close_vec_env(env, interrupted)
    if stopped is not None:
        raise Interrupted(stopped)


def _learn(model: BaseAlgorithm, env: VecEnv, cfg: TrainConfig, run_dir: Path, baselines: dict[str, pd.DataFrame],
           fresh: bool, log: Log | None, callbacks: Sequence[Any], history: list[dict[str, Any]] | None = None,
           evaluate_only: bool = False, redo_final: bool = False) -> None:
    """The warm start (a model at step 0 that imitates: fresh, or resumed from a run stopped during its warm start),
    then reinforcement learning up to ``cfg.timesteps`` in all (a resumed model continues from its step count) with
    evaluations, once more at the end, and checkpoints. ``evaluate_only``: the final evaluation alone; ``redo_final``:
    the final evaluation Ctrl-C cut short first, then training on (a resume with larger ``timesteps``)."""
    from synergy_gym.agents.callbacks import (
        DepartureCredit,
        EntropySchedule,
        HeldOutEvaluation,
        HintLog,
        PeriodicCheckpoints,
        TrainingProgress,
    )
    from synergy_gym.cli.progress import is_terminal

    bc = behaviour_clone(model, env, cfg) if cfg.imitates and model.num_timesteps == 0 else None
    evaluation = HeldOutEvaluation(cfg, run_dir, baselines, bc, log=log, history=history, redo_final=redo_final)
    schedule = ([EntropySchedule(cfg.ent_coef, cfg.ent_coef_final, cfg.timesteps, first=0)]
                if cfg.ent_coef_final is not None and cfg.algo != "dqn" else [])
    checkpoints = [PeriodicCheckpoints(run_dir, cfg.checkpoint_freq)] if cfg.checkpoint_freq else []
    hints: list[Any] = [HintLog()] if cfg.hint_policy is not None else []
    hints += [DepartureCredit()] if cfg.hint_credit == "departures" else []  # after HintLog, which reads the rollout
    bar = cfg.progress_bar and is_terminal(sys.stdout)  # SB3's bar redraws in place: only on a terminal
    lines = [TrainingProgress()] if cfg.progress_bar and not bar else []
    model.learn(
        # SB3 adds the model's step count to total_timesteps when it is not reset: the steps left (none for a run
        # resumed only for the final evaluation it did not finish)
        total_timesteps=0 if evaluate_only else cfg.timesteps if fresh else max(1, cfg.timesteps - model.num_timesteps),
        callback=[evaluation, *schedule, *checkpoints, *hints, *lines, *callbacks],
        log_interval=1,  # SB3's training curves every rollout (A2C's default is every 100th; DQN's, every 4th episode)
        progress_bar=bar,
        tb_log_name="run",
        reset_num_timesteps=fresh,
    )
    # Once at the end, after the last policy update: evaluations run only when a rollout starts, and every
    # rollout steps the environments, so one at this step count has seen the final weights and statistics.
    if evaluation.evaluated_at != model.num_timesteps:
        evaluation.run_evaluation(final=True)


def _save_last_model(model: BaseAlgorithm, run_dir: Path) -> list[str]:
    """Save ``last_model.zip`` and the normalisation statistics (``vecnormalize.pkl``), atomically; the files' names."""
    saved = []
    vec_norm = model.get_vec_normalize_env()
    if vec_norm is not None:  # the statistics first: the model is never newer than its statistics
        save_stats(vec_norm, run_dir / "vecnormalize.pkl")
        saved.append("vecnormalize.pkl")
    save_model(model, run_dir / "last_model.zip")
    return ["last_model.zip", *saved]


# -- command line --------------------------------------------------------------------------


def main(args: argparse.Namespace) -> int:
    """``synergy-gym train``: train, then print the validation JCT against the heuristics and the run folder."""
    require_extra(modules=TRAIN_MODULES)  # before any file is read or written: one line naming the missing rl extra
    checkpoint = resume_target(args.resume) if args.resume is not None else None
    cfg = config_from_args(args, checkpoint)
    # (a run resumed past step 0 does not imitate again)
    check_train_size(cfg, args.allow_large, warm_start=checkpoint is None or saved_count(checkpoint, "num_timesteps") == 0)
    in_place = args.out is None and args.resume is not None and Path(args.resume).is_dir()  # --resume RUN_DIR
    out = args.resume if in_place else args.out  # None: train() makes the default runs/… folder (and runs/ itself)
    started = time.perf_counter()
    try:
        run_dir = train(cfg, out=out, resume=checkpoint)
    except gym.error.Error as exc:
        raise SynergyGymError(str(exc).splitlines()[0]) from None
    history = pd.read_csv(run_dir / "eval.csv")
    last = history.iloc[-1]
    scored = json.loads((run_dir / "baselines.json").read_text(encoding="utf-8"))
    means, best = scored["mean_jct_h"], scored["best"]
    names = [n for n in dict.fromkeys([*cfg.reference_baselines, best]) if n in means]
    ratios = ", ".join(f"{last['mean_jct_h'] / means[n]:.3f}× {n}" + (" (best heuristic)" if n == best else "")
                       for n in names)
    print(
        f"trained {cfg.algo} on {cfg.env_id} for {int(last['timesteps'])} steps in {time.perf_counter() - started:.0f} s; "
        f"validation mean JCT {last['mean_jct_h']:.2f} h" + (f" ({ratios})" if ratios else "")
    )
    print(f"run folder: {run_dir}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from synergy_gym.cli import main as cli_main

    sys.exit(cli_main(["train", *sys.argv[1:]]))
