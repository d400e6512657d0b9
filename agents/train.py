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
``eval.csv``          every evaluation (the same columns)
``best_model.zip``    the checkpoint with the lowest evaluation mean JCT, with
                      ``best_vecnormalize.pkl``
``last_model.zip``    the final checkpoint, with ``vecnormalize.pkl``; also written
                      when training is interrupted with Ctrl-C (exit status 130)

Evaluation runs every ``eval_freq`` steps, once at the end and, after a warm
start, once before reinforcement learning (step 0: the imitation is a checkpoint
candidate too), on validation workload seeds (from ``eval_seed_base`` = 2,000,000 on; training environments use
``seed + rank``; results are reported on the held-out seeds 1,000,000 on with
``synergy-gym evaluate``, never on the seeds that chose the checkpoint). The console shows the run folder at the start
and one line per evaluation (step, mean JCT, against the best heuristic, best so
far), with or without the progress bar. With ``stop_on_stall_after`` N, training
ends at the first evaluation from step N on at which the best validation JCT is
older than the last third of the steps so far (evaluation step ≥ 1.5 × the best's).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from synergy_gym.agents.config import ACTION_HEADS, ALGOS, BEST, DEVICES, REWARDS, VEC_ENVS, TrainConfig, load_config_file
from synergy_gym.agents.wrappers import AgentPolicy
from synergy_gym.baselines.env_heuristics import env_heuristics
from synergy_gym.cli.files import atomic_write_text, check_input_file, check_output_dir
from synergy_gym.env.scenarios import SCENARIOS
from synergy_gym.errors import ConfigError, Interrupted, SynergyGymError
from synergy_gym.experiments.evaluation import evaluate

#: Observation keys that are masks: not normalised (the feature extractor and MaskablePPO read them as 0/1).
MASK_KEYS = ("action_mask", "slot_mask")
#: What a run folder holds (see above); checked before training starts.
RUN_FILES = ("config.json", "versions.json", "baselines.json", "tb/", "eval.csv", "best_model.zip",
             "best_vecnormalize.pkl", "last_model.zip", "vecnormalize.pkl")


def algorithm_class(algo: str):
    if algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    import stable_baselines3 as sb3

    return {"ppo": sb3.PPO, "a2c": sb3.A2C, "dqn": sb3.DQN}[algo]


def resolve_device(device: str) -> str:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: PyTorch sees no CUDA device on this machine (use --device auto or cpu)")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def check_env_kwargs(cfg: TrainConfig) -> None:
    """Build the environment once, so a bad env id or kwarg fails before anything is written."""
    import synergy_gym  # noqa: F401  (registers the environments)

    try:
        gym.spec(cfg.env_id)
    except gym.error.Error:
        raise ConfigError(f"unknown env {cfg.env_id!r}; valid: {', '.join(SCENARIOS)}") from None
    gym.make(cfg.env_id, **cfg.env_kwargs).close()


def _env_factory(env_id: str, env_kwargs: dict, relative_to: str | None = None, shared_base: int | None = None,
                 worker: bool = False, run_cache=None):
    """A picklable env constructor: Monitor(SharedWorkload(HeuristicRelativeReward(env))), as configured.

    The relative reward sits inside the shared seeds (it must see the workload seed the
    episode runs) and inside Monitor (``rollout/ep_rew_mean`` is then the relative return).
    With ``worker`` (SubprocVecEnv) Ctrl-C is ignored in the env's process: the main
    process saves the model and closes the workers. ``run_cache``: a
    :class:`~synergy_gym.agents.relative_reward.HeuristicRunCache` the environments made in this
    process share (DummyVecEnv).
    """

    def make() -> gym.Env:
        import signal

        from stable_baselines3.common.monitor import Monitor

        import synergy_gym  # noqa: F401

        if worker:  # a SubprocVecEnv worker: the main process handles Ctrl-C
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        env = gym.make(env_id, **env_kwargs)
        if relative_to is not None:
            from synergy_gym.agents.relative_reward import HeuristicRelativeReward

            env = HeuristicRelativeReward(env, relative_to, run_cache=run_cache)
        if shared_base is not None:
            from synergy_gym.agents.shared_workload import SharedWorkload

            env = SharedWorkload(env, shared_base)
        return Monitor(env)

    return make


def make_vec_env(cfg: TrainConfig, relative_to: str | None = None):
    """The training envs (``seed + rank``), normalised as configured.

    ``relative_to``: the env heuristic of ``reward = "heuristic_relative"`` (default
    ``cfg.relative_to``; ``"best"`` is resolved by scoring the heuristics on the evaluation seeds).
    """
    from stable_baselines3.common.vec_env import (
        DummyVecEnv,
        SubprocVecEnv,
        VecNormalize,
    )

    from synergy_gym.agents.shared_workload import shared_seed_base

    if cfg.reward == "heuristic_relative":
        relative_to = relative_to or cfg.relative_to
        if relative_to == BEST:
            relative_to = best_heuristic(heuristic_means(evaluate_baselines(cfg)))
    else:
        relative_to = None
    shared_base = shared_seed_base(cfg.seed) if cfg.shared_workload else None
    if cfg.vec_env == "subproc" and cfg.n_envs > 1:
        factory = _env_factory(cfg.env_id, cfg.env_kwargs, relative_to, shared_base, worker=True)
        vec = SubprocVecEnv([factory] * cfg.n_envs)
    else:
        from synergy_gym.agents.relative_reward import HeuristicRunCache

        run_cache = HeuristicRunCache() if relative_to is not None and shared_base is not None else None
        factory = _env_factory(cfg.env_id, cfg.env_kwargs, relative_to, shared_base, run_cache=run_cache)
        vec = DummyVecEnv([factory] * cfg.n_envs)
    vec.seed(cfg.seed)
    if cfg.normalize_obs or cfg.normalize_reward:
        keys = [k for k in vec.observation_space.spaces if k not in MASK_KEYS]
        vec = VecNormalize(vec, norm_obs=cfg.normalize_obs, norm_reward=cfg.normalize_reward,
                           norm_obs_keys=keys, gamma=cfg.gamma)
    return vec


def build_model(cfg: TrainConfig, env, device: str, tb_dir: Path):
    from synergy_gym.agents.features import SynergyExtractor

    policy_kwargs = {
        "features_extractor_class": SynergyExtractor,
        "features_extractor_kwargs": {"global_dim": cfg.global_dim, "slot_dim": cfg.slot_dim},
        "net_arch": list(cfg.net_arch),
    }
    policy: Any = "MultiInputPolicy"
    if cfg.action_head == "per_slot":
        from synergy_gym.agents.slot_policy import MaskableSlotPolicy, SlotPolicy

        policy = MaskableSlotPolicy if cfg.algo == "maskable_ppo" else SlotPolicy
        policy_kwargs["net_arch"] = {"pi": [], "vf": list(cfg.net_arch)}
    common = {"learning_rate": cfg.learning_rate, "gamma": cfg.gamma, "seed": cfg.seed, "device": device,
              "tensorboard_log": str(tb_dir), "policy_kwargs": policy_kwargs, "verbose": 0}
    cls = algorithm_class(cfg.algo)
    if cfg.algo in ("maskable_ppo", "ppo"):
        return cls(policy, env, n_steps=cfg.n_steps, batch_size=cfg.batch_size, n_epochs=cfg.n_epochs,
                   gae_lambda=cfg.gae_lambda, ent_coef=cfg.ent_coef, clip_range=cfg.clip_range, vf_coef=cfg.vf_coef,
                   max_grad_norm=cfg.max_grad_norm, target_kl=cfg.target_kl, **common)
    if cfg.algo == "a2c":
        return cls(policy, env, n_steps=cfg.n_steps, gae_lambda=cfg.gae_lambda, ent_coef=cfg.ent_coef,
                   vf_coef=cfg.vf_coef, max_grad_norm=cfg.max_grad_norm, **common)
    return cls("MultiInputPolicy", env, buffer_size=cfg.buffer_size, learning_starts=cfg.learning_starts,
               batch_size=cfg.batch_size, exploration_fraction=cfg.exploration_fraction,
               target_update_interval=cfg.target_update_interval, train_freq=cfg.train_freq, **common)


def behaviour_clone(model, env, cfg: TrainConfig) -> dict[str, float]:
    """Warm start: fit the policy to the env heuristic ``bc_policy`` and the value function to its returns.

    Runs the heuristic (:mod:`synergy_gym.baselines.env_heuristics`, reading the raw,
    unnormalised observations and masks) for ``bc_steps`` steps in the training
    environments, then does ``bc_epochs`` passes of supervised learning –
    cross-entropy on its actions (with the action masks for MaskablePPO) and
    squared error on the discounted (normalised) returns – with the policy's own
    optimiser at ``bc_learning_rate``. Returns the number of samples, the last minibatch's loss and the
    fraction of samples whose most likely action is the heuristic's.
    """
    import torch

    heuristic = env_heuristics(seed=cfg.seed)[cfg.bc_policy]
    steps = max(1, cfg.bc_steps // cfg.n_envs)
    raw = getattr(env, "get_original_obs", None)  # VecNormalize: the observations before normalisation
    obs = env.reset()
    observations, masks, actions, rewards, dones = [], [], [], [], []
    for _ in range(steps):
        plain = raw() if raw is not None else obs
        mask = np.asarray(plain["action_mask"]) > 0
        action, _ = heuristic.predict(plain, action_masks=mask)
        observations.append({k: v.copy() for k, v in obs.items()})
        masks.append(mask)
        actions.append(np.asarray(action, dtype=np.int64).reshape(cfg.n_envs))
        obs, reward, done, _ = env.step(actions[-1])
        rewards.append(reward)
        dones.append(done)
    returns = np.zeros((steps, cfg.n_envs), dtype=np.float32)
    running = np.zeros(cfg.n_envs, dtype=np.float32)
    for t in reversed(range(steps)):
        running = rewards[t] + cfg.gamma * running * (1.0 - dones[t])
        returns[t] = running
    batch_obs = {k: np.concatenate([o[k] for o in observations]) for k in observations[0]}
    batch_mask = np.concatenate(masks)
    batch_action = np.concatenate(actions)
    batch_ret = returns.reshape(-1)
    policy = model.policy
    maskable = cfg.algo == "maskable_ppo"
    device = policy.device

    def distribution(idx):
        obs_t = {k: torch.as_tensor(v[idx], device=device) for k, v in batch_obs.items()}
        dist = policy.get_distribution(obs_t, action_masks=batch_mask[idx]) if maskable else policy.get_distribution(obs_t)
        return obs_t, dist

    rng = np.random.default_rng(cfg.seed)
    n = batch_action.shape[0]
    rates = [group["lr"] for group in policy.optimizer.param_groups]
    for group in policy.optimizer.param_groups:
        group["lr"] = cfg.bc_learning_rate or cfg.learning_rate
    loss_value = float("nan")
    policy.set_training_mode(True)
    for _ in range(cfg.bc_epochs):
        for idx in np.array_split(rng.permutation(n), max(1, n // cfg.batch_size)):
            obs_t, dist = distribution(idx)
            values = policy.predict_values(obs_t).flatten()
            ret = torch.as_tensor(batch_ret[idx], device=device)
            target = torch.as_tensor(batch_action[idx], device=device)
            loss = -dist.log_prob(target).mean() + cfg.vf_coef * torch.nn.functional.mse_loss(values, ret)
            policy.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            policy.optimizer.step()
            loss_value = float(loss.detach())
    for group, rate in zip(policy.optimizer.param_groups, rates):
        group["lr"] = rate
    policy.set_training_mode(False)
    agree = 0
    with torch.no_grad():
        for idx in np.array_split(np.arange(n), max(1, n // 1024)):
            _, dist = distribution(idx)
            agree += int((dist.mode().cpu().numpy() == batch_action[idx]).sum())
    return {"bc_samples": n, "bc_final_loss": loss_value, "bc_accuracy": agree / n}


def evaluate_baselines(cfg: TrainConfig) -> dict[str, pd.DataFrame]:
    """Every env heuristic (:func:`synergy_gym.baselines.env_heuristics.env_heuristics`) on the evaluation seeds.

    ``random`` included: every heuristic takes about as long as one evaluation of the
    agent (0.1 s an episode on ``Synergy-small-*``, 0.7 s on the 128-GPU ids).
    """
    heuristics = env_heuristics(seed=cfg.seed)
    names = list(heuristics) + [n for n in cfg.reference_baselines if n not in heuristics]
    return {name: evaluate(heuristics[name], cfg.env_id, cfg.eval_seeds, name=name, **cfg.env_kwargs)
            for name in names}


def heuristic_means(baselines: dict[str, pd.DataFrame]) -> dict[str, float]:
    return {name: float(frame["mean_jct_h"].mean()) for name, frame in baselines.items()}


def best_heuristic(means: dict[str, float]) -> str:
    """The heuristic with the lowest mean JCT (``random`` only if it is the only one)."""
    candidates = {n: m for n, m in means.items() if n != "random"} or means
    return min(candidates, key=lambda n: (candidates[n], n))


class EntropySchedule:
    """``ent_coef`` from ``start`` to ``final``, linear in the steps of this ``learn`` call (built lazily: SB3)."""

    def __new__(cls, start: float, final: float, total_timesteps: int):
        from stable_baselines3.common.callbacks import BaseCallback

        class _EntropySchedule(BaseCallback):
            def __init__(self) -> None:
                super().__init__()
                self.start, self.final, self.total = float(start), float(final), int(total_timesteps)
                self.first = 0

            def value(self, timesteps: int) -> float:
                progress = min(1.0, max(0.0, (timesteps - self.first) / self.total))
                return self.start + (self.final - self.start) * progress

            def _on_training_start(self) -> None:
                self.first = self.num_timesteps
                self.model.ent_coef = self.start

            def _on_rollout_end(self) -> None:  # before the policy update that uses this rollout
                self.model.ent_coef = self.value(self.num_timesteps)
                self.logger.record("train/ent_coef", self.model.ent_coef)

            def _on_step(self) -> bool:
                return True

        return _EntropySchedule()


def validation_stalled(step: int, best_step: int, after: int | None) -> bool:
    """Whether training stops at an evaluation at ``step``: from ``after`` on, once the best is older than a third of it.

    "Older than the last third": ``step`` ≥ 1.5 × ``best_step``, the step of the lowest validation JCT so far.
    """
    return after is not None and step >= after and step >= 1.5 * best_step


def _eval_callback(cfg: TrainConfig, run_dir: Path, baselines: dict[str, pd.DataFrame], bc: dict[str, float] | None = None,
                   log: Callable[[str], None] | None = None):
    from stable_baselines3.common.callbacks import BaseCallback

    means = heuristic_means(baselines)
    best_name = best_heuristic(means) if means else None
    references = [n for n in cfg.reference_baselines if n in means]

    class HeldOutEvaluation(BaseCallback):
        """Evaluate on held-out seeds every ``eval_freq`` steps and at the end; log and checkpoint."""

        def __init__(self) -> None:
            super().__init__()
            self.best = float("inf")
            self.best_step = 0
            self.next_eval = cfg.eval_freq
            self.history: list[dict[str, Any]] = []
            #: Set when training ended early because the validation JCT stalled (``stop_on_stall_after``).
            self.stalled_at: int | None = None

        def _on_training_start(self) -> None:
            # A resumed run starts at its checkpoint's step count.
            self.next_eval = (self.num_timesteps // cfg.eval_freq + 1) * cfg.eval_freq
            for name, mean in means.items():  # the heuristics' scores, at the start
                self.logger.record(f"baseline/{name}/mean_jct_h", mean)
            if bc:  # the warm start's fit
                self.logger.record("bc/accuracy", bc["bc_accuracy"])
                self.logger.record("bc/final_loss", bc["bc_final_loss"])
            self.logger.dump(self.num_timesteps)
            if bc:  # the imitation itself is a checkpoint candidate (step 0)
                self.run_evaluation()

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_eval:
                self.next_eval += cfg.eval_freq
                self.run_evaluation()
                return not self.stalled()
            return True

        def stalled(self) -> bool:
            if not validation_stalled(self.num_timesteps, self.best_step, cfg.stop_on_stall_after):
                return False
            self.stalled_at = self.num_timesteps
            if log is not None:
                log(f"stop  step {self.num_timesteps:>10,}  the validation JCT has not improved since step "
                    f"{self.best_step:,} (the last third of the run): training ends here")
            return True

        def run_evaluation(self) -> dict[str, Any]:
            vec_norm = self.model.get_vec_normalize_env()
            policy = AgentPolicy(self.model, vec_norm)
            df = evaluate(policy, cfg.env_id, cfg.eval_seeds, name="agent", **cfg.env_kwargs)
            row = {
                "timesteps": self.num_timesteps,
                "mean_jct_h": float(df["mean_jct_h"].mean()),
                "p99_jct_h": float(df["p99_jct_h"].mean()),
                "makespan_h": float(df["makespan_h"].mean()),
            }
            if {"invalid_actions", "decisions"} <= set(df.columns):  # masked actions the env fell back from
                row["invalid_action_rate"] = float(df["invalid_actions"].sum() / max(1.0, df["decisions"].sum()))
            for name in references:
                row[f"jct_vs_{name}"] = row["mean_jct_h"] / means[name]
            if best_name is not None:
                row["jct_vs_best_heuristic"] = row["mean_jct_h"] / means[best_name]
            for key in list(row)[1:]:
                self.logger.record(f"eval/{key}", row[key])
            for name, mean in means.items():
                self.logger.record(f"baseline/{name}/mean_jct_h", mean)
            self.logger.dump(self.num_timesteps)
            self.history.append(row)
            atomic_write_text(run_dir / "eval.csv", pd.DataFrame(self.history).to_csv(index=False))
            improved = row["mean_jct_h"] < self.best
            if improved:
                self.best = row["mean_jct_h"]
                self.best_step = self.num_timesteps
                self.model.save(run_dir / "best_model.zip")
                if vec_norm is not None:
                    vec_norm.save(str(run_dir / "best_vecnormalize.pkl"))
            if log is not None:
                versus = f"{row['jct_vs_best_heuristic']:.3f}× {best_name}" if best_name is not None else "–"
                log(f"eval  step {self.num_timesteps:>10,}  mean JCT {row['mean_jct_h']:8.3f} h  {versus}  "
                    f"best so far {self.best:8.3f} h" + ("  (new best: best_model.zip)" if improved else ""))
            return row

    return HeldOutEvaluation()


def _describe_baselines(means: dict[str, float], n_seeds: int) -> str:
    best = best_heuristic(means)
    ranked = sorted(means, key=lambda n: means[n])
    return (f"env heuristics on {n_seeds} evaluation seed{'s' if n_seeds != 1 else ''} (mean JCT, h): "
            + ", ".join(f"{n} {means[n]:.3f}" + (" (best)" if n == best else "") for n in ranked))


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    for pkg in ("synergy-gym", "numpy", "pandas", "gymnasium", "torch", "stable-baselines3", "sb3-contrib", "tensorboard"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10)
        out["git_commit"] = commit.stdout.strip() or None
        out["git_dirty"] = bool(dirty.stdout.strip()) if commit.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        out["git_commit"] = out["git_dirty"] = None
    return out


def default_run_dir(cfg: TrainConfig) -> Path:
    return Path("runs") / f"{cfg.env_id}__{cfg.algo}__{cfg.seed}__{datetime.now():%Y%m%d-%H%M%S}"


def torch_threads(cfg: TrainConfig, device: str) -> int | None:
    """The intra-op threads PyTorch gets: ``cfg.torch_threads``, else 1 on the CPU (None: leave it)."""
    if cfg.torch_threads is not None:
        return cfg.torch_threads
    return 1 if device == "cpu" else None


def train(cfg: TrainConfig, out: Path | None = None, resume: Path | None = None,
          log: Callable[[str], None] | None = print, callbacks: Sequence[Any] = ()) -> Path:
    """Train as ``cfg`` says (continuing the checkpoint ``resume`` if given); returns the run folder.

    ``log`` gets one line at the start (the run folder, the heuristics' scores) and one per
    evaluation (None: silent). ``callbacks``: further SB3 callbacks. Ctrl-C (KeyboardInterrupt)
    during training saves ``last_model.zip`` (and ``vecnormalize.pkl``) and raises
    :class:`synergy_gym.errors.Interrupted` saying so.
    """
    import torch

    if resume is not None:
        resume = check_input_file(resume, "--resume")
    run_dir = check_output_dir(
        Path(out) if out is not None else default_run_dir(cfg), "--out", RUN_FILES, create_parents=out is None
    )
    device = resolve_device(cfg.device)
    check_env_kwargs(cfg)
    say = log or (lambda line: None)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.json", json.dumps(cfg.to_dict(), indent=2) + "\n")
    atomic_write_text(run_dir / "versions.json", json.dumps(versions(), indent=2) + "\n")
    threads = torch_threads(cfg, device)
    previous_threads = torch.get_num_threads()
    # torch.distributions checks every distribution's parameters when it is built (a Categorical
    # per policy call: ~15 % of a rollout step's forward pass); the logits are the policy's own,
    # so the checks are off while training (what is computed is unchanged). Restored afterwards.
    previous_validate = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    say(f"run folder: {run_dir}")
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        baselines = evaluate_baselines(cfg)
        means = heuristic_means(baselines)
        say(_describe_baselines(means, len(cfg.eval_seeds)))
        relative_to = None
        if cfg.reward == "heuristic_relative":
            relative_to = best_heuristic(means) if cfg.relative_to == BEST else cfg.relative_to
        atomic_write_text(run_dir / "baselines.json", json.dumps(
            {"eval_seeds": cfg.eval_seeds, "mean_jct_h": means, "best": best_heuristic(means),
             "relative_to": relative_to}, indent=2) + "\n")
        say(f"{cfg.algo} on {cfg.env_id}, {device} ({torch.get_num_threads()} torch thread"
            f"{'s' if torch.get_num_threads() != 1 else ''}), {cfg.n_envs} env{'s' if cfg.n_envs != 1 else ''}, "
            f"reward {cfg.reward}" + (f" to {relative_to}" if relative_to else "")
            + (", shared workloads" if cfg.shared_workload else ""))
    except KeyboardInterrupt:
        torch.set_num_threads(previous_threads)
        torch.distributions.Distribution.set_default_validate_args(previous_validate)
        raise Interrupted(f"before training started; {run_dir} holds only its config") from None
    env = None
    model = None
    interrupted = False
    try:
        env = make_vec_env(cfg, relative_to=relative_to)
        bc: dict[str, float] | None = None
        if resume is not None:
            model = load_model(resume, cfg.algo, device, env=env)
            stats = resume.parent / ("best_vecnormalize.pkl" if resume.name.startswith("best") else "vecnormalize.pkl")
            if stats.is_file() and hasattr(env, "obs_rms"):
                from stable_baselines3.common.vec_env import VecNormalize

                loaded = VecNormalize.load(str(stats), env.venv)
                env.obs_rms, env.ret_rms = loaded.obs_rms, loaded.ret_rms
            model.tensorboard_log = str(run_dir / "tb")
        else:
            model = build_model(cfg, env, device, run_dir / "tb")
        try:
            if resume is None and cfg.imitates:
                bc = behaviour_clone(model, env, cfg)
            callback = _eval_callback(cfg, run_dir, baselines, bc, log=log)
            schedule = ([EntropySchedule(cfg.ent_coef, cfg.ent_coef_final, cfg.timesteps)]
                        if cfg.ent_coef_final is not None and cfg.algo != "dqn" else [])
            model.learn(
                total_timesteps=cfg.timesteps,
                callback=[callback, *schedule, *callbacks],
                progress_bar=cfg.progress_bar,
                tb_log_name="run",
                reset_num_timesteps=resume is None,
            )
            if not callback.history or callback.history[-1]["timesteps"] != model.num_timesteps:
                callback.run_evaluation()  # always once at the end
        except KeyboardInterrupt:
            interrupted = True
        model.save(run_dir / "last_model.zip")
        saved = ["last_model.zip"]
        if model.get_vec_normalize_env() is not None:
            model.get_vec_normalize_env().save(str(run_dir / "vecnormalize.pkl"))
            saved.append("vecnormalize.pkl")
    except KeyboardInterrupt:  # before the model existed, or while saving
        interrupted = True
        raise Interrupted(f"{'no model saved' if model is None else 'saving was cut short'} in {run_dir}") from None
    finally:
        torch.set_num_threads(previous_threads)
        torch.distributions.Distribution.set_default_validate_args(previous_validate)
        if env is not None:
            close_vec_env(env, interrupted)
    if interrupted:
        raise Interrupted(f"saved {' and '.join(saved)} at step {model.num_timesteps:,} in {run_dir}")
    return run_dir


def close_vec_env(env, interrupted: bool = False) -> None:
    """Close the training envs; after Ctrl-C, without waiting for the step results of an interrupted rollout.

    SB3's ``SubprocVecEnv.close`` first receives the result of a pending ``step_async``
    from every worker. Ctrl-C can land inside ``step_wait`` after some of those results
    were already received, and receiving again from those workers then blocks forever:
    the training process hung instead of exiting. After an interruption the pending
    results are dropped (each worker finishes its step, then reads "close" and exits).
    """
    from stable_baselines3.common.vec_env import SubprocVecEnv

    inner = env
    while hasattr(inner, "venv"):  # VecNormalize and other wrappers
        inner = inner.venv
    if interrupted and isinstance(inner, SubprocVecEnv):
        inner.waiting = False
    try:
        env.close()
    except (OSError, EOFError):  # a worker that is already gone
        pass


def load_model(path: Path, algo: str | None, device: str, env=None):
    """An SB3 model from ``path``; ``algo`` None tries each algorithm."""
    import zipfile

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"model file {str(path)!r} does not exist")
    if not zipfile.is_zipfile(path) or "data" not in zipfile.ZipFile(path).namelist():
        raise ConfigError(f"{path} is not a Stable-Baselines3 model zip")
    candidates = [algo] if algo else list(ALGOS)
    last_error: Exception | None = None
    for name in candidates:
        try:
            return algorithm_class(name).load(str(path), env=env, device=device)
        except Exception as exc:  # a different algorithm's zip, or a damaged one
            last_error = exc
            if "spaces do not match" in str(exc):
                raise ConfigError(
                    f"{path} was trained on other observation/action spaces than the environment has now "
                    "(its action space changed to slot × level and stop); train a new model"
                ) from None
    raise ConfigError(f"{path} could not be loaded as a {'/'.join(candidates)} model: {str(last_error).splitlines()[0]}")


# -- command line --------------------------------------------------------------------------


def parse_env_kwargs(items: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs; values are parsed as JSON where possible (numbers, true/false), else strings."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--env-kwargs {item!r}: expected key=value")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def register(subparsers) -> None:
    d = TrainConfig()  # the defaults, shown in --help (a config file or --resume's config.json may change them)
    p = subparsers.add_parser("train", help="train an SB3 agent on the environment", description=__doc__.split("\n\n")[0],
                              epilog="Defaults are TrainConfig's (agents/config.py); --config and --resume's config.json "
                                     "override them, and the options here override both.")
    p.add_argument("--algo", choices=None, default=None, help=f"one of {', '.join(ALGOS)} (default: {d.algo})")
    p.add_argument("--env", dest="env_id", default=None, help=f"one of {', '.join(SCENARIOS)} (default: {d.env_id})")
    p.add_argument("--env-kwargs", nargs="*", default=None, metavar="KEY=VALUE",
                   help="env keyword arguments, e.g. num_jobs=50 preemptive=true (default: none, the scenario's)")
    p.add_argument("--timesteps", type=int, default=None, help=f"environment steps to train for (default: {d.timesteps:,})")
    p.add_argument("--n-envs", type=int, default=None, help=f"training environments (default: {d.n_envs})")
    p.add_argument("--vec-env", default=None, choices=VEC_ENVS,
                   help="subproc: one worker process per environment (when --n-envs > 1); dummy: all in this "
                        f"process, faster on a few cores (default: {d.vec_env})")
    p.add_argument("--seed", type=int, default=None, help=f"training seed; envs use seed + rank (default: {d.seed})")
    p.add_argument("--device", default=None,
                   help=f"one of {', '.join(DEVICES)}; auto: CUDA when PyTorch sees it (default: {d.device})")
    p.add_argument("--torch-threads", type=int, default=None, metavar="N",
                   help="PyTorch threads (default: 1 on the CPU – small MLPs are slower with more – and PyTorch's "
                        "own on CUDA)")
    p.add_argument("--config", type=Path, default=None,
                   help="TOML or YAML file of any TrainConfig settings (default: none)")
    p.add_argument("--action-head", default=None, choices=ACTION_HEADS,
                   help=f"linear: SB3's; per_slot: one shared scorer per slot (agents/slot_policy.py) "
                        f"(default: {d.action_head})")
    p.add_argument("--bc-policy", default=None, metavar="NAME",
                   help=f"warm start: imitate this env heuristic first; none: no warm start (default: {d.bc_policy})")
    p.add_argument("--bc-steps", type=int, default=None,
                   help=f"env steps of the heuristic to imitate; 0: no warm start (default: {d.bc_steps})")
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
    p.add_argument("--out", type=Path, default=None, help="run folder (default: runs/<env>__<algo>__<seed>__<time>)")
    p.add_argument("--resume", type=Path, default=None,
                   help="continue from a checkpoint zip; its run's config applies (default: none)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar; the evaluation lines are printed either way (default: progress bar on)")
    p.set_defaults(run=main)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    values: dict[str, Any] = {}
    if args.resume is not None:
        saved = Path(args.resume).parent / "config.json"
        if saved.is_file():
            values.update(load_config_file(saved))
    if args.config is not None:
        values.update(load_config_file(args.config))
    overrides = {
        "algo": args.algo, "env_id": args.env_id, "timesteps": args.timesteps, "n_envs": args.n_envs,
        "seed": args.seed, "device": args.device, "eval_freq": args.eval_freq, "eval_episodes": args.eval_episodes,
        "bc_policy": args.bc_policy, "bc_steps": args.bc_steps, "torch_threads": getattr(args, "torch_threads", None),
        "reward": getattr(args, "reward", None), "relative_to": getattr(args, "relative_to", None),
        "shared_workload": getattr(args, "shared_workload", None), "ent_coef_final": getattr(args, "ent_coef_final", None),
        "stop_on_stall_after": getattr(args, "stop_on_stall_after", None), "gamma": getattr(args, "gamma", None),
        "action_head": getattr(args, "action_head", None), "vec_env": getattr(args, "vec_env", None),
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    if args.env_kwargs is not None:
        values["env_kwargs"] = {**values.get("env_kwargs", {}), **parse_env_kwargs(args.env_kwargs)}
    if args.no_progress:
        values["progress_bar"] = False
    return TrainConfig.from_mapping(values, source=str(args.config) if args.config else "train")


def main(args: argparse.Namespace) -> int:
    if args.resume is not None:
        check_input_file(args.resume, "--resume")
    cfg = config_from_args(args)
    out = check_output_dir(args.out or default_run_dir(cfg), "--out", RUN_FILES, create_parents=args.out is None)
    started = time.perf_counter()
    try:
        run_dir = train(cfg, out=out, resume=args.resume)
    except gym.error.Error as exc:
        raise SynergyGymError(str(exc).splitlines()[0]) from None
    history = pd.read_csv(run_dir / "eval.csv")
    last = history.iloc[-1]
    scored = json.loads((run_dir / "baselines.json").read_text())
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
