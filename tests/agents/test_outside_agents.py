"""Agents trained outside ``synergy-gym train``: a recurrent policy keeps its state through an episode in the Python
API and is refused in one line by the commands; a model trained without VecNormalize runs in ``benchmark`` with
``--no-normalize``; a ``predict`` that does not return ``(action, state)`` is one line.

Before, ``synergy_gym.evaluate`` dropped the state ``predict`` returned (a RecurrentPPO restarted its LSTM at every
decision: other numbers, no error), ``synergy-gym evaluate --model`` loaded a RecurrentPPO zip as PPO and failed deep
inside torch, ``benchmark`` could not score a plain ``PPO(...).save(...)`` at all, and a ``predict`` returning a bare
action failed with "cannot unpack non-iterable int object".
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from synergy_gym import evaluate
from synergy_gym.agents.models import load_agent
from synergy_gym.errors import ConfigError
from tests.agents.tiny_runs import one_line_error
from tests.support.cli_runs import run_cli

ENV = "Synergy-small-v0"
KWARGS = {"num_jobs": 8}
SEEDS = [1_000_000, 1_000_001]


@pytest.fixture(scope="module")
def fifo():
    from synergy_gym.baselines.env_heuristics import env_heuristics

    return env_heuristics()["fifo+tune"]


class Counting:
    """fifo+tune with a state: the number of decisions so far in the episode (as a recurrent policy's memory)."""

    def __init__(self, inner) -> None:
        self.inner, self.seen = inner, []

    def predict(self, obs, state=None, episode_start=None, deterministic=True, action_masks=None):
        self.seen.append((state, bool(episode_start[0])))
        action, _ = self.inner.predict(obs, deterministic=deterministic, action_masks=action_masks)
        return action, (0 if state is None else state) + 1


def test_the_state_predict_returns_goes_back_in_until_the_episode_ends(fifo):
    policy = Counting(fifo)
    rows = evaluate(policy, ENV, SEEDS, **KWARGS)
    assert rows["mean_jct_h"].tolist() == evaluate(fifo, ENV, SEEDS, **KWARGS)["mean_jct_h"].tolist()
    decisions = rows["decisions"].astype(int).tolist()
    expected = []
    for n in decisions:  # each episode starts from None (episode_start true), then gets back what it returned
        expected += [(None, True)] + [(k, False) for k in range(1, n)]
    assert policy.seen == expected


@pytest.fixture(scope="module")
def recurrent(tmp_path_factory):
    from sb3_contrib import RecurrentPPO

    model = RecurrentPPO("MultiInputLstmPolicy", gym.make(ENV, **KWARGS), n_steps=8, batch_size=8, seed=0,
                         device="cpu", policy_kwargs={"lstm_hidden_size": 8, "net_arch": [8]})
    path = tmp_path_factory.mktemp("rec") / "model.zip"
    model.save(path)
    return RecurrentPPO.load(path, device="cpu"), path


def own_loop(model, seed: int) -> float:
    """The episode's total JCT (h) with the LSTM state carried, as sb3-contrib documents RecurrentPPO.predict."""
    env = gym.make(ENV, **KWARGS)
    obs, _ = env.reset(seed=seed, options={"workload_seed": seed})
    state, start, total, done = None, np.array([True]), 0.0, False
    while not done:
        action, state = model.predict(obs, state=state, episode_start=start, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(int(action))
        total, start, done = total + reward, np.array([False]), terminated or truncated
    return total


def test_a_recurrent_model_is_evaluated_with_its_state(recurrent):
    model, _ = recurrent
    rows = evaluate(model, ENV, SEEDS, **KWARGS)
    assert rows["episode_return"].tolist() == pytest.approx([own_loop(model, seed) for seed in SEEDS], rel=1e-12)


class Forwarding:
    """A thin wrapper whose predict takes **kwargs and passes them on, as users write them."""

    def __init__(self, model) -> None:
        self.model = model

    def predict(self, obs, **kwargs):
        return self.model.predict(obs, **kwargs)


def test_a_wrapper_with_kwargs_gets_the_state_too(recurrent):
    model, _ = recurrent
    rows = evaluate(Forwarding(model), ENV, SEEDS, **KWARGS)
    assert rows["episode_return"].tolist() == pytest.approx([own_loop(model, seed) for seed in SEEDS], rel=1e-12)


def test_a_stateless_predict_with_kwargs_gets_only_what_it_got_before(fifo):
    """Its **kwargs go to a function without state or episode_start: passing them would fail."""

    class Picking:
        def pick(self, obs, deterministic=True):
            return fifo.predict(obs, deterministic=deterministic)

        def predict(self, obs, **kwargs):
            assert set(kwargs) == {"deterministic"}, kwargs
            return self.pick(obs, **kwargs)

    rows = evaluate(Picking(), ENV, SEEDS, **KWARGS)
    assert rows["mean_jct_h"].tolist() == evaluate(fifo, ENV, SEEDS, **KWARGS)["mean_jct_h"].tolist()


def test_the_commands_refuse_a_recurrent_model_in_one_line(recurrent, tmp_path, capsys):
    _, path = recurrent
    for command in (["evaluate", "--baselines", "none", "--no-normalize", "--quiet"],
                    ["benchmark", "--mode", "default", "--no-normalize", "--quiet"]):
        code, out, err = run_cli([*command, "--model", str(path), "--env", ENV, "--env-kwargs", "num_jobs=8",
                                  "--seeds", "1000000", "--out", str(tmp_path / command[0])], capsys)
        one_line_error(code, out, err, "recurrent policy", "synergy_gym.evaluate", command=command[0])
        assert not (tmp_path / command[0]).exists()


@pytest.fixture(scope="module")
def plain_ppo(tmp_path_factory):
    from stable_baselines3 import PPO

    path = tmp_path_factory.mktemp("ppo") / "model.zip"
    PPO("MultiInputPolicy", gym.make(ENV, **KWARGS), n_steps=8, batch_size=8, seed=0, device="cpu",
        policy_kwargs={"net_arch": [8]}).save(path)
    return path


def test_benchmark_runs_a_model_trained_without_vecnormalize_with_no_normalize(plain_ppo, tmp_path, capsys):
    common = ["benchmark", "--model", str(plain_ppo), "--label", "mine", "--env", ENV, "--mode", "default",
              "--env-kwargs", "num_jobs=8", "--seeds", "1000000", "--quiet"]
    code, out, err = run_cli([*common, "--out", str(tmp_path / "refused")], capsys)
    one_line_error(code, out, err, "normalisation statistics are missing", "--no-normalize", command="benchmark")
    code, out, err = run_cli([*common, "--no-normalize", "--out", str(tmp_path / "ran")], capsys)
    assert code == 0, err
    code, ev_out, err = run_cli(["evaluate", "--model", str(plain_ppo), "--label", "mine", "--no-normalize", "--env",
                                 ENV, "--env-kwargs", "num_jobs=8", "--seeds", "1000000", "--baselines", "none",
                                 "--quiet", "--out", str(tmp_path / "ev")], capsys)
    assert code == 0, err
    import pandas as pd

    bench = pd.read_csv(tmp_path / "ran" / "episodes.csv")
    ev = pd.read_csv(tmp_path / "ev" / "results.csv")
    assert bench.loc[bench["policy"] == "mine", "mean_jct_h"].item() == ev.loc[ev["policy"] == "mine", "mean_jct_h"].item()


def test_benchmark_no_normalize_without_a_model_is_one_line(tmp_path, capsys):
    code, out, err = run_cli(["benchmark", "--no-normalize", "--env", ENV, "--mode", "default", "--seeds", "1",
                              "--out", str(tmp_path / "b")], capsys)
    one_line_error(code, out, err, "--no-normalize needs --model", command="benchmark")


def test_load_agent_names_its_own_arguments_when_statistics_are_missing(plain_ppo):
    with pytest.raises(ConfigError, match=r"load_agent\(\): model_path .*pass stats=PATH .*normalize=False") as info:
        load_agent(plain_ppo, None, "cpu", "mine")
    assert "--" not in str(info.value)
    assert load_agent(plain_ppo, None, "cpu", "mine", normalize=False).predict is not None
    with pytest.raises(ConfigError, match=r"load_agent\(\): stats .*no_such_stats.pkl") as info:
        load_agent(plain_ppo, None, "cpu", "mine", stats=plain_ppo.parent / "no_such_stats.pkl")
    assert "--" not in str(info.value)


class BareAction:
    def __init__(self, inner, wrap) -> None:
        self.inner, self.wrap = inner, wrap

    def predict(self, obs, deterministic=True, action_masks=None):
        action, _ = self.inner.predict(obs, deterministic=deterministic, action_masks=action_masks)
        return self.wrap(action)


@pytest.mark.parametrize("wrap, words", [
    (lambda a: int(a), ["must return (action, state)", "got 1"]),
    (lambda a: (np.array([a, a]), None), ["must return one action", "array"]),
    (lambda a: (a, None, None), ["must return (action, state)"]),
])
def test_a_predict_that_does_not_return_one_action_and_a_state_is_one_line(fifo, wrap, words):
    with pytest.raises(ConfigError) as info:
        evaluate(BareAction(fifo, wrap), ENV, SEEDS, name="mine", **KWARGS)
    message = str(info.value)
    assert message.startswith("evaluate(): mine's predict") and "\n" not in message
    for word in words:
        assert word in message, message
