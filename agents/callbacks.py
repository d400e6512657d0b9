"""Stable-Baselines3 callbacks of a training run: the periodic validation with checkpoints, and the entropy schedule.

:class:`HeldOutEvaluation` evaluates the agent on the run's validation seeds every
``eval_freq`` steps (and, after a warm start, at step 0), logs ``eval/*`` and the
env heuristics' scores to TensorBoard, appends to ``eval.csv``, saves
``best_model.zip`` whenever the mean JCT improves and stops training once the
validation JCT stalls (:func:`validation_stalled`). It evaluates when a rollout starts, after the
policy update of the previous one, so that an evaluation at step N describes exactly the weights
and statistics a checkpoint saved at step N holds (the run's last step is evaluated after the last
update, by :func:`synergy_gym.agents.train.train`). :class:`PeriodicCheckpoints` saves a checkpoint
every ``checkpoint_freq`` steps (:mod:`synergy_gym.agents.checkpoints`). :class:`EntropySchedule` moves
``ent_coef`` linearly to ``ent_coef_final``; :class:`HintLog` logs how often a hinted policy departs
from its heuristic, and :class:`DepartureCredit` credits only its departures. :class:`TrainingProgress` shows the steps with
:class:`synergy_gym.cli.progress.Progress` (plain lines when the output is not a terminal). Importing
this module imports Stable-Baselines3 (``synergy_gym.agents.train`` does so only when training starts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from synergy_gym.agents.baseline_scores import best_heuristic, heuristic_means
from synergy_gym.agents.checkpoints import save_checkpoint, save_model, save_stats
from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.run_folder import UNFINISHED_EVALUATION
from synergy_gym.agents.wrappers import AgentPolicy
from synergy_gym.cli.files import atomic_write_text
from synergy_gym.cli.progress import Progress
from synergy_gym.experiments.evaluation import evaluate


class TrainingProgress(BaseCallback):
    """The steps of this ``learn`` call as a :class:`synergy_gym.cli.progress.Progress` on stderr."""

    def __init__(self) -> None:
        super().__init__()
        self.first = 0
        self.bar: Progress | None = None

    def _on_training_start(self) -> None:
        self.first = self.model.num_timesteps
        self.bar = Progress("training", total=int(self.locals["total_timesteps"]) - self.first, unit="step")

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.update(self.model.num_timesteps - self.first)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()


class EntropySchedule(BaseCallback):
    """``ent_coef`` from ``start`` to ``final``, linear over ``total_timesteps`` steps from step ``first``.

    ``first`` None: from the step this ``learn`` call starts at; a run passes 0 and its ``timesteps``, so that a
    resumed run is on the line from step 0 to its ``timesteps`` in all: with the same ``timesteps`` it continues the
    schedule where the checkpoint left it, and a resume that raises ``timesteps`` stretches the line (at the
    checkpoint's step ``ent_coef`` is then higher than the checkpoint's when it falls).
    """

    def __init__(self, start: float, final: float, total_timesteps: int, first: int | None = None) -> None:
        super().__init__()
        self.start, self.final, self.total = float(start), float(final), int(total_timesteps)
        self.fixed_first = first
        self.first = first or 0

    def value(self, timesteps: int) -> float:
        progress = min(1.0, max(0.0, (timesteps - self.first) / self.total))
        return self.start + (self.final - self.start) * progress

    def _set(self, ent_coef: float) -> None:
        if not isinstance(self.model, OnPolicyAlgorithm):
            raise TypeError("an entropy schedule needs an actor-critic algorithm (maskable_ppo, ppo, a2c)")
        self.model.ent_coef = ent_coef

    def _on_training_start(self) -> None:
        self.first = self.num_timesteps if self.fixed_first is None else self.fixed_first
        self._set(self.value(self.num_timesteps))

    def _on_rollout_end(self) -> None:  # before the policy update that uses this rollout
        ent_coef = self.value(self.num_timesteps)
        self._set(ent_coef)
        self.logger.record("train/ent_coef", ent_coef)

    def _on_step(self) -> bool:
        return True


def followed_hint(model: OnPolicyAlgorithm) -> np.ndarray:
    """For each step of ``model``'s rollout buffer ``(n_steps, n_envs)``: whether its action was the hint's."""
    from synergy_gym.agents.heuristic_hint import HINT_KEY

    buffer: Any = model.rollout_buffer  # a Dict buffer: observations by key
    chosen = np.take_along_axis(buffer.observations[HINT_KEY], buffer.actions.astype(int), axis=-1)
    return chosen[..., 0] >= 0.5


class HintLog(BaseCallback):
    """With ``hint_policy`` (:mod:`synergy_gym.agents.heuristic_hint`): TensorBoard's ``train/hint_weight`` (the
    learnt weight of the heuristic's action in the logits) and ``rollout/hint_departures`` (the share of the rollout's
    actions that were not the heuristic's), each rollout."""

    def _on_rollout_end(self) -> None:
        assert isinstance(self.model, OnPolicyAlgorithm)
        self.logger.record("rollout/hint_departures", float((~followed_hint(self.model)).mean()))
        head: Any = self.model.policy.action_net  # the per-slot head (SlotScorer)
        self.logger.record("train/hint_weight", float(head.hint_weight.detach()))

    def _on_step(self) -> bool:
        return True


class DepartureCredit(BaseCallback):
    """``hint_credit = "departures"``: after each rollout's advantages are computed, zero those of the steps whose action
    was the hint's, so that PPO's policy loss counts only the departures (the model does not normalise advantages,
    which would make the zeros non-zero). The value function still learns from every step's return. The idea: a
    departure's cost shows over the following steps, and would otherwise lower the hint's probability there."""

    def _on_rollout_end(self) -> None:
        assert isinstance(self.model, OnPolicyAlgorithm)
        self.model.rollout_buffer.advantages[followed_hint(self.model)] = 0.0

    def _on_step(self) -> bool:
        return True


class PeriodicCheckpoints(BaseCallback):
    """Every ``freq`` steps, save the model and its statistics to ``<run>/checkpoints/`` (the latest kept).

    Saved when a rollout starts, after the policy update of the previous one, so that a checkpoint's
    step count is exactly the experience its weights were trained on
    (:func:`synergy_gym.agents.checkpoints.save_checkpoint`: atomic, statistics first).
    """

    def __init__(self, run_dir: Path, freq: int) -> None:
        super().__init__()
        self.run_dir, self.freq = Path(run_dir), int(freq)
        self.next_save = self.freq
        self.saved: list[int] = []

    def _on_training_start(self) -> None:
        self.next_save = (self.num_timesteps // self.freq + 1) * self.freq

    def _on_rollout_start(self) -> None:
        if self.num_timesteps >= self.next_save:
            self.next_save = (self.num_timesteps // self.freq + 1) * self.freq
            save_checkpoint(self.model, self.run_dir)
            self.saved.append(self.num_timesteps)

    def _on_step(self) -> bool:
        return True


def validation_stalled(step: int, best_step: int, after: int | None) -> bool:
    """Whether training stops at an evaluation at ``step``: from ``after`` on, once the best is older than a third of it.

    "Older than the last third": ``step`` ≥ 1.5 × ``best_step``, the step of the lowest validation JCT so far.
    """
    return after is not None and step >= after and step >= 1.5 * best_step


class HeldOutEvaluation(BaseCallback):
    """Evaluate on the validation seeds every ``eval_freq`` steps; log and checkpoint to ``run_dir``.

    An evaluation runs when a rollout starts at or after the next multiple of ``eval_freq``: after the
    policy update of the previous rollout (the weights change only there), so that its row at step N
    describes the model as saved at step N. The run's end, after the last update, is evaluated by
    :func:`synergy_gym.agents.train.train` (:meth:`run_evaluation`). ``baselines``: the env heuristics'
    results on those seeds (:func:`synergy_gym.agents.baseline_scores.evaluate_baselines`); ``bc``: the warm
    start's fit (:func:`synergy_gym.agents.imitation.behaviour_clone`), if there was one;
    ``log``: gets one line per evaluation. :attr:`history` holds every evaluation's row.
    """

    def __init__(self, cfg: TrainConfig, run_dir: Path, baselines: dict[str, pd.DataFrame],
                 bc: dict[str, float] | None = None, log: Callable[[str], None] | None = None,
                 history: list[dict[str, Any]] | None = None, redo_final: bool = False) -> None:
        super().__init__()
        self.cfg, self.run_dir, self.bc, self.log = cfg, run_dir, bc, log
        self.means = heuristic_means(baselines)
        self.best_name = best_heuristic(self.means) if self.means else None
        self.references = [n for n in cfg.reference_baselines if n in self.means]
        self.best = float("inf")
        self.best_step = 0
        self.next_eval = cfg.eval_freq
        #: Whether the run continues in its own folder with its evaluations (``history`` given, empty or not).
        self.keeps_history = history is not None
        #: Run the final evaluation of the checkpoint's step first (Ctrl-C cut it short; the run now trains on).
        self.redo_final = redo_final
        #: The step count of this run's latest evaluation (None: none yet).
        self.evaluated_at: int | None = None
        #: Set when the validation JCT stalled: training ends at the next step.
        self.stop = False
        #: Every evaluation's row; ``history``: those of the run before a resume in its own folder (the best of
        #: them is what ``best_model.zip`` holds).
        self.history: list[dict[str, Any]] = list(history or [])
        if self.history:
            best = min(self.history, key=lambda row: row["mean_jct_h"])
            self.best, self.best_step = float(best["mean_jct_h"]), int(best["timesteps"])

    def _on_training_start(self) -> None:
        # A resumed run starts at its checkpoint's step count. The heuristics' scores and the warm start's fit
        # are written at the start.
        step, freq = self.num_timesteps, self.cfg.eval_freq
        self.next_eval = (step // freq + 1) * freq
        values = {f"baseline/{name}/mean_jct_h": mean for name, mean in self.means.items()}
        if self.bc:  # the warm start's fit
            values["bc/accuracy"] = self.bc["bc_accuracy"]
            values["bc/final_loss"] = self.bc["bc_final_loss"]
            if "dagger_agreement" in self.bc:  # the policy's own actions in the last DAgger round
                values["bc/dagger_agreement"] = self.bc["dagger_agreement"]
        dump_alone(self.logger, self.num_timesteps, values)
        if self.bc:  # the imitation itself is a checkpoint candidate (step 0)
            self.run_evaluation()
        if self.redo_final and not any(row["timesteps"] == step for row in self.history):
            # The run's final one, cut short: as it was, before training on (recorded as not final: the run goes on)
            self.run_evaluation()
        due = step // freq * freq  # the last multiple reached: evaluated at the first rollout starting at or after it
        if self.keeps_history and due > 0 and not any(due <= row["timesteps"] <= step for row in self.history):
            # Not evaluated yet (Ctrl-C during it, during the update before it, or in the rollout after the multiple): at
            # the first rollout, the first at or after the multiple in this run
            self.next_eval = due

    def _on_rollout_start(self) -> None:  # after the previous rollout's policy update
        if self.num_timesteps >= self.next_eval:
            self.next_eval = (self.num_timesteps // self.cfg.eval_freq + 1) * self.cfg.eval_freq
            self.run_evaluation()
            self.stop = self.stalled()

    def _on_step(self) -> bool:
        return not self.stop  # a rollout cannot be refused at its start: a stall ends training at its first step

    def stalled(self) -> bool:
        """Whether the validation JCT stalled (``stop_on_stall_after``); says so in the log."""
        if not validation_stalled(self.num_timesteps, self.best_step, self.cfg.stop_on_stall_after):
            return False
        if self.log is not None:
            self.log(f"stop  step {self.num_timesteps:>10,}  the validation JCT has not improved since step "
                     f"{self.best_step:,} (the last third of the run): training ends here")
        return True

    def run_evaluation(self, final: bool = False) -> dict[str, Any]:
        """Evaluate now: log, append to ``eval.csv``, save ``best_model.zip`` on a new best; returns the row.

        ``final``: the run's last evaluation, after its last update. Until the row is written a record says this
        evaluation is unfinished (:data:`~synergy_gym.agents.run_folder.UNFINISHED_EVALUATION`), which a resume reads.
        """
        cfg, means = self.cfg, self.means
        unfinished = self.run_dir / UNFINISHED_EVALUATION
        atomic_write_text(unfinished, json.dumps({"step": int(self.num_timesteps), "final": bool(final)}))
        vec_norm = self.model.get_vec_normalize_env()
        policy = AgentPolicy(self.model, vec_norm)
        df = evaluate(policy, cfg.env_id, cfg.eval_seeds, name="agent", **cfg.env_kwargs)
        row: dict[str, Any] = {
            "timesteps": self.num_timesteps,
            "mean_jct_h": float(df["mean_jct_h"].mean()),
            "p99_jct_h": float(df["p99_jct_h"].mean()),
            "makespan_h": float(df["makespan_h"].mean()),
        }
        if {"invalid_actions", "decisions"} <= set(df.columns):  # masked actions the env fell back from
            row["invalid_action_rate"] = float(df["invalid_actions"].sum() / max(1.0, df["decisions"].sum()))
        for name in self.references:
            row[f"jct_vs_{name}"] = row["mean_jct_h"] / means[name]
        if self.best_name is not None:
            row["jct_vs_best_heuristic"] = row["mean_jct_h"] / means[self.best_name]
        values = {f"eval/{key}": row[key] for key in list(row)[1:]}
        values.update({f"baseline/{name}/mean_jct_h": mean for name, mean in means.items()})
        dump_alone(self.logger, self.num_timesteps, values)
        self.history.append(row)
        self.evaluated_at = self.num_timesteps
        atomic_write_text(self.run_dir / "eval.csv", pd.DataFrame(self.history).to_csv(index=False))
        improved = row["mean_jct_h"] < self.best
        if improved:
            self.best = row["mean_jct_h"]
            self.best_step = self.num_timesteps
            if vec_norm is not None:  # the statistics first: the model is never newer than its statistics
                save_stats(vec_norm, self.run_dir / "best_vecnormalize.pkl")
            save_model(self.model, self.run_dir / "best_model.zip")
        unfinished.unlink(missing_ok=True)
        if self.log is not None:
            versus = f"{row['jct_vs_best_heuristic']:.3f}× {self.best_name}" if self.best_name is not None else "–"
            self.log(f"eval  step {self.num_timesteps:>10,}  mean JCT {row['mean_jct_h']:8.3f} h  {versus}  "
                     f"best so far {self.best:8.3f} h" + ("  (new best: best_model.zip)" if improved else ""))
        return row


def dump_alone(logger: Any, step: int, values: dict[str, Any]) -> None:
    """Write ``values`` to ``logger``'s outputs at ``step``, and only those: what the algorithm has recorded but not
    written yet (the last update's ``train/*``) stays pending for its own dump at its own step. (Dumping it here
    too would write it at the evaluation's step, then nothing at the next: two values at one step, none at the
    next, in TensorBoard.)"""
    tables = (logger.name_to_value, logger.name_to_count, logger.name_to_excluded)
    held = [dict(table) for table in tables]
    for table in tables:
        table.clear()
    for key, value in values.items():
        logger.record(key, value)
    logger.dump(step)
    for table, kept in zip(tables, held):
        table.update(kept)
