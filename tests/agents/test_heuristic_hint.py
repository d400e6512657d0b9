"""An agent that starts at an env heuristic (synergy_gym.agents.heuristic_hint): the hint key, the logit bias, the config."""

import re
from collections import Counter
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

import synergy_gym  # noqa: F401
from synergy_gym.errors import ConfigError
from tests.support.agent_runs import SMALL_ENV, tensorboard_scalars, tiny_train_config

ENV = "Synergy-small-scarce-v0"
PREEMPTIVE = {**SMALL_ENV, "preemptive": True}


def hint_config(**extra):
    values = {"action_head": "per_slot", "hint_policy": "tetris+greedy", "env_kwargs": dict(PREEMPTIVE)}
    values.update(extra)
    return tiny_train_config(ENV, **values)


def test_the_hint_is_the_heuristics_action_one_hot_in_every_state_of_an_episode():
    from synergy_gym.agents.heuristic_hint import HINT_KEY, HeuristicHint
    from synergy_gym.baselines.env_heuristics import env_heuristics

    tetris = env_heuristics()["tetris+greedy"]
    env = HeuristicHint(gym.make(ENV, **PREEMPTIVE), "tetris+greedy")
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(0)
    steps = batch = 0
    seen = []
    done = False
    while not done:
        assert obs in env.observation_space
        expected, _ = tetris.predict({k: v for k, v in obs.items() if k != HINT_KEY})
        assert obs[HINT_KEY].sum() == 1.0 and obs[HINT_KEY][int(expected)] == 1.0
        seen.append(obs)
        valid = np.flatnonzero(obs["action_mask"])
        action = int(expected) if rng.random() < 0.8 else int(rng.choice(valid))  # the policy's own states too
        obs, _, terminated, truncated, _ = env.step(action)
        done, steps = terminated or truncated, steps + 1
    assert steps > 20
    from synergy_gym.agents.heuristic_hint import with_hint

    stacked = {k: np.stack([o[k] for o in seen]) for k in seen[0] if k != HINT_KEY}
    batch = with_hint(tetris, stacked)[HINT_KEY]  # a batch gives each row's own
    assert np.array_equal(batch, np.stack([o[HINT_KEY] for o in seen]))


def test_an_untrained_hinted_agent_is_its_heuristic_and_a_trained_one_keeps_the_hint_when_loaded(tmp_path):
    """At the start the deterministic policy is the heuristic: evaluate() (batched and one at a time) gives its JCTs;
    the model saved and loaded keeps hint_policy and its learnt weight."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from synergy_gym import evaluate
    from synergy_gym.agents.heuristic_hint import HeuristicHint, model_hint
    from synergy_gym.agents.models import build_model, load_model
    from synergy_gym.agents.wrappers import AgentPolicy
    from synergy_gym.baselines.env_heuristics import env_heuristics

    cfg = hint_config()
    vec = DummyVecEnv([lambda: HeuristicHint(gym.make(ENV, **PREEMPTIVE), "tetris+greedy")])
    model = build_model(cfg, vec, "cpu", tb_dir=None)
    seeds = [1000000, 1000001]
    heuristic = evaluate(env_heuristics()["tetris+greedy"], ENV, seeds=seeds, **PREEMPTIVE)
    agent = evaluate(AgentPolicy(model, None), ENV, seeds=seeds, **PREEMPTIVE)
    assert np.array_equal(agent["mean_jct_h"].to_numpy(), heuristic["mean_jct_h"].to_numpy())
    assert np.array_equal(agent["decisions"].to_numpy(), heuristic["decisions"].to_numpy())
    one_at_a_time = SimpleNamespace(predict=AgentPolicy(model, None).predict)  # no batch_predictor
    without = evaluate(one_at_a_time, ENV, seeds=seeds, name="agent", **PREEMPTIVE)
    assert np.array_equal(without["mean_jct_h"].to_numpy(), heuristic["mean_jct_h"].to_numpy())

    model.policy.action_net.hint_weight.data.fill_(3.25)
    model.save(tmp_path / "m.zip")
    loaded = load_model(tmp_path / "m.zip", "maskable_ppo", "cpu")
    assert model_hint(loaded) == "tetris+greedy"
    assert loaded.policy.action_net.hint_weight.item() == 3.25
    assert AgentPolicy(loaded, None).hint is not None


def test_the_hint_weight_sets_how_often_the_stochastic_policy_departs():
    from stable_baselines3.common.vec_env import DummyVecEnv

    from synergy_gym.agents.heuristic_hint import HINT_KEY, HeuristicHint
    from synergy_gym.agents.models import build_model

    env = HeuristicHint(gym.make(ENV, **PREEMPTIVE), "tetris+greedy")
    departures = {}
    for weight in (0.0, 12.0):
        model = build_model(hint_config(hint_weight=weight), DummyVecEnv([lambda: env]), "cpu", tb_dir=None)
        model.set_random_seed(0)
        obs, _ = env.reset(seed=3)
        count = 0
        for _ in range(60):
            action, _ = model.predict(obs, deterministic=False, action_masks=obs["action_mask"] > 0)
            count += int(obs[HINT_KEY][int(action)] == 0 and obs["action_mask"].sum() > 1)
            obs, _, terminated, truncated, _ = env.step(int(action))
            if terminated or truncated:
                obs, _ = env.reset(seed=4)
        departures[weight] = count
    assert departures[12.0] <= 2 < departures[0.0]


@pytest.mark.parametrize(("extra", "words"), [
    ({"hint_policy": "random"}, ["hint_policy", "deterministic", "'random'"]),
    ({"hint_policy": "tetrs"}, ["hint_policy", "'tetrs'", "tetris+greedy"]),
    ({"action_head": "linear"}, ["hint_policy", "per_slot", "'linear'"]),
    ({"hint_policy": ["tetris+greedy"]}, ["hint_policy", "['tetris+greedy']"]),
    ({"hint_weight": float("nan")}, ["hint_weight", "nan"]),
    ({"hint_weight": "high"}, ["hint_weight", "'high'"]),
    ({"hint_weight": -8.0}, ["hint_weight must be from 0 to 1,000", "-8.0"]),
    ({"hint_weight": 1e40}, ["hint_weight must be from 0 to 1,000", "1e+40"]),
    ({"hint_policy": None, "hint_weight": "high"}, ["hint_weight", "'high'"]),  # checked without a hint too
    ({"hint_credit": "departure"}, ["hint_credit must be one of 'all', 'departures'", "'departure'"]),
    ({"hint_credit": ["all"]}, ["hint_credit", "['all']"]),
    ({"hint_policy": None, "hint_credit": "departures"}, ["hint_credit 'departures' needs a hint_policy"]),
])
def test_bad_hint_settings_are_one_line_errors_naming_them(extra, words):
    with pytest.raises(ConfigError) as error:
        hint_config(**extra)
    for word in words:
        assert word in str(error.value), (word, str(error.value))


def test_hint_policy_none_is_no_hint_and_a_hint_weight_without_it_is_a_note():
    from synergy_gym.agents.hyperparameters import inert_settings

    cfg = hint_config(hint_policy="none")
    assert cfg.hint_policy is None
    assert not any("hint" in n for n in inert_settings(cfg))
    notes = inert_settings(hint_config(hint_policy=None, hint_weight=3.0))
    assert any("hint_weight 3.0 has no effect without hint_policy" in n for n in notes), notes


def test_a_run_cannot_be_resumed_with_another_hint_policy_and_the_policy_needs_the_key():
    from stable_baselines3.common.vec_env import DummyVecEnv

    from synergy_gym.agents.heuristic_hint import HeuristicHint
    from synergy_gym.agents.models import build_model
    from synergy_gym.agents.resume import NETWORK_SETTINGS, model_network

    hinted = DummyVecEnv([lambda: HeuristicHint(gym.make(ENV, **PREEMPTIVE), "srtf+tune")])
    model = build_model(hint_config(hint_policy="srtf+tune"), hinted, "cpu", tb_dir=None)
    network = model_network(model)
    assert "hint_policy" in NETWORK_SETTINGS and network is not None and network.hint_policy == "srtf+tune"
    plain = DummyVecEnv([lambda: gym.make(ENV, **PREEMPTIVE)])
    with pytest.raises(ValueError, match="hint_policy 'tetris\\+greedy' needs the observation key 'hint'"):
        build_model(hint_config(), plain, "cpu", tb_dir=None)
    with pytest.raises(ValueError, match="the key needs a hint_policy; the observation has it"):
        build_model(hint_config(hint_policy=None), hinted, "cpu", tb_dir=None)


def test_a_hinted_run_trains_and_evaluates_through_the_commands(tmp_path, capsys):
    """``train`` with hint_policy, then ``evaluate`` of its model in the plain environment (the model observes one key
    more than the env has: the check of its spaces leaves the hint out), paired with the heuristic it started at."""
    import json

    from synergy_gym.cli import main

    config = tmp_path / "hint.toml"
    tiny = ('action_head = "per_slot"\nn_steps = 32\nbatch_size = 32\nn_epochs = 1\nnet_arch = [16]\nglobal_dim = 16\n'
            'slot_dim = 8\nlearning_rate = 1e-9\n')
    config.write_text(tiny + 'hint_policy = "tetris+greedy"\n')
    (tmp_path / "plain.toml").write_text(tiny)
    kwargs = ["--env-kwargs", "num_jobs=12", "preemptive=true"]
    run = tmp_path / "run"
    assert main(["train", "--config", str(config), "--env", ENV, *kwargs, "--n-envs", "1", "--timesteps", "32",
                 "--eval-episodes", "1", "--eval-freq", "1000", "--no-progress", "--device", "cpu", "--out", str(run)]) == 0
    capsys.readouterr()
    scalars = tensorboard_scalars(run)  # HintLog, every rollout
    assert scalars["train/hint_weight"] == pytest.approx([8.0], abs=1e-6)
    assert len(scalars["rollout/hint_departures"]) == 1 and 0.0 <= scalars["rollout/hint_departures"][0] < 0.5
    out = tmp_path / "eval"
    assert main(["evaluate", "--model", str(run / "best_model.zip"), "--env", ENV, *kwargs, "--seeds", "1000000..1000001",
                 "--baselines", "tetris+greedy", "--quiet", "--device", "cpu", "--out", str(out)]) == 0
    rows = {(row["policy"], row["source"]): row for row in json.loads((out / "results.json").read_text())["results"]}
    agent = next(row for (_, source), row in rows.items() if source == "agent")
    assert agent["per_seed"] == rows["tetris+greedy", "env"]["per_seed"]  # a learning rate of 1e-9: still the heuristic
    # How often its models depart from the heuristic (python -m synergy_gym.agents.hint_departures).
    from synergy_gym.agents.hint_departures import main as departures_main

    capsys.readouterr()
    assert departures_main([str(run), "--seed", "1000000"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{run}: tetris+greedy ") and "on seed 1000000; last weight 8.000; step 0, stochastic: " in line
    assert re.search(r"last, deterministic: 0 of (\d+) depart, [\d.]+ h \(1\.000×\); last, stochastic: \d+ of ", line)
    # Resumed with another hint_weight: refused (the model goes on with its learnt weight).
    weight = tmp_path / "weight.toml"
    weight.write_text("hint_weight = 3.0\n")
    assert main(["train", "--resume", str(run), "--config", str(weight), "--timesteps", "64", "--no-progress",
                 "--out", str(tmp_path / "more")]) == 2
    assert "keeps its hint's learnt weight, but the config changes hint_weight 3.0 (the checkpoint's start: 8.0)" \
        in capsys.readouterr().err and not (tmp_path / "more").exists()
    for argv, words in [([str(run), "--seed", "-1"], "--seed '-1'"), ([str(tmp_path / "nope")], "nope"),
                        ([str(out)], "config.json")]:
        with pytest.raises(SystemExit) as stop:
            departures_main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err and words in err, err
    # Every folder is checked before the first episode: a bad one last stops the command before any output.
    with pytest.raises(SystemExit):
        departures_main([str(run), str(tmp_path / "nope")])
    out, err = capsys.readouterr()
    assert out == "" and "nope" in err
    config = json.loads((run / "config.json").read_text())
    other = tmp_path / "other"  # a run folder whose model is not hinted, under a hinted config
    other.mkdir()
    (other / "config.json").write_text(json.dumps(config))
    assert main(["train", "--config", str(tmp_path / "plain.toml"), "--env", ENV, *kwargs, "--n-envs", "1", "--timesteps",
                 "32", "--eval-episodes", "1", "--eval-freq", "1000", "--no-progress", "--device", "cpu", "--out",
                 str(tmp_path / "plain")]) == 0
    for name in ("last_model.zip", "vecnormalize.pkl"):
        (other / name).write_bytes((tmp_path / "plain" / name).read_bytes())
    capsys.readouterr()
    with pytest.raises(SystemExit):
        departures_main([str(other)])
    assert "the model's hint_policy is None, its run's config.json says 'tetris+greedy'" in capsys.readouterr().err
    (run / "config.json").write_text(json.dumps({**config, "hint_policy": None}))
    with pytest.raises(SystemExit):
        departures_main([str(run)])
    assert "its config.json has no hint_policy" in capsys.readouterr().err


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_hinted_models_of_every_actor_critic_algorithm_count_their_departures(algo):
    """PPO and A2C predict without action masks: AgentPolicy passes them only where taken, and so does departures()."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from synergy_gym.agents.heuristic_hint import HeuristicHint, departures, hint_heuristic
    from synergy_gym.agents.models import build_model
    from synergy_gym.agents.wrappers import AgentPolicy

    vec = DummyVecEnv([lambda: HeuristicHint(gym.make(ENV, **PREEMPTIVE), "tetris+greedy")])
    agent = AgentPolicy(build_model(hint_config(algo=algo), vec, "cpu", tb_dir=None), None)
    tetris = hint_heuristic("tetris+greedy")
    env = gym.make(ENV, **PREEMPTIVE)
    departed, decisions, jct, kinds = departures(agent, tetris, env, 5)
    assert departed == 0 and not kinds and decisions > 10
    assert departures(tetris, tetris, env, 5) == (0, decisions, jct, kinds)


def test_departures_are_counted_by_what_the_policy_did_where_the_heuristic_did_something_else():
    """departures() with a policy that preempts where it can and otherwise follows the heuristic: every departure is
    a preemption, counted under the heuristic's own action (decoded as ActionLayout.kind does)."""
    from synergy_gym.agents.heuristic_hint import departures, hint_heuristic

    tetris = hint_heuristic("tetris+greedy")
    env = gym.make(ENV, **PREEMPTIVE)
    layout = env.unwrapped.layout
    assert [layout.kind(a) for a in (0, layout.ahead, layout.preempt, layout.stop)] == \
        ["admit", "admit ahead", "preempt", "stop"]
    seen = []

    class Preempting:
        def predict(self, obs, deterministic=True, action_masks=None):
            hint = int(tetris.predict(obs, action_masks=action_masks)[0])
            rows = np.flatnonzero(action_masks[layout.preempt:layout.stop])
            action = hint if len(seen) % 10 or not len(rows) else layout.preempt + int(rows[0])
            seen.append(f"preempt for {layout.kind(hint)}" if action != hint else None)
            return action, None

    count = departures(Preempting(), tetris, env, 5)
    expected = [k for k in seen if k is not None]
    assert count.departed == len(expected) > 0 and count.kinds == Counter(expected)
    assert count.decisions == len(seen)


def test_a_hinted_model_without_its_wrapper_says_what_it_needs():
    from stable_baselines3.common.vec_env import DummyVecEnv

    from synergy_gym import evaluate
    from synergy_gym.agents.heuristic_hint import HeuristicHint
    from synergy_gym.agents.models import build_model

    vec = DummyVecEnv([lambda: HeuristicHint(gym.make(ENV, **PREEMPTIVE), "tetris+greedy")])
    model = build_model(hint_config(), vec, "cpu", tb_dir=None)
    with pytest.raises(ConfigError, match=r"observation key 'hint', which the environment's observations lack\); "
                                          r".*\(synergy_gym.agents.wrappers.AgentPolicy adds the 'hint' of a model trained "
                                          r"with hint_policy"):
        evaluate(model, ENV, seeds=[1], **PREEMPTIVE)  # before its network meets the observation (features.py's error)


#: The hint recipe against the reference: the hint instead of imitation, the relative reward's heuristic named (the
#: reference's "best" is the same tetris+greedy), validation every 25,000 steps.
HINT_CHANGES = {"hint_policy": "tetris+greedy", "hint_weight": 10.0, "bc_steps": 0, "bc_policy": None, "dagger_rounds": None,
                "bc_epochs": None, "bc_learning_rate": None, "relative_to": "tetris+greedy", "eval_freq": 25_000}


@pytest.mark.parametrize("name, changes", [
    ("small_scarce_preemptive_hint", HINT_CHANGES),
    ("small_scarce_preemptive_hint_lr", {**HINT_CHANGES, "hint_weight": 8.0, "learning_rate": 3e-4, "ent_coef": 0.0,
                                         "ent_coef_final": None, "timesteps": 150_000}),
    ("small_scarce_preemptive_hint_credit", {**HINT_CHANGES, "hint_weight": 8.0, "learning_rate": 3e-4, "ent_coef": 0.0,
                                             "ent_coef_final": None, "timesteps": 150_000, "hint_credit": "departures"}),
    ("small_scarce_preemptive_hint_mc", {**HINT_CHANGES, "hint_weight": 8.0, "learning_rate": 3e-4, "ent_coef": 0.0,
                                         "ent_coef_final": None, "timesteps": 150_000, "gamma": 1.0, "gae_lambda": 1.0}),
])
def test_the_hint_configs_change_only_what_the_docs_say(name, changes):
    """docs/training.md compares each hint recipe with the preemptive reference config on these settings only."""
    from synergy_gym.agents.config import TrainConfig, load_config_file
    from tests.support import REPO

    configs = REPO / "agents" / "configs"
    reference = load_config_file(configs / "small_scarce_preemptive.toml")
    recipe = load_config_file(configs / f"{name}.toml")
    TrainConfig.from_mapping(recipe)  # valid
    assert {k: recipe.get(k) for k in set(reference) | set(recipe) if reference.get(k) != recipe.get(k)} == changes


def test_departure_credit_zeroes_the_advantages_of_the_steps_that_followed_the_hint():
    """hint_credit "departures": after a rollout, the steps whose action was the hint's have advantage 0 and the
    departures keep theirs, and PPO does not normalise them (which would move the zeros)."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    from synergy_gym.agents.callbacks import DepartureCredit
    from synergy_gym.agents.heuristic_hint import HINT_KEY, HeuristicHint
    from synergy_gym.agents.models import build_model

    class Seen(BaseCallback):  # runs after DepartureCredit: the buffer PPO's update reads
        def _on_rollout_end(self):
            buffer = self.model.rollout_buffer
            chosen = np.take_along_axis(buffer.observations[HINT_KEY], buffer.actions.astype(int), axis=-1)[..., 0]
            self.followed, self.advantages = chosen >= 0.5, buffer.advantages.copy()

        def _on_step(self):
            return True

    vec = DummyVecEnv([lambda: HeuristicHint(gym.make(ENV, **PREEMPTIVE), "tetris+greedy")])
    assert build_model(hint_config(), vec, "cpu", tb_dir=None).normalize_advantage  # "all": SB3's default
    cfg = hint_config(hint_credit="departures", hint_weight=2.0)
    model = build_model(cfg, vec, "cpu", tb_dir=None)
    assert model.normalize_advantage is False
    seen = Seen()
    model.learn(total_timesteps=cfg.n_steps, callback=[DepartureCredit(), seen])
    assert seen.followed.any() and (~seen.followed).any(), seen.followed.mean()  # both kinds of step in the rollout
    assert (seen.advantages[seen.followed] == 0).all()
    assert (seen.advantages[~seen.followed] != 0).all()
