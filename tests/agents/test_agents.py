"""Training and evaluating SB3 agents on every registered environment (short runs on the CPU)."""

import json

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch

import synergy_gym
from synergy_gym.cli import main
from tests.support import REPO
from tests.support.agent_runs import FAST, SMALL_ENV, TINY, tensorboard_scalars

ENV_IDS = tuple(synergy_gym.SCENARIOS)


def _write(path, text):
    path.write_text(text)
    return path


def heuristic_mean_jct(name, env_id, seeds, **kwargs):
    from synergy_gym.baselines.env_heuristics import env_heuristics
    from synergy_gym.experiments.evaluation import evaluate

    return float(evaluate(env_heuristics()[name], env_id, seeds, **kwargs)["mean_jct_h"].mean())


# -- every environment id --------------------------------------------------------------------------


# The quick subset trains through the API elsewhere (tests/env/test_env.py, the imitation and Ctrl-C tests).
@pytest.mark.slow
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_train_runs_on_every_environment(env_id, tmp_path, capsys):
    out = tmp_path / "run"
    config = _write(tmp_path / "tiny.toml", TINY)
    assert main(["train", "--env", env_id, "--timesteps", "128", "--n-envs", "1", "--eval-freq", "64",
                 "--eval-episodes", "1", "--config", str(config), "--out", str(out), *FAST[:3], *FAST[5:]]) == 0
    printed = capsys.readouterr().out
    assert f"on {env_id} for 128 steps" in printed and "× fifo+tune" in printed and "× srtf+tune" in printed
    history = pd.read_csv(out / "eval.csv")
    assert history["timesteps"].tolist() == [64, 128]
    assert (history["mean_jct_h"] > 0).all() and np.isfinite(history["mean_jct_h"]).all()
    # MaskablePPO only takes valid actions: the env never fell back.
    assert (history["invalid_action_rate"] == 0).all()
    # The reference heuristics on the same validation workload.
    fifo = heuristic_mean_jct("fifo+tune", env_id, [2_000_000], **SMALL_ENV)
    assert history["jct_vs_fifo+tune"].iloc[-1] == pytest.approx(history["mean_jct_h"].iloc[-1] / fifo)
    assert json.loads((out / "config.json").read_text())["env_id"] == env_id
    for name in ("best_model.zip", "last_model.zip", "vecnormalize.pkl"):
        assert (out / name).is_file(), name


# The paper's large id in the full suite only (the slowest; the others keep the quick subset's coverage).
@pytest.mark.parametrize("env_id", [pytest.param(e, marks=pytest.mark.slow) if e == "Synergy-v0" else e for e in ENV_IDS])
def test_minimal_masked_ppo_runs_on_every_environment(env_id):
    from synergy_gym.agents.ppo_masked_minimal import main as minimal

    result = minimal(["--env-id", env_id, "--total-timesteps", "256", "--num-envs", "2", "--num-steps", "64",
                      "--num-jobs", "20", "--device", "cpu"])
    # 20 jobs: one decision per job and episode, so 128 steps per env finish several episodes.
    assert result["updates"] == 2 and result["episodes"] >= 4
    assert np.isfinite(result["recent_mean_jct_h"]) and result["recent_mean_jct_h"] > 0


def test_minimal_ppo_flattens_every_key_but_the_mask():
    from synergy_gym.agents.ppo_masked_minimal import FEATURE_KEYS, action_mask, flatten

    env = gym.make("Synergy-small-scarce-v0", num_jobs=20)
    obs, _ = env.reset(seed=0)
    assert set(FEATURE_KEYS) == set(obs) - {"action_mask"}
    batch = {k: v[None] for k, v in obs.items()}
    size = sum(int(np.prod(env.observation_space[k].shape)) for k in FEATURE_KEYS)
    assert flatten(batch).shape == (1, size) and flatten(batch).dtype == np.float32
    np.testing.assert_array_equal(action_mask(batch)[0], env.unwrapped.action_masks())


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_rllib_observations_regroup_every_key(env_id):
    from synergy_gym.agents.rllib_ppo import make_env

    env = make_env({"env_id": env_id, "num_jobs": 10})
    inner = env.unwrapped
    assert inner.observation_space == gym.make(env_id).unwrapped.observation_space
    assert inner.cluster.total_gpus == gym.make(env_id).unwrapped.cluster.total_gpus  # the scenario's cluster
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(10):
        assert set(obs) == {"action_mask", "observations"} and env.observation_space.contains(obs)
        valid = np.flatnonzero(obs["action_mask"])
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(valid)))
        if terminated or truncated:
            break
    size = sum(int(np.prod(s.shape)) for k, s in inner.observation_space.spaces.items() if k != "action_mask")
    assert env.observation_space["observations"].shape == (size,)


def test_rllib_make_env_refuses_an_unknown_id():
    from synergy_gym.agents.rllib_ppo import make_env
    from synergy_gym.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="unknown env 'Synergy-v9'; valid: Synergy-v0, Synergy-small-v0"):
        make_env({"env_id": "Synergy-v9"})


# -- the warm start and the config -----------------------------------------------------------------


def test_imitation_warm_start_starts_the_agent_at_the_heuristic(tmp_path):
    config = _write(tmp_path / "bc.toml", TINY + "bc_steps = 400\nbc_epochs = 20\nlearning_rate = 0.001\n")
    out = tmp_path / "bc"
    assert main(["train", "--env", "Synergy-small-scarce-v0", "--config", str(config), "--bc-policy", "fifo+tune",
                 "--timesteps", "64", "--n-envs", "1", "--eval-freq", "100000", "--out", str(out), *FAST]) == 0
    scalars = tensorboard_scalars(out)
    assert scalars["bc/accuracy"][-1] >= 0.95
    history = pd.read_csv(out / "eval.csv")
    assert history["jct_vs_fifo+tune"].iloc[-1] == pytest.approx(1.0, abs=0.02)


def test_bc_policy_names_and_none():
    from synergy_gym.agents.config import TrainConfig
    from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES

    assert TrainConfig().bc_policy == "fifo+tune" and not TrainConfig(bc_steps=0).imitates
    assert TrainConfig(bc_steps=10).imitates
    for off in (None, "none", "None"):
        cfg = TrainConfig(bc_steps=10, bc_policy=off)
        assert cfg.bc_policy is None and not cfg.imitates
    for name in HEURISTIC_NAMES:
        assert TrainConfig(bc_steps=10, bc_policy=name).imitates
    assert TrainConfig(algo="dqn", bc_steps=10, bc_policy="none").algo == "dqn"  # nothing to imitate


def test_config_files_toml_and_yaml(tmp_path):
    from synergy_gym.agents.config import TrainConfig, load_config_file

    toml = _write(tmp_path / "c.toml",
                  'algo = "ppo"\nlearning_rate = 0.001\nbc_policy = "srtf+tune"\n[env_kwargs]\nnum_jobs = 50\n')
    yaml = _write(tmp_path / "c.yaml", "algo: a2c\nnet_arch: [64, 64]\nbc_policy: none\n")
    cfg = TrainConfig.from_mapping(load_config_file(toml))
    assert cfg.env_kwargs == {"num_jobs": 50} and cfg.bc_policy == "srtf+tune"
    cfg = TrainConfig.from_mapping(load_config_file(yaml))
    assert cfg.net_arch == [64, 64] and cfg.bc_policy is None


@pytest.mark.parametrize("name, env_id, env_kwargs, teacher",
                         [("small_scarce", "Synergy-small-scarce-v0", {}, "srtf+price"),
                          ("small", "Synergy-small-v0", {}, "srtf+tune"),
                          ("small_scarce_preemptive", "Synergy-small-scarce-v0", {"preemptive": True}, "tetris+greedy")])
def test_reference_configs_are_valid(name, env_id, env_kwargs, teacher):
    """The reference runs imitate their scenario's best env heuristic (README ceilings; on Synergy-small-v0
    srtf+tune, the best when the runs were trained, 0.05 % behind tetris+greedy); the default mode's stop on a stall."""

    from synergy_gym.agents.config import TrainConfig, load_config_file

    path = REPO / "agents" / "configs" / f"{name}.toml"
    cfg = TrainConfig.from_mapping(load_config_file(path))
    assert (cfg.env_id, cfg.env_kwargs, cfg.bc_policy) == (env_id, env_kwargs, teacher)
    assert (cfg.action_head, cfg.reward) == ("per_slot", "heuristic_relative")
    assert cfg.imitates and cfg.shared_workload
    if env_kwargs.get("preemptive"):  # deciding only what changes: plain imitation (DAgger did worse), 10^5 steps
        assert (cfg.dagger_rounds, cfg.bc_steps, cfg.timesteps, cfg.stop_on_stall_after) == (0, 40_000, 100_000, None)
    else:
        assert cfg.timesteps == 1_000_000 and cfg.stop_on_stall_after


def test_the_shipped_small_scarce_agent_was_trained_as_the_docs_say():
    """pretrained:small-scarce: the reference config at seed 2, then the fine-tuning overlay (docs/training.md)."""
    from synergy_gym.agents.config import load_config_file
    from synergy_gym.agents.pretrained_policies import pretrained_card, pretrained_config

    reference = load_config_file(REPO / "agents" / "configs" / "small_scarce.toml")
    overlay = load_config_file(REPO / "agents" / "configs" / "small_scarce_finetune.toml")
    assert overlay == {"learning_rate": 3e-5, "timesteps": 1_100_000, "stop_on_stall_after": 2_000_000}
    shipped = pretrained_config("small-scarce")
    expected = {**reference, "seed": 2, **overlay}
    assert {key: getattr(shipped, key) for key in expected} == expected
    card = pretrained_card("small-scarce")
    assert (card["checkpoint_step"], card["run_folder"]) == (1_100_000, "ss-main-s2-lowlr")
    assert card["checkpoint_step"] <= shipped.timesteps


@pytest.mark.parametrize("name, changes", [
    ("small_scarce_preemptive_dagger", {"dagger_rounds": 2, "dagger_steps": 10_000, "bc_steps": 20_000,
                                        "timesteps": 300_000, "stop_on_stall_after": 150_000}),
    ("small_scarce_preemptive_low_lr", {"learning_rate": 3e-5, "timesteps": 150_000}),
    ("small_scarce_preemptive_readmit", {"bc_policy": "tetris+greedy+readmit"}),
])
def test_the_preemptive_ablation_configs_change_only_what_the_docs_say(name, changes):
    """docs/training.md compares each ablation with the reference config on the settings named here, and only those."""
    from synergy_gym.agents.config import TrainConfig, load_config_file

    reference = load_config_file(REPO / "agents" / "configs" / "small_scarce_preemptive.toml")
    ablation = load_config_file(REPO / "agents" / "configs" / f"{name}.toml")
    TrainConfig.from_mapping(ablation)  # valid
    assert {k: ablation.get(k) for k in set(reference) | set(ablation) if reference.get(k) != ablation.get(k)} == changes


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--algo", "sac"], "unknown algorithm 'sac'; valid: maskable_ppo, ppo, a2c, dqn"),
        (["train", "--config", "{bad}"], "is malformed"),
        (["train", "--env-kwargs", "flavour=1"], "unknown env kwarg 'flavour'"),
        (["train", "--config", "{unknown}"], "unknown setting 'epochs'"),
        (["train", "--bc-policy", "tune"],
         "unknown bc_policy 'tune'; valid: fifo+tune, srtf+tune, las+tune, tetris, tetris+greedy, fifo+price, srtf+price, "
         "random, tetris+greedy+readmit, none"),
        (["train", "--env", "Synergy-v1"],
         "unknown env 'Synergy-v1'; valid: Synergy-v0, Synergy-small-v0, Synergy-scarce-v0, Synergy-small-scarce-v0"),
        (["train", "--device", "cuda"], "--device cuda: PyTorch sees no CUDA device"),
        (["evaluate", "--model", "{notzip}"], "is not a Stable-Baselines3 model zip"),
        (["evaluate", "--model", "{missing}"], "--model file"),
        (["evaluate", "--model", "{missing}"], "does not exist"),
        (["benchmark", "--model", "{missing}"], "--model file"),
    ],
)
def test_bad_input_gives_one_line_errors(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    files = {
        "{bad}": _write(tmp_path / "bad.toml", "algo = [unclosed\n"),
        "{unknown}": _write(tmp_path / "u.yaml", "epochs: 3\n"),
        "{notzip}": _write(tmp_path / "model.zip", "not a zip"),
        "{missing}": tmp_path / "nope.zip",
    }
    argv = [str(files.get(a, a)) for a in args] + ["--out", str(tmp_path / "out")]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_imitation_needs_an_actor_critic(tmp_path, capsys):
    config = _write(tmp_path / "bc.toml", 'algo = "dqn"\nbc_steps = 100\n')
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "x")]) == 2
    assert "needs an actor-critic algorithm" in capsys.readouterr().err


def test_agent_policy_passes_masks_and_normalises():
    from synergy_gym.agents.wrappers import AgentPolicy

    seen = {}

    class Masked:
        def predict(self, observation, state=None, episode_start=None, deterministic=False, action_masks=None):
            seen.update(obs=observation, masks=action_masks, deterministic=deterministic)
            return np.array(7), state

    class Plain:
        def predict(self, observation, state=None, episode_start=None, deterministic=False):
            seen.update(obs=observation, masks="none")
            return np.array(160), state

    class Halve:
        def normalize_obs(self, obs):
            return {k: v / 2 for k, v in obs.items()}

    obs = {"slots": np.ones((2, 3)), "action_mask": np.ones(4)}
    mask = np.array([True, False, True, True])
    action, _ = AgentPolicy(Masked(), Halve()).predict(obs, action_masks=mask)
    assert int(action) == 7 and seen["masks"] is mask and seen["deterministic"] is True
    np.testing.assert_array_equal(seen["obs"]["slots"], np.full((2, 3), 0.5))
    action, _ = AgentPolicy(Plain(), None).predict(obs, action_masks=mask)
    assert int(action) == 160 and seen["masks"] == "none" and seen["obs"] is obs  # not remapped: the env falls back


def test_a_model_without_masking_acts_through_the_env_fallback(tmp_path):
    """An untrained PPO samples outside the mask; the env falls back, and evaluation counts it."""
    from synergy_gym.agents.config import TrainConfig
    from synergy_gym.agents.models import build_model
    from synergy_gym.agents.vec_envs import make_vec_env
    from synergy_gym.agents.wrappers import AgentPolicy
    from synergy_gym.experiments.evaluation import evaluate

    cfg = TrainConfig(algo="ppo", env_id="Synergy-small-scarce-v0", env_kwargs=SMALL_ENV, n_envs=1, device="cpu",
                      net_arch=[32], global_dim=32, slot_dim=8)
    env = make_vec_env(cfg)
    try:
        model = build_model(cfg, env, "cpu", tmp_path / "tb")
        row = evaluate(AgentPolicy(model, env), cfg.env_id, [1_000_000], deterministic=False, **SMALL_ENV).iloc[0]
    finally:
        env.close()
    assert row["invalid_actions"] > 0 and row["decisions"] == row["steps"]
    assert row["jobs_finished"] + row["jobs_unfinished"] == 20


def test_sampled_evaluation_is_reproducible_per_seed_and_leaves_torch_state_alone(tmp_path):
    """deterministic=False: each episode samples from torch seeded with its seed; the caller's torch state is kept."""
    import torch

    from synergy_gym.agents.config import TrainConfig
    from synergy_gym.agents.models import build_model
    from synergy_gym.agents.vec_envs import make_vec_env
    from synergy_gym.agents.wrappers import AgentPolicy
    from synergy_gym.experiments.evaluation import evaluate

    cfg = TrainConfig(algo="maskable_ppo", env_id="Synergy-small-scarce-v0", env_kwargs=SMALL_ENV, n_envs=1,
                      device="cpu", net_arch=[32], global_dim=32, slot_dim=8)
    env = make_vec_env(cfg)
    try:
        policy = AgentPolicy(build_model(cfg, env, "cpu", tmp_path / "tb"), env)
        torch.manual_seed(5)
        before = torch.random.get_rng_state()
        rows = [evaluate(policy, cfg.env_id, seeds, deterministic=False, **SMALL_ENV)
                for seeds in ([1_000_000, 1_000_001], [1_000_001, 1_000_000], [1_000_000, 1_000_001])]
        assert torch.equal(torch.random.get_rng_state(), before)
        assert len(evaluate(policy, cfg.env_id, [2**64], deterministic=False, **SMALL_ENV)) == 1  # beyond torch's seeds
    finally:
        env.close()
    columns = ["seed", "episode_return", "mean_jct_h", "decisions"]
    first, swapped, again = (r[columns].sort_values("seed").reset_index(drop=True) for r in rows)
    assert first.equals(again) and first.equals(swapped)  # a seed's episode does not depend on the others
    assert first["episode_return"].nunique() == 2


# -- all algorithms, checkpoints, TensorBoard, determinism, resume (slow) ------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One short run per algorithm on Synergy-small-scarce-v0."""
    root = tmp_path_factory.mktemp("runs")
    runs = {}
    for algo in ("maskable_ppo", "ppo", "a2c", "dqn"):
        out = root / algo
        text = TINY.replace("n_steps = 64", "n_steps = 256")
        if algo == "dqn":
            text = "net_arch = [32]\nlearning_starts = 200\nbuffer_size = 5000\n"
        args = ["train", "--algo", algo, "--env", "Synergy-small-scarce-v0", "--timesteps", "1024", "--n-envs", "1",
                "--eval-freq", "512", "--out", str(out), "--config", str(_write(root / f"{algo}.toml", text)), *FAST]
        assert main(args) == 0
        runs[algo] = out
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "a2c", "dqn"])
def test_train_writes_checkpoints_config_and_tensorboard_tags(trained, algo):
    run = trained[algo]
    from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES

    for name in ("best_model.zip", "last_model.zip", "vecnormalize.pkl", "best_vecnormalize.pkl", "config.json",
                 "versions.json", "baselines.json", "eval.csv"):
        assert (run / name).is_file(), name
    scalars = tensorboard_scalars(run)
    for tag in ("eval/mean_jct_h", "eval/p99_jct_h", "eval/makespan_h", "eval/invalid_action_rate",
                "eval/jct_vs_fifo+tune", "eval/jct_vs_srtf+tune", "eval/jct_vs_best_heuristic",
                *(f"baseline/{name}/mean_jct_h" for name in HEURISTIC_NAMES)):
        assert tag in scalars, tag
    seeds = [2_000_000, 2_000_001]
    for name in ("fifo+tune", "srtf+tune"):
        expected = heuristic_mean_jct(name, "Synergy-small-scarce-v0", seeds, **SMALL_ENV)
        assert scalars[f"baseline/{name}/mean_jct_h"][0] == pytest.approx(expected)
    config = json.loads((run / "config.json").read_text())
    assert config["algo"] == algo and config["env_kwargs"] == SMALL_ENV
    versions = json.loads((run / "versions.json").read_text())
    assert {"python", "torch", "stable-baselines3", "gymnasium", "git_commit"} <= set(versions)
    assert versions["device"] == "cpu"
    history = pd.read_csv(run / "eval.csv")
    assert len(history) >= 2 and history["timesteps"].iloc[-1] >= 1024  # periodic and once at the end


@pytest.mark.slow
def test_evaluate_scores_a_trained_agent_beside_the_heuristics(trained, tmp_path):
    js = tmp_path / "r.json"
    # On the validation seeds the run selected its checkpoint on (reported results use held-out seeds).
    model = str(trained["maskable_ppo"] / "best_model.zip")
    assert main(["evaluate", "--model", model, "--seeds", "2000000..2000001",
                 "--baselines", "env", "--out", str(tmp_path / "ev"), "--json", str(js), "--device", "cpu",
                 "--quiet"]) == 0
    by_policy = {r["policy"]: r for r in json.loads(js.read_text())["results"]}
    assert {model, "fifo+tune", "srtf+tune"} <= set(by_policy)  # the agent is named by its --model argument
    # The agent's evaluation in training used these seeds and the same env kwargs (from the run's config.json).
    best = pd.read_csv(trained["maskable_ppo"] / "eval.csv")["mean_jct_h"].min()
    assert by_policy[model]["mean_jct_h"] == pytest.approx(best)


@pytest.mark.slow
def test_training_twice_with_the_same_seed_gives_identical_evaluations(tmp_path):
    config = _write(tmp_path / "tiny.toml", TINY)
    for name in ("a", "b"):
        assert main(["train", "--env", "Synergy-small-scarce-v0", "--timesteps", "256", "--n-envs", "2",
                     "--eval-freq", "128", "--seed", "3", "--config", str(config), "--out", str(tmp_path / name), *FAST]) == 0
    a, b = (pd.read_csv(tmp_path / n / "eval.csv") for n in ("a", "b"))
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
def test_resume_continues_from_a_checkpoint(trained, tmp_path):
    out = tmp_path / "resumed"
    # --timesteps is the total to reach (SB3's reset_num_timesteps=False): 300 more than the checkpoint's 1,024.
    assert main(["train", "--resume", str(trained["maskable_ppo"] / "last_model.zip"), "--timesteps", "1324",
                 "--out", str(out), "--no-progress"]) == 0
    history = pd.read_csv(out / "eval.csv")
    assert history["timesteps"].iloc[-1] >= 1024 + 300
    assert len(history) <= 2  # evaluations keep their cadence after a resume (not one per step)
