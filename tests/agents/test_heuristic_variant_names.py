"""Where the agents' side accepts a named heuristic variant (``tetris+greedy+readmit``): baselines to evaluate,
a teacher, a reference of the relative reward, a hint, and the heuristics a training run scores."""

from __future__ import annotations

import gymnasium as gym
import pandas as pd
import pytest

from synergy_gym.agents.baseline_scores import evaluate_baselines
from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.eval_policies import parse_baselines
from synergy_gym.agents.heuristic_hint import hint_heuristic
from synergy_gym.agents.relative_reward import HeuristicRelativeReward
from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES, TetrisGreedy
from synergy_gym.errors import ConfigError, UnknownNameError
from synergy_gym.experiments.evaluation import evaluate

ENV = "Synergy-small-scarce-v0"


def test_the_variant_is_run_only_when_named():
    env_names, _ = parse_baselines("env")
    assert "tetris+greedy+readmit" not in env_names
    assert parse_baselines("env:tetris+greedy+readmit") == (("tetris+greedy+readmit",), ())
    assert parse_baselines("tetris+greedy+readmit")[0] == ("tetris+greedy+readmit",)
    with pytest.raises(ConfigError, match="by name only, tetris\\+greedy\\+readmit"):
        parse_baselines("env:tetris+readmit")


def test_the_variant_is_a_teacher_a_reference_and_a_hint():
    assert TrainConfig(bc_policy="tetris+greedy+readmit").bc_policy == "tetris+greedy+readmit"
    assert TrainConfig(relative_to="tetris+greedy+readmit").relative_to == "tetris+greedy+readmit"
    with pytest.raises(UnknownNameError, match="bc_policy"):
        TrainConfig(bc_policy="tetris+greedy+again")
    wrapped = HeuristicRelativeReward(gym.make(ENV, preemptive=True, num_jobs=10), "tetris+greedy+readmit")
    assert wrapped.heuristic_name == "tetris+greedy+readmit" and wrapped.heuristic.readmit
    assert hint_heuristic("tetris+greedy+readmit").readmit


def test_a_run_scores_the_variant_where_its_config_names_it(own_baseline_cache):
    base = {"env_id": ENV, "env_kwargs": {"num_jobs": 30, "preemptive": True}, "eval_episodes": 2}
    plain = evaluate_baselines(TrainConfig(**base))
    assert list(plain) == list(HEURISTIC_NAMES)
    for named in ({"reference_baselines": ["tetris+greedy+readmit"]}, {"relative_to": "tetris+greedy+readmit"}):
        scored = evaluate_baselines(TrainConfig(**base, **named))
        assert list(scored) == [*HEURISTIC_NAMES, "tetris+greedy+readmit"]
        timeless = {name: frame.drop(columns="wall_s") for name, frame in scored.items()}
        pd.testing.assert_frame_equal(timeless["tetris+greedy"], plain["tetris+greedy"].drop(columns="wall_s"))
        readmit = evaluate(TetrisGreedy(readmit=True), ENV, TrainConfig(**base).eval_seeds, name="tetris+greedy+readmit",
                           **base["env_kwargs"])
        pd.testing.assert_frame_equal(timeless["tetris+greedy+readmit"], readmit.drop(columns="wall_s"))
        assert not timeless["tetris+greedy+readmit"].equals(timeless["tetris+greedy"])
