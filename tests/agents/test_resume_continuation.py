"""What a resumed run continues with: new workloads and random draws (deterministic for its checkpoint and seed), the
warm start of a run stopped during it, the run's own records, and TensorBoard logs of its own.

Stable-Baselines3's ``load`` reseeds Python, NumPy, PyTorch and the environments with the seed the model was built
with, and the shared workloads would count their episodes from 0 again: without reseeding, a run resumed repeatedly
trained on its first workloads again and again, and ``--seed`` had no effect.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from stable_baselines3.common.callbacks import BaseCallback

from synergy_gym.agents import train as train_module
from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.models import load_model
from synergy_gym.agents.train import train
from synergy_gym.errors import Interrupted
from tests.support.cli_runs import run_cli

#: A tiny run: MaskablePPO on 10-job episodes of Synergy-small-v0, rollouts of 8 steps, a checkpoint every 16.
TINY = {"env_id": "Synergy-small-v0", "env_kwargs": {"num_jobs": 10}, "n_envs": 1, "n_steps": 8, "batch_size": 8,
        "n_epochs": 1, "net_arch": [16], "global_dim": 16, "slot_dim": 8, "eval_episodes": 1, "eval_freq": 1000,
        "checkpoint_freq": 16, "device": "cpu", "progress_bar": False}


class Workloads(BaseCallback):
    """The jobs (arrival times and sizes) of every training episode, in the order the episodes start."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[tuple] = []

    def _record(self, envs) -> None:
        for i in envs:
            (sim,) = self.training_env.get_attr("sim", [int(i)])
            self.started.append((tuple(sim.jobs.arrival_s.round(6).tolist()), tuple(sim.jobs.total_iters.tolist())))

    def _on_training_start(self) -> None:  # the environments were reset for the first episodes
        self._record(range(self.training_env.num_envs))

    def _on_step(self) -> bool:
        self._record(np.flatnonzero(self.locals["dones"]))  # each ended episode's environment started the next
        return True


def _train(out: Path, resume: Path | None = None, **settings) -> list[tuple]:
    """Train the tiny run (``settings`` over :data:`TINY`) into ``out``; the workloads of its training episodes."""
    workloads = Workloads()
    train(TrainConfig(**{**TINY, "timesteps": 64, **settings}), out=out, resume=resume, log=None, callbacks=[workloads])
    return workloads.started


def _weights(run: Path) -> list[np.ndarray]:
    return [p.detach().numpy() for p in load_model(run / "last_model.zip", "maskable_ppo", "cpu").policy.parameters()]


def test_a_resumed_run_trains_on_new_workloads_the_same_for_its_checkpoint_and_seed(tmp_path):
    first = _train(tmp_path / "first")
    checkpoint = tmp_path / "first" / "last_model.zip"
    resumed = [_train(tmp_path / name, checkpoint, timesteps=128) for name in ("a", "b")]
    assert len(resumed[0]) >= 2 and not set(resumed[0]) & set(first)  # none of the first run's workloads again
    assert resumed[0] == resumed[1]  # deterministic: the same checkpoint and seed give the same run
    for a, b in zip(_weights(tmp_path / "a"), _weights(tmp_path / "b")):
        np.testing.assert_array_equal(a, b)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a" / "eval.csv"), pd.read_csv(tmp_path / "b" / "eval.csv"))
    # --seed on resuming takes effect (and config.json says which seed the continuation ran with).
    other = _train(tmp_path / "seed7", checkpoint, timesteps=128, seed=7)
    assert other != resumed[0]
    assert any(not np.array_equal(a, b) for a, b in zip(_weights(tmp_path / "a"), _weights(tmp_path / "seed7")))
    assert json.loads((tmp_path / "seed7" / "config.json").read_text())["seed"] == 7


def test_a_resumed_run_continues_its_shared_workloads(tmp_path):
    first = _train(tmp_path / "first", shared_workload=True)
    resumed = _train(tmp_path / "resumed", tmp_path / "first" / "last_model.zip", timesteps=128, shared_workload=True)
    assert len(first) >= 2 and len(resumed) >= 2
    assert not set(resumed) & set(first)  # the episode count goes on: not base + 0, base + 1, … again


def test_a_run_stopped_during_its_warm_start_imitates_again_when_resumed(tmp_path, capsys, monkeypatch):
    def stopped(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "behaviour_clone", stopped)
    run = tmp_path / "run"
    with pytest.raises(Interrupted, match=r"at step 0 in .* \(before reinforcement learning: --resume runs the warm "
                                          r"start again\)"):
        train(TrainConfig(**{**TINY, "timesteps": 32, "bc_steps": 16}), out=run, log=None)
    assert load_model(run / "last_model.zip", "maskable_ppo", "cpu").num_timesteps == 0
    monkeypatch.undo()
    code, out, err = run_cli(["train", "--resume", str(run)], capsys)
    assert code == 0, err
    assert ("note: the checkpoint is at step 0: the warm start runs first, imitating fifo+tune for 16 steps as in a "
            "fresh run") in out.splitlines()
    assert pd.read_csv(run / "eval.csv")["timesteps"].tolist() == [0, 32]  # the imitation evaluated, as in a fresh run
    assert json.loads((run / "config.json").read_text())["bc_steps"] == 16


def test_resuming_in_place_keeps_the_runs_warm_start_and_logs_to_a_new_tensorboard_folder(run64, tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = shutil.copytree(run64, tmp_path / "run")
    code, out, err = run_cli(["train", "--resume", str(run / "checkpoints" / "rl_model_48_steps.zip"), "--out", str(run),
                              "--timesteps", "64", "--bc-steps", "32"], capsys)
    assert code == 0, err
    note = "note: bc_steps 32 has no effect on a run resumed at step 48: the warm start runs only at step 0"
    assert note in out.splitlines()
    assert json.loads((run / "config.json").read_text())["bc_steps"] == 0  # the run's own, not the one given now
    # The first run evaluated step 64, and so did the resumed one: each in its own TensorBoard run, one value a step.
    assert sorted(p.name for p in (run / "tb").iterdir()) == ["run_1", "run_2"]
    for folder in (run / "tb").iterdir():
        acc = EventAccumulator(str(folder))
        acc.Reload()
        steps = [event.step for event in acc.Scalars("eval/mean_jct_h")]
        assert steps == [64], (folder.name, steps)
