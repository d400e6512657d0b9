"""A run stopped (Ctrl-C) during an evaluation and resumed in its own folder evaluates that step again, the final
evaluation included; and every algorithm's training curves reach TensorBoard.

Ctrl-C saves ``last_model.zip`` at the step the evaluation began, and the evaluation's row is never written. Before,
a resumed run went on to the next multiple of ``eval_freq``: the model of that step (in the reviewer's run, the best
one) was never a candidate for ``best_model.zip``, and a run stopped in its final evaluation could not be resumed at
all ("nothing is left to train"), its ``eval.csv`` ending before ``last_model.zip``.
"""

from __future__ import annotations

import pandas as pd
import pytest

from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.models import load_model
from synergy_gym.agents.train import train
from synergy_gym.errors import Interrupted
from tests.agents.test_resume_continuation import TINY
from tests.support.cli_runs import run_cli


def stop_evaluation_at(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    """Ctrl-C inside the run's ``nth`` evaluation (1 = the first), while its episodes run."""
    from synergy_gym.agents import callbacks

    evaluate, calls = callbacks.evaluate, []

    def stopped(*args, **kwargs):
        calls.append(1)
        if len(calls) == nth:
            raise KeyboardInterrupt
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(callbacks, "evaluate", stopped)


def steps_of(run) -> list[int]:
    return pd.read_csv(run / "eval.csv")["timesteps"].tolist()


def test_an_evaluation_stopped_by_ctrl_c_runs_again_when_the_run_resumes(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    stop_evaluation_at(monkeypatch, 2)  # at step 32
    with pytest.raises(Interrupted, match="at step 32"):
        train(TrainConfig(**{**TINY, "timesteps": 48, "eval_freq": 16, "checkpoint_freq": 1000}), out=run, log=None)
    assert steps_of(run) == [16]  # the evaluation at 32 never finished
    monkeypatch.undo()
    code, out, err = run_cli(["train", "--resume", str(run)], capsys)
    assert code == 0, err
    assert steps_of(run) == [16, 32, 48]  # the model saved at 32 evaluated, then the run went on as before


def test_a_run_stopped_in_its_final_evaluation_resumes_for_that_evaluation_alone(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    stop_evaluation_at(monkeypatch, 1)  # the final one, at step 32
    with pytest.raises(Interrupted, match="at step 32"):
        train(TrainConfig(**{**TINY, "timesteps": 32}), out=run, log=None)
    before = load_model(run / "last_model.zip", "maskable_ppo", "cpu").policy.state_dict()
    monkeypatch.undo()
    code, out, err = run_cli(["train", "--resume", str(run)], capsys)
    assert code == 0, err
    assert ("note: the run ended at step 32 and its final evaluation did not finish: this session runs only that "
            "evaluation") in out.splitlines()
    assert steps_of(run) == [32]  # the last row is last_model.zip's, as the docs say
    after = load_model(run / "last_model.zip", "maskable_ppo", "cpu")
    assert after.num_timesteps == 32  # not trained any further
    assert all((after.policy.state_dict()[k] == v).all() for k, v in before.items())
    assert (run / "best_model.zip").is_file()
    # Now the run is complete: nothing is left, as before.
    code, out, err = run_cli(["train", "--resume", str(run)], capsys)
    assert code == 2 and "nothing is left to train" in err


def test_a_finished_run_resumed_into_another_folder_is_still_refused(tmp_path, capsys):
    run = tmp_path / "run"
    train(TrainConfig(**{**TINY, "timesteps": 16}), out=run, log=None)
    code, out, err = run_cli(["train", "--resume", str(run), "--out", str(tmp_path / "elsewhere")], capsys)
    assert code == 2 and "nothing is left to train" in err


@pytest.mark.parametrize("algo", ["a2c", "maskable_ppo"])
def test_training_curves_reach_tensorboard_every_rollout(tmp_path, algo):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    train(TrainConfig(**{**TINY, "algo": algo, "timesteps": 32, "checkpoint_freq": 1000}), out=run, log=None)
    acc = EventAccumulator(str(run / "tb" / "run_1"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "time/fps" in tags and "train/value_loss" in tags, tags  # A2C logged every 100th rollout: none of 4
    assert len(acc.Scalars("time/fps")) >= 3


def test_a_run_that_stalled_and_was_stopped_in_its_final_evaluation_resumes_for_that_evaluation_alone(
        tmp_path, capsys, monkeypatch):
    """The run ends on a stall before its timesteps; Ctrl-C in the final evaluation. It trained on when resumed."""
    run = tmp_path / "run"
    cfg = TrainConfig(**{**TINY, "timesteps": 64, "eval_freq": 16, "stop_on_stall_after": 16, "checkpoint_freq": 1000})
    reference = tmp_path / "reference"
    train(cfg, out=reference, log=None)  # uninterrupted: it stalls, and the final evaluation follows
    end = steps_of(reference)[-1]
    assert end < 64
    stop_evaluation_at(monkeypatch, len(steps_of(reference)))  # the final one
    with pytest.raises(Interrupted, match=f"at step {end}"):
        train(cfg, out=run, log=None)
    monkeypatch.undo()
    code, out, err = run_cli(["train", "--resume", str(run)], capsys)
    assert code == 0, err
    assert steps_of(run) == steps_of(reference)
    assert load_model(run / "last_model.zip", "maskable_ppo", "cpu").num_timesteps == end


def test_a_resume_past_an_evaluated_multiple_evaluates_at_the_next_one(tmp_path, capsys, monkeypatch):
    """Ctrl-C at step 30 (rollouts of 8 steps, evaluations every 12: the multiple 24 has its row): no evaluation runs at
    the resume's step, and a --timesteps below the checkpoint's step is refused as before."""
    from stable_baselines3.common.callbacks import BaseCallback

    class CtrlC(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == 30:
                raise KeyboardInterrupt
            return True

    run = tmp_path / "run"
    cfg = TrainConfig(**{**TINY, "timesteps": 48, "eval_freq": 12, "checkpoint_freq": 1000})
    with pytest.raises(Interrupted, match="at step 30"):
        train(cfg, out=run, log=None, callbacks=[CtrlC()])
    assert steps_of(run) == [16, 24]
    code, out, err = run_cli(["train", "--resume", str(run), "--timesteps", "24"], capsys)
    assert code == 2 and "nothing is left to train" in err and "final evaluation" not in err, err
    code, out, err = run_cli(["train", "--resume", str(run)], capsys)
    assert code == 0, err
    assert steps_of(run) == [16, 24, 38, 54]  # the next evaluation, not one at step 30


def test_a_final_evaluation_cut_short_is_named_when_resumed_elsewhere(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    stop_evaluation_at(monkeypatch, 1)
    with pytest.raises(Interrupted):
        train(TrainConfig(**{**TINY, "timesteps": 32}), out=run, log=None)
    monkeypatch.undo()
    code, out, err = run_cli(["train", "--resume", str(run), "--out", str(tmp_path / "elsewhere")], capsys)
    assert code == 2 and "its final evaluation did not finish: --resume it in its own folder (no --out)" in err, err


class CtrlCAt:
    """Ctrl-C at step ``step`` of training (at a rollout's end: before its update and the evaluations after it)."""

    def __new__(cls, step: int):
        from stable_baselines3.common.callbacks import BaseCallback

        class Stop(BaseCallback):
            def _on_step(self) -> bool:
                if self.num_timesteps == step:
                    raise KeyboardInterrupt
                return True

        return Stop()


def test_ctrl_c_before_an_evaluation_began_is_made_up_on_resume(tmp_path, capsys):
    """Stopped during the update after a multiple of eval_freq (before that evaluation), and before the final one."""
    cfg = TrainConfig(**{**TINY, "timesteps": 64, "eval_freq": 16, "checkpoint_freq": 1000})
    reference = tmp_path / "reference"
    train(cfg, out=reference, log=None)
    for step in (32, 64):
        run = tmp_path / f"run{step}"
        with pytest.raises(Interrupted, match=f"at step {step}"):
            train(cfg, out=run, log=None, callbacks=[CtrlCAt(step)])
        code, out, err = run_cli(["train", "--resume", str(run)], capsys)
        assert code == 0, err
        assert steps_of(run) == steps_of(reference) == [16, 32, 48, 64]
    assert ("note: the run ended at step 64 and its final evaluation did not finish: this session runs only that "
            "evaluation") in out.splitlines()


def test_a_stalled_run_cut_short_in_its_final_evaluation_and_given_more_steps_goes_on_as_it_would_have(
        tmp_path, capsys, monkeypatch):
    cfg = TrainConfig(**{**TINY, "timesteps": 64, "eval_freq": 16, "stop_on_stall_after": 16, "checkpoint_freq": 1000})
    reference, run = tmp_path / "reference", tmp_path / "run"
    train(cfg, out=reference, log=None)
    stop_evaluation_at(monkeypatch, len(steps_of(reference)))  # the final one
    with pytest.raises(Interrupted):
        train(cfg, out=run, log=None)
    monkeypatch.undo()
    for folder in (reference, run):
        code, out, err = run_cli(["train", "--resume", str(folder), "--timesteps", "100"], capsys)
        assert code == 0, err
    assert steps_of(run) == steps_of(reference)


def test_an_evaluation_cut_short_again_after_more_timesteps_were_given_still_trains_on(tmp_path, capsys, monkeypatch):
    """The final evaluation cut short; resumed with more timesteps, it runs first – and is cut short again. The next
    resume took the run for ended (its record said final) and stopped at the old step, exit 0."""
    run = tmp_path / "run"
    stop_evaluation_at(monkeypatch, 2)  # the final one
    with pytest.raises(Interrupted, match="at step 32"):
        train(TrainConfig(**{**TINY, "timesteps": 32, "eval_freq": 16}), out=run, log=None)
    assert steps_of(run) == [16]
    monkeypatch.undo()
    stop_evaluation_at(monkeypatch, 1)  # the evaluation at 32 again, first thing in the resumed run
    code, out, err = run_cli(["train", "--resume", str(run), "--timesteps", "48"], capsys)
    assert code == 130, err
    monkeypatch.undo()
    code, out, err = run_cli(["train", "--resume", str(run)], capsys)
    assert code == 0, err
    assert "this session runs only that evaluation" not in out
    assert steps_of(run) == [16, 32, 48]
