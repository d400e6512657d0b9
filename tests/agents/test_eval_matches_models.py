"""A run's ``eval.csv`` describes the models it saved: its row at step N is the model saved at step N.

Evaluations run after a rollout's policy update (when the next rollout starts) and once more after the last one, so
the last row is ``last_model.zip`` – also when ``timesteps`` is a whole number of rollouts and of ``eval_freq`` – and a
periodic checkpoint's step has a row; ``export_pretrained``'s card records the exported checkpoint's own step and row.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from tests.support.agent_runs import tiny_train_config

ENV = "Synergy-small-scarce-v0"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """192 steps in rollouts of 64, an evaluation and a checkpoint every 64 (the latest kept: step 128), a learning
    rate high enough that every update changes the decisions."""
    from synergy_gym.agents import baseline_cache
    from synergy_gym.agents.train import train

    root = tmp_path_factory.mktemp("eval_matches")
    cfg = tiny_train_config(ENV, timesteps=192, eval_freq=64, checkpoint_freq=64, learning_rate=0.05, n_epochs=4)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(baseline_cache, "cache_folder", lambda: root / "cache")
        return train(cfg, out=root / "run", log=None)


def validation_jct(model_zip: Path) -> float:
    """The model's mean JCT on its run's validation seeds, as the run evaluates it."""
    from synergy_gym import evaluate
    from synergy_gym.agents.config import load_run_config
    from synergy_gym.agents.models import load_agent

    cfg = load_run_config(model_zip.parent.parent / "config.json" if model_zip.parent.name == "checkpoints"
                          else model_zip.parent / "config.json")
    agent = load_agent(model_zip, cfg, "cpu", "agent")
    return float(evaluate(agent, cfg.env_id, cfg.eval_seeds, **cfg.env_kwargs)["mean_jct_h"].mean())


def test_the_last_row_is_the_saved_last_model(run):
    history = pd.read_csv(run / "eval.csv")
    assert history["timesteps"].tolist() == [64, 128, 192]  # one row per step: the final weights once
    assert validation_jct(run / "last_model.zip") == pytest.approx(history["mean_jct_h"].iloc[-1], rel=1e-12)


def test_a_checkpoints_row_is_the_checkpoint(run):
    history = pd.read_csv(run / "eval.csv").set_index("timesteps")
    checkpoint = run / "checkpoints" / "rl_model_128_steps.zip"
    assert validation_jct(checkpoint) == pytest.approx(history.loc[128, "mean_jct_h"], rel=1e-12)
    best = history["mean_jct_h"].min()
    assert validation_jct(run / "best_model.zip") == pytest.approx(best, rel=1e-12)


def test_the_card_of_a_periodic_checkpoint_has_its_own_step_and_row(run):
    from synergy_gym.agents.export_pretrained import card_for

    history = pd.read_csv(run / "eval.csv").set_index("timesteps")
    card = card_for(run / "checkpoints" / "rl_model_128_steps.zip", "tiny", "synergy-gym train")
    assert card["checkpoint_step"] == 128
    assert card["validation_mean_jct_h"] == pytest.approx(history.loc[128, "mean_jct_h"], rel=1e-12)
    last = card_for(run / "last_model.zip", "tiny", "synergy-gym train")
    assert last["checkpoint_step"] == 192 and last["validation_mean_jct_h"] == history.loc[192, "mean_jct_h"]


def test_a_checkpoint_without_an_evaluation_has_no_validation_jct(run, tmp_path):
    """A model saved at a step no evaluation ran at (Ctrl-C, a checkpoint between evaluations): the card says so
    (null), not another model's figure."""
    import shutil

    from synergy_gym.agents.export_pretrained import card_for

    copy = shutil.copytree(run, tmp_path / "run")
    history = pd.read_csv(copy / "eval.csv")
    history[history["timesteps"] != 128].to_csv(copy / "eval.csv", index=False)
    card = card_for(copy / "checkpoints" / "rl_model_128_steps.zip", "tiny", "synergy-gym train")
    assert card["checkpoint_step"] == 128 and card["validation_mean_jct_h"] is None
    assert json.loads(json.dumps(card))["validation_mean_jct_h"] is None  # card.json stays valid JSON (no NaN)
    assert not math.isnan(card["check_mean_jct_h"])
