"""Training and evaluating SB3 agents (short runs on the CPU)."""

import json

import pandas as pd
import pytest

from synergy_gym.cli import main

FAST = ["--env-kwargs", "num_jobs=30", "--eval-episodes", "2", "--no-progress", "--device", "cpu"]


def tensorboard_tags(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = list((run_dir / "tb").rglob("events.out.tfevents.*"))[:1]
    acc = EventAccumulator(str(events))
    acc.Reload()
    return set(acc.Tags()["scalars"])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One short run per algorithm."""
    root = tmp_path_factory.mktemp("runs")
    runs = {}
    for algo in ("maskable_ppo", "ppo", "a2c", "dqn"):
        out = root / algo
        args = ["train", "--algo", algo, "--timesteps", "2048", "--n-envs", "1", "--eval-freq", "1024", "--out", str(out), *FAST]
        if algo == "dqn":
            args += ["--config", str(_write(root / "dqn.toml", "learning_starts = 200\nbuffer_size = 5000\n"))]
        assert main(args) == 0
        runs[algo] = out
    return runs


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "a2c", "dqn"])
def test_train_writes_checkpoints_config_and_tensorboard_tags(trained, algo):
    run = trained[algo]
    for name in ("best_model.zip", "last_model.zip", "vecnormalize.pkl", "best_vecnormalize.pkl", "config.json", "versions.json", "eval.csv"):
        assert (run / name).is_file(), name
    tags = tensorboard_tags(run)
    for tag in ("eval/mean_jct_h", "eval/p99_jct_h", "eval/makespan_h", "eval/jct_vs_tune", "eval/jct_vs_fair",
                "baseline/fifo+fair/mean_jct_h", "baseline/fifo+tune/mean_jct_h"):
        assert tag in tags, tag
    config = json.loads((run / "config.json").read_text())
    assert config["algo"] == algo and config["env_kwargs"] == {"num_jobs": 30}
    versions = json.loads((run / "versions.json").read_text())
    assert {"python", "torch", "stable-baselines3", "gymnasium", "git_commit"} <= set(versions)
    history = pd.read_csv(run / "eval.csv")
    assert len(history) >= 2 and history["timesteps"].iloc[-1] >= 2048  # periodic and once at the end


@pytest.mark.slow
def test_evaluate_gives_agent_fair_and_tune_on_the_same_seeds(trained, tmp_path, capsys):
    out, js = tmp_path / "ev", tmp_path / "r.json"
    assert main(["evaluate", "--model", str(trained["maskable_ppo"] / "best_model.zip"), "--episodes", "2",
                 "--out", str(out), "--json", str(js), "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert "agent" in printed and "fifo+fair" in printed and "fifo+tune" in printed
    rows = json.loads(js.read_text())["results"]
    seeds = {p: sorted(r["seed"] for r in rows if r["policy"] == p) for p in {r["policy"] for r in rows}}
    assert set(seeds) == {"agent", "fifo+fair", "fifo+tune", "random"}
    assert len({tuple(s) for s in seeds.values()}) == 1  # identical seeds for every policy
    assert {"load", "mean_jct_h", "median_jct_h", "p99_jct_h", "makespan_h", "jobs_measured", "wall_s"} <= set(rows[0])
    assert (out / "jct_cdf.png").is_file() and (out / "results.csv").is_file()


@pytest.mark.slow
def test_evaluate_over_several_models_reports_a_confidence_interval(trained, tmp_path, capsys):
    models = [str(trained[a] / "last_model.zip") for a in ("maskable_ppo", "ppo")]
    assert main(["evaluate", "--model", models[0], "--model", models[1], "--episodes", "2", "--out", str(tmp_path / "e"),
                 "--device", "cpu"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("agent"))
    assert line.split()[1] == "2" and line.split()[3] != "-"


@pytest.mark.slow
def test_training_twice_with_the_same_seed_gives_identical_evaluations(tmp_path):
    for name in ("a", "b"):
        assert main(["train", "--timesteps", "1100", "--n-envs", "2", "--eval-freq", "1000", "--seed", "3",
                     "--out", str(tmp_path / name), *FAST]) == 0
    a, b = (pd.read_csv(tmp_path / n / "eval.csv") for n in ("a", "b"))
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
def test_resume_continues_from_a_checkpoint(trained, tmp_path):
    out = tmp_path / "resumed"
    assert main(["train", "--resume", str(trained["maskable_ppo"] / "last_model.zip"), "--timesteps", "600",
                 "--out", str(out), "--no-progress"]) == 0
    history = pd.read_csv(out / "eval.csv")
    assert history["timesteps"].iloc[-1] >= 2048 + 600
    assert len(history) <= 2  # evaluations keep their cadence after a resume (not one per step)


def test_config_files_toml_and_yaml(tmp_path):
    from agents.config import TrainConfig, load_config_file

    toml = _write(tmp_path / "c.toml", 'algo = "ppo"\nlearning_rate = 0.001\n[env_kwargs]\nnum_jobs = 50\n')
    yaml = _write(tmp_path / "c.yaml", "algo: a2c\nnet_arch: [64, 64]\n")
    assert TrainConfig.from_mapping(load_config_file(toml)).env_kwargs == {"num_jobs": 50}
    assert TrainConfig.from_mapping(load_config_file(yaml)).net_arch == [64, 64]


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--algo", "sac"], "unknown algorithm 'sac'; valid: maskable_ppo, ppo, a2c, dqn"),
        (["train", "--config", "{bad}"], "is malformed"),
        (["train", "--env-kwargs", "flavour=1"], "unknown env kwarg 'flavour'"),
        (["train", "--config", "{unknown}"], "unknown setting 'epochs'"),
        (["evaluate", "--model", "{notzip}"], "is not a Stable-Baselines3 model zip"),
        (["train", "--device", "cuda"], "--device cuda: PyTorch sees no CUDA device"),
        (["evaluate", "--model", "{missing}"], "does not exist"),
    ],
)
def test_bad_input_gives_one_line_errors(tmp_path, capsys, monkeypatch, args, message):
    import torch

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


def test_minimal_masked_ppo_runs_a_few_updates():
    from agents.ppo_masked_minimal import main as minimal

    result = minimal(["--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "128", "--num-jobs", "20", "--device", "cpu"])
    assert result["updates"] == 4 and result["episodes"] > 0


@pytest.mark.slow
def test_imitation_warm_start_starts_the_agent_at_tune(tmp_path):
    config = _write(tmp_path / "bc.toml", "bc_steps = 1200\nbc_epochs = 20\nlearning_rate = 0.0003\n")
    assert main(["train", "--config", str(config), "--timesteps", "256", "--n-envs", "2", "--eval-freq", "100000",
                 "--out", str(tmp_path / "bc"), *FAST]) == 0
    history = pd.read_csv(tmp_path / "bc" / "eval.csv")
    assert history["jct_vs_tune"].iloc[-1] == pytest.approx(1.0, abs=0.02)


def test_imitation_needs_an_actor_critic(tmp_path, capsys):
    config = _write(tmp_path / "bc.toml", 'algo = "dqn"\nbc_steps = 100\n')
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "x")]) == 2
    assert "needs an actor-critic algorithm" in capsys.readouterr().err
