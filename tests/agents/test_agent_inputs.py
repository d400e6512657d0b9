"""``synergy-gym train``'s inputs: a config file or hyper-parameters that cannot work are one line, and nothing is written.

Every refusal: exit status 2, one line on stderr naming the file (where a file is the cause) or the rule, no
traceback, and neither the ``--out`` folder nor the default ``runs/`` folder appears. Settings that are valid but
will do nothing are ``note:`` lines.
"""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest
import torch

from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.hyperparameters import inert_settings
from synergy_gym.errors import ConfigError
from tests.agents.tiny_runs import QUICK, one_line_error, tiny_config
from tests.support.cli_runs import run_cli, snapshot


@pytest.fixture
def refused(monkeypatch):
    """A refusal test whose input is accepted fails at once (rather than training for minutes): nothing may be written."""
    from synergy_gym.agents import train as train_module

    def started(*_args, **_kwargs):
        raise AssertionError("the run was not refused: it started writing its folder")

    monkeypatch.setattr(train_module, "write_run_records", started)


#: (file name, its bytes, words of the message; "{file}" stands for the file's path).
BAD_CONFIG_FILES = [
    ("binary.toml", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", ["config file {file} is not UTF-8 text (byte 0x89 at "
                                                                    "offset 0)"]),
    ("latin1.toml", "algo = \"ppo\" # é\n".encode("latin-1"), ["config file {file} is not UTF-8 text (byte 0xe9"]),
    ("bom16.yaml", "algo: ppo\n".encode("utf-16"), ["config file {file} is not UTF-8 text"]),
    ("unclosed.toml", b"algo = [unclosed\n", ["config file {file} is malformed: "]),
    ("duplicate.toml", b"seed = 1\nseed = 2\n", ["config file {file} is malformed: "]),
    ("bad.yaml", b"algo: [ppo\n", ["config file {file} is malformed: "]),
    ("bad.json", b'{"algo": "ppo",}', ["config file {file} is malformed: "]),
    ("list.yaml", b"- algo\n- ppo\n", ["config file {file} must hold a table of settings"]),
    ("scalar.yaml", b"ppo\n", ["config file {file} must hold a table of settings"]),
    ("list.json", b"[1, 2]", ["config file {file} must hold a table of settings"]),
    ("config.txt", b"algo = 'ppo'\n", ["config file {file}: use .toml, .yaml/.yml or .json"]),
    ("unknown.toml", b"epochs = 3\n", ["{file}: unknown setting 'epochs'; valid: action_head, algo, "]),
    ("unknown.yaml", b"n_step: 8\n", ["{file}: unknown setting 'n_step'"]),
    ("negative.toml", b"n_steps = -5\n", ["{file}: n_steps must be a positive integer, got -5"]),
    ("text.toml", b'timesteps = "many"\n', ["{file}: timesteps must be a positive integer, got 'many'"]),
    ("gamma.toml", b"gamma = 2.0\n", ["{file}: gamma must be in (0, 1], got 2.0"]),
    ("algo.toml", b'algo = "sac"\n', ["{file}: unknown algorithm 'sac'; valid: maskable_ppo, ppo, a2c, dqn"]),
    ("device.toml", b'device = "tpu"\n', ["{file}: unknown device 'tpu'; valid: auto, cpu, cuda, cuda:N"]),
    ("flag.toml", b'normalize_obs = "yes"\n', ["{file}: normalize_obs must be true or false, got 'yes'"]),
    ("net.toml", b'net_arch = "big"\n', ["{file}: net_arch must be a list of positive layer sizes, got 'big'"]),
    ("kwargs.toml", b"env_kwargs = 5\n", ["{file}: env_kwargs must be a table of env keyword arguments, got 5"]),
    ("env.toml", b'env_id = "Synergy-v9"\n', ["{file}: unknown env 'Synergy-v9'; valid: Synergy-v0, "]),
    ("env_kwarg.toml", b"[env_kwargs]\nflavour = 1\n", ["{file}: unknown env kwarg 'flavour'; valid: "]),
    ("env_value.toml", b'[env_kwargs]\nnum_jobs = "x"\n', ["{file}: env kwarg num_jobs must be a positive integer"]),
    ("rule.toml", b"n_steps = 8\nbatch_size = 100000\n", ["{file}: batch_size 100,000 is larger than a rollout"]),
    ("fixed_jobs.toml", b'[env_kwargs]\nworkload = "jobs.csv"\nnum_jobs = 3\n',
     ["{file}: env kwarg num_jobs=3 does not apply with workload='jobs.csv' (num_jobs shapes generated workloads only)"]),
    ("seed.toml", b"seed = 5000000000\n", ["{file}: seed must be below 2**32 = 4,294,967,296 (NumPy's and PyTorch's "
                                          "seeds), got 5000000000"]),
]


@pytest.mark.parametrize("out", ["--out", "default"])
@pytest.mark.parametrize(("name", "data", "words"), BAD_CONFIG_FILES, ids=[case[0] for case in BAD_CONFIG_FILES])
def test_a_bad_config_file_is_one_line_naming_it_and_nothing_is_written(name, data, words, out, tmp_path, capsys,
                                                                        monkeypatch, refused):
    monkeypatch.chdir(tmp_path)  # the default run folder is runs/… here
    config = tmp_path / name
    config.write_bytes(data)
    before = snapshot(tmp_path)
    where = ["--out", str(tmp_path / "run")] if out == "--out" else []
    code, printed, err = run_cli(["train", "--config", str(config), *where], capsys)
    one_line_error(code, printed, err, *(word.format(file=config) for word in words))
    assert snapshot(tmp_path) == before


def test_a_config_that_is_no_file_is_one_line(tmp_path, capsys, refused):
    (tmp_path / "folder.toml").mkdir()
    for path, words in ((tmp_path / "nope.toml", "does not exist"), (tmp_path / "folder.toml", "is a folder, not a file")):
        code, out, err = run_cli(["train", "--config", str(path), "--out", str(tmp_path / "run")], capsys)
        one_line_error(code, out, err, f"config file {str(path)!r} {words}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.toml"]


def test_a_second_config_file_is_one_line_not_a_silent_replacement(tmp_path, capsys, refused):
    # argparse kept the last --config only: the first file's settings were dropped without a word.
    first, second = tiny_config(tmp_path), tmp_path / "b.toml"
    second.write_text("reference_baselines = []\n")
    with pytest.raises(SystemExit) as exited:  # a usage error: argparse exits
        run_cli(["train", "--config", str(first), "--config", str(second), "--out", str(tmp_path / "run")], capsys)
    out, err = capsys.readouterr()
    code = exited.value.code
    one_line_error(code, out, err, f"--config given twice ({str(first)!r}, {str(second)!r})", "put the settings in one file")
    assert not (tmp_path / "run").exists()


def test_an_option_that_causes_the_error_is_not_blamed_on_the_file(tmp_path, capsys, refused):
    """The file alone is valid: the error comes from the option over it, and names no file."""
    config = tiny_config(tmp_path)  # n_steps 8, batch_size 8: fine with one environment
    code, out, err = run_cli(["train", "--config", str(config), "--env-kwargs", "flavour=1", "--out", str(tmp_path / "r")],
                             capsys)
    assert str(config) not in one_line_error(code, out, err, "error: unknown env kwarg 'flavour'")
    config.write_text("n_steps = 8\nbatch_size = 32\n")  # 4 environments (the default): a rollout of 32
    code, out, err = run_cli(["train", "--config", str(config), "--n-envs", "1", "--out", str(tmp_path / "r")], capsys)
    line = one_line_error(code, out, err, "error: batch_size 32 is larger than a rollout, n_steps × n_envs = 8 × 1 = 8")
    assert str(config) not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]


# -- hyper-parameters that cannot work together ----------------------------------------------------------------------

#: (settings of the config file, options, the rule's message).
HYPERPARAMETER_RULES = [
    ({"n_steps": 8, "batch_size": 100_000}, {"n_envs": 1},
     "batch_size 100,000 is larger than a rollout, n_steps × n_envs = 8 × 1 = 8 steps, from which PPO's minibatches are "
     "cut; lower batch_size or raise n_steps or n_envs"),
    ({"n_steps": 8, "batch_size": 1}, {}, "batch_size 1: PPO needs minibatches of at least 2 steps (advantages are "
                                          "normalised over each minibatch)"),
    ({"n_steps": 1, "batch_size": 2}, {"n_envs": 1, "algo": "ppo"},
     "n_steps × n_envs = 1 × 1 = 1: a PPO rollout needs at least 2 steps"),
    ({"clip_range": 1.0}, {}, "clip_range 1.0 must be below 1 (PPO clips the probability ratio to [1 − clip_range, "
                              "1 + clip_range])"),
    ({"clip_range": 1.5}, {"algo": "ppo"}, "clip_range 1.5 must be below 1"),
    ({"algo": "dqn", "batch_size": 64, "buffer_size": 32}, {},
     "batch_size 64 is larger than the replay buffer, buffer_size 32, that DQN's batches are drawn from"),
    ({"algo": "dqn"}, {"timesteps": 500}, "learning_starts 1,000 is not below timesteps 500: DQN would never update "
                                          "the network"),
    ({"algo": "dqn", "learning_starts": 1000}, {"timesteps": 1000}, "learning_starts 1,000 is not below timesteps 1,000"),
    ({"algo": "dqn", "learning_starts": 0, "train_freq": 600}, {"timesteps": 500},
     "train_freq 600 is not below timesteps 500: DQN would never update the network"),
    ({"algo": "dqn", "learning_starts": 10, "target_update_interval": 5000}, {"timesteps": 5000},
     "target_update_interval 5,000 is not below timesteps 5,000: DQN would never update its target network"),
]


@pytest.mark.parametrize(("settings", "options", "rule"), HYPERPARAMETER_RULES)
def test_hyperparameters_that_cannot_work_are_one_line_naming_the_rule(settings, options, rule, tmp_path, capsys,
                                                                       monkeypatch, refused):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "hp.toml"
    config.write_text("".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items()))
    argv = [item for key, value in options.items() for item in (f"--{key.replace('_', '-')}", str(value))]
    before = snapshot(tmp_path)
    code, out, err = run_cli(["train", "--config", str(config), *argv], capsys)
    one_line_error(code, out, err, rule)
    assert snapshot(tmp_path) == before
    with pytest.raises(ConfigError) as refused:  # the same rule without any file: TrainConfig itself
        TrainConfig(**settings, **options)
    assert rule in str(refused.value)


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn"])
def test_raising_on_masked_actions_needs_an_algorithm_that_masks(algo, tmp_path, capsys, monkeypatch, refused):
    """Without masking the first masked action sampled would end the run mid-training, after its records."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["train", *QUICK, "--algo", algo, "--env-kwargs", "invalid_action=raise"], capsys)
    one_line_error(code, out, err, f"env_kwargs invalid_action='raise' needs action masking (maskable_ppo): {algo} also "
                                   "samples masked actions, and the first would end the run")
    assert not (tmp_path / "runs").exists()
    TrainConfig(env_kwargs={"invalid_action": "raise"})  # maskable_ppo masks: fine


def test_dqn_trains_with_the_configured_gradient_clipping():
    """Every hyper-parameter config.json records reaches the model (DQN's max_grad_norm used to stay SB3's 10)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from synergy_gym.agents.models import build_model

    cfg = TrainConfig(algo="dqn", max_grad_norm=0.7, learning_starts=10, timesteps=5000, net_arch=[8], global_dim=8,
                      slot_dim=4)
    env = DummyVecEnv([lambda: gym.make("Synergy-small-v0", num_jobs=10)])
    model = build_model(cfg, env, "cpu", None)
    assert (model.max_grad_norm, model.gamma, model.batch_size, model.buffer_size) == (
        0.7, cfg.gamma, cfg.batch_size, cfg.buffer_size)


def test_settings_that_do_nothing_are_notes():
    def notes(**settings):
        return inert_settings(TrainConfig(**settings))

    assert notes() == []  # the reference run
    assert notes(timesteps=1000, eval_freq=2000, checkpoint_freq=500, n_steps=64, batch_size=64) == [
        "eval_freq 2,000 is above timesteps 1,000: only the final evaluation runs"]
    assert notes(timesteps=100_000, stop_on_stall_after=100_000) == [
        "stop_on_stall_after 100,000 is not below timesteps 100,000: training never stops early"]
    assert notes(timesteps=1000, eval_freq=500, n_steps=512, n_envs=4, batch_size=64, checkpoint_freq=500) == [
        "timesteps 1,000 is less than one rollout (n_steps × n_envs = 2,048): training runs one whole rollout, 2,048 steps"]
    # Resumed: what counts is the steps left (a resume with more --n-envs overshot by half its timesteps unsaid).
    resumed = TrainConfig(timesteps=1024, eval_freq=512, n_steps=512, n_envs=2, batch_size=64, checkpoint_freq=256)
    assert inert_settings(resumed) == []
    assert inert_settings(resumed, 512) == [
        "the 512 steps left to timesteps 1,024 (resumed at step 512) are less than one rollout (n_steps × n_envs = "
        "1,024): training runs one whole rollout, 1,024 steps, to step 1,536"]
    assert inert_settings(resumed, 1024) == []  # nothing left to train: the final evaluation only
    assert notes(algo="a2c", target_kl=0.05) == ["target_kl applies to PPO only, not a2c"]
    assert notes(timesteps=20_000, checkpoint_freq=20_000, eval_freq=10_000) == [
        "checkpoint_freq 20,000 is not below timesteps 20,000: no periodic checkpoint is saved"]
    assert notes(timesteps=20_000, checkpoint_freq=0, eval_freq=10_000) == []  # no checkpoints asked for
    # Settings of another algorithm, changed from their defaults (as the defaults, they say nothing).
    assert notes(algo="a2c", n_epochs=3, clip_range=0.1, batch_size=64) == [
        "n_epochs applies to PPO only, not a2c", "clip_range applies to PPO only, not a2c",
        "batch_size applies to PPO, DQN and the warm start only, not a2c"]
    assert notes(algo="a2c", batch_size=64, bc_steps=1000) == []  # the warm start's minibatches
    assert notes(algo="dqn", n_epochs=3, n_steps=64) == [
        "n_steps applies to the actor-critic algorithms only, not dqn", "n_epochs applies to PPO only, not dqn"]
    assert notes(learning_starts=10) == ["learning_starts applies to DQN only, not maskable_ppo"]
    assert notes(relative_to="srtf+tune") == [
        "relative_to 'srtf+tune' has no effect with reward 'absolute': only the reward heuristic_relative compares "
        "with a heuristic"]
    assert notes(relative_to="srtf+tune", reward="heuristic_relative") == []
    # Warm-start settings without a warm start, and DAgger's without DAgger rounds.
    assert notes(bc_policy="srtf+tune", bc_epochs=3, bc_learning_rate=1e-3) == [
        f"{name} has no effect without a warm start: bc_steps is 0 (--bc-steps N imitates for N steps)"
        for name in ("bc_policy 'srtf+tune'", "bc_epochs 3", "bc_learning_rate 0.001")]
    assert notes(bc_steps=1000, bc_policy=None, bc_epochs=3) == [
        "bc_epochs 3 has no effect without a warm start: bc_policy is none"]
    assert notes(bc_steps=1000, dagger_steps=500) == ["dagger_steps 500 has no effect with dagger_rounds 0"]
    assert notes(dagger_steps=500) == ["dagger_steps 500 has no effect with dagger_rounds 0"]  # nor without imitation
    assert notes(bc_steps=1000, bc_epochs=3, dagger_rounds=1, dagger_steps=500) == []


def test_a_run_without_out_goes_to_runs_and_prints_its_notes(tmp_path, capsys, monkeypatch):
    """The default run folder ``runs/<env>__<algo>__<seed>__<time>`` is created with ``runs/``; notes go to stdout."""
    monkeypatch.chdir(tmp_path)
    config = tiny_config(tmp_path, "target_kl = 0.05\n")
    code, out, err = run_cli(["train", *QUICK, "--config", str(config), "--timesteps", "16", "--checkpoint-freq", "16",
                              "--algo", "a2c"], capsys)
    assert code == 0, err
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("Synergy-small-v0__a2c__0__") and (run / "last_model.zip").is_file()
    lines = out.splitlines()
    assert lines[0] == f"run folder: {run.relative_to(tmp_path)}"
    assert [line for line in lines if line.startswith("note: ")] == [
        "note: eval_freq 1,000 is above timesteps 16: only the final evaluation runs",
        "note: checkpoint_freq 16 is not below timesteps 16: no periodic checkpoint is saved",
        "note: n_epochs applies to PPO only, not a2c",  # n_epochs 1, batch_size 8 in the tiny config
        "note: target_kl applies to PPO only, not a2c",
        "note: batch_size applies to PPO, DQN and the warm start only, not a2c"]
    assert not (run / "checkpoints").exists()
    assert json.loads((run / "config.json").read_text())["algo"] == "a2c"


# -- devices ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("device", "cuda", "words"), [
    ("tpu", 0, "unknown device 'tpu'; valid: auto, cpu, cuda, cuda:N"),
    ("cuda", 0, "--device cuda: PyTorch sees no CUDA device on this machine (use --device auto or cpu)"),
    ("cuda:0", 0, "--device cuda:0: PyTorch sees no CUDA device on this machine"),
    ("cuda:2", 1, "--device cuda:2: PyTorch sees 1 CUDA device(s), numbered from 0"),
    ("cuda:x", 1, "unknown device 'cuda:x'; valid: auto, cpu, cuda, cuda:N"),
])
def test_train_on_a_device_that_is_not_there_is_one_line(device, cuda, words, tmp_path, capsys, monkeypatch, refused):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda)
    code, out, err = run_cli(["train", "--device", device, "--out", str(tmp_path / "run")], capsys)
    one_line_error(code, out, err, words)
    assert not (tmp_path / "run").exists()


# -- layers and YAML numbers ------------------------------------------------------------------------------------------


def test_a_config_files_env_kwargs_merge_over_the_resumed_runs_like_the_options(run64, tmp_path):
    """On ``--resume`` a ``--config`` file's ``[env_kwargs]`` adds to the run's env kwargs key by key, as
    ``--env-kwargs`` does, rather than replacing them all; a later layer's value wins."""
    from synergy_gym.agents.resume import resume_target
    from synergy_gym.agents.train_options import config_from_args
    from synergy_gym.cli import build_parser

    config = tmp_path / "rounds.toml"
    config.write_text("[env_kwargs]\nmax_rounds = 3000\n")
    checkpoint = resume_target(run64)

    def env_kwargs(*argv: str) -> dict:
        return config_from_args(build_parser().parse_args(["train", "--resume", str(run64), *argv]), checkpoint).env_kwargs

    assert env_kwargs("--config", str(config)) == {"num_jobs": 10, "max_rounds": 3000}  # the run's num_jobs kept
    assert env_kwargs("--env-kwargs", "max_rounds=3000") == {"num_jobs": 10, "max_rounds": 3000}
    assert env_kwargs("--config", str(config), "--env-kwargs", "max_rounds=3500") == {"num_jobs": 10, "max_rounds": 3500}


def test_a_generator_setting_beside_fixed_jobs_names_the_layer_that_set_it(run64, tmp_path):
    """``workload=`` keeps all of its jobs, so ``num_jobs`` from a ``--config`` file or ``--env-kwargs`` over a layer
    that sets ``workload`` is refused naming both; the resumed run's own ``num_jobs`` is kept as it was trained."""
    from synergy_gym.agents.resume import resume_target
    from synergy_gym.agents.train_options import config_from_args
    from synergy_gym.cli import build_parser

    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,model,gpus,arrival_s,total_iters,in_measured_window\n0,gnmt,1,0,100,1\n")
    fixed, count = tmp_path / "fixed.toml", tmp_path / "count.toml"
    fixed.write_text(f"[env_kwargs]\nworkload = {str(jobs)!r}\n")
    count.write_text("[env_kwargs]\nnum_jobs = 5\n")
    checkpoint = resume_target(run64)

    def env_kwargs(*argv: str) -> dict:
        return config_from_args(build_parser().parse_args(["train", "--resume", str(run64), *argv]), checkpoint).env_kwargs

    assert env_kwargs("--config", str(fixed)) == {"num_jobs": 10, "workload": str(jobs)}  # the run's own, kept
    with pytest.raises(ConfigError, match="^" + re.escape(f"--env-kwargs: env kwarg num_jobs=5 does not apply with "
                                                          f"workload='{jobs}', set by {fixed} (num_jobs shapes generated "
                                                          f"workloads only)")):
        env_kwargs("--config", str(fixed), "--env-kwargs", "num_jobs=5")
    with pytest.raises(ConfigError, match="^" + re.escape(f"{count}: env kwarg num_jobs=5 does not apply with "
                                                          f"workload='{jobs}', set by --env-kwargs (num_jobs shapes")):
        env_kwargs("--config", str(count), "--env-kwargs", f"workload={jobs}")


def test_numbers_yaml_reads_as_text_are_numbers(tmp_path):
    """YAML 1.1 (PyYAML) reads 3e-4 and 1e5 as text: for the settings that are numbers they are numbers."""
    from synergy_gym.agents.config import load_run_config

    config = tmp_path / "c.yaml"
    config.write_text("learning_rate: 3e-4\ntimesteps: 1e5\nbc_learning_rate: 1E-3\nbc_policy: none\n")
    cfg = load_run_config(config)
    assert (cfg.learning_rate, cfg.timesteps, cfg.bc_learning_rate) == (3e-4, 100_000, 1e-3)
    assert isinstance(cfg.timesteps, int)
    config.write_text("env_kwargs:\n  jobs_per_hour: 3e-1\n  num_jobs: 1e2\n  cluster: 1e2\n")  # the env's too
    assert load_run_config(config).env_kwargs == {"jobs_per_hour": 0.3, "num_jobs": 100, "cluster": "1e2"}
    assert isinstance(load_run_config(config).env_kwargs["num_jobs"], int)
    from synergy_gym.agents.config import yaml_numbers  # an integer's text stays exact (float would round it)

    assert yaml_numbers({"timesteps": "12345678901234567"})["timesteps"] == 12345678901234567
    config.write_text("timesteps: 1.5e3x\n")  # not a number: refused as before
    with pytest.raises(ConfigError, match=r"timesteps must be a positive integer, got '1.5e3x'"):
        load_run_config(config)
    toml = tmp_path / "c.toml"  # TOML has numbers of its own: text stays text
    toml.write_text('learning_rate = "3e-4"\n')
    with pytest.raises(ConfigError, match=r"learning_rate must be a positive number, got '3e-4'"):
        load_run_config(toml)
