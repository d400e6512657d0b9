"""``train``'s size guard: a run past a week or the memory limit is refused before anything is written."""

from __future__ import annotations

from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.model_checks import effective_env_kwargs
from synergy_gym.agents.train_size import TIME_LIMIT_S, train_estimate
from tests.support.cli_runs import run_cli, snapshot


def test_a_run_of_a_trillion_steps_is_refused_with_its_estimate(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, out, err = run_cli(["train", "--env", "Synergy-small-v0", "--timesteps", str(10**12), "--no-progress"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("synergy-gym train: error: 1,000,000,000,000 steps of maskable_ppo with 4 environments "), err
    assert "(over the limit of 7 days for training)" in err and err.rstrip().endswith("pass --allow-large to run it anyway")
    assert snapshot(tmp_path) == before


def test_a_replay_buffer_larger_than_memory_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dqn.toml").write_text('algo = "dqn"\nbuffer_size = 10_000_000_000\ntimesteps = 1000\n'
                                       "learning_starts = 10\ntarget_update_interval = 100\n")
    before = snapshot(tmp_path)
    code, out, err = run_cli(["train", "--config", "dqn.toml", "--env", "Synergy-small-v0", "--no-progress"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "steps of dqn" in err and "of memory (over " in err and "--allow-large" in err, err
    assert snapshot(tmp_path) == before


def test_the_estimate_counts_steps_buffers_and_evaluations():
    kwargs = effective_env_kwargs("Synergy-small-scarce-v0", {})
    base = TrainConfig(env_id="Synergy-small-scarce-v0")
    plain = train_estimate(base, 1000, kwargs)
    assert train_estimate(TrainConfig(env_id="Synergy-small-scarce-v0", timesteps=2 * base.timesteps), 1000,
                          kwargs).seconds > plain.seconds
    assert train_estimate(base, 2000, kwargs).memory_bytes > plain.memory_bytes  # larger observations, larger rollout
    frequent = TrainConfig(env_id="Synergy-small-scarce-v0", eval_freq=base.eval_freq // 10)
    assert train_estimate(frequent, 1000, kwargs).seconds > plain.seconds
    assert plain.seconds < TIME_LIMIT_S  # the defaults train without --allow-large


def test_the_warm_start_counts_too(tmp_path, capsys, monkeypatch):
    # A hundred trillion imitated steps with 100 of PPO ran (and grew) until stopped: the guard ignored the warm start.
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, out, err = run_cli(["train", "--env", "Synergy-small-v0", "--bc-steps", str(10**14), "--timesteps", "100",
                              "--no-progress"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "100 steps of maskable_ppo with 4 environments after imitating 100,000,000,000,000 steps" in err, err
    assert snapshot(tmp_path) == before
    kwargs = effective_env_kwargs("Synergy-small-scarce-v0", {})
    imitating = TrainConfig(env_id="Synergy-small-scarce-v0", bc_steps=10**6, dagger_rounds=2, dagger_steps=10**6)
    plain = train_estimate(imitating, 1000, kwargs, warm_start=False)
    warm = train_estimate(imitating, 1000, kwargs)
    assert warm.memory_bytes - plain.memory_bytes > 2 * 3 * 10**6 * 1000 * 4 * 0.9  # 3e6 kept observations
    assert warm.seconds > plain.seconds


def test_torch_threads_has_a_limit(tmp_path, capsys):
    # A billion threads: OpenMP failed allocating after the run folder was made.
    code, out, err = run_cli(["train", "--torch-threads", str(10**9), "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "torch_threads must be at most 1,024, got 1,000,000,000" in err, err
    assert not (tmp_path / "r").exists()
