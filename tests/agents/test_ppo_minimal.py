"""The single-file masked PPO (agents/ppo_masked_minimal.py) and the training-throughput benchmark."""

import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import synergy_gym
from synergy_gym.agents import ppo_masked_minimal
from synergy_gym.agents.ppo_masked_minimal import MASKED_LOGIT, Agent, gae
from synergy_gym.agents.ppo_masked_minimal import main as minimal
from tests.agents.tiny_runs import usage_error
from tests.support import REPO

ENV_IDS = tuple(synergy_gym.SCENARIOS)
BENCH = REPO / "benchmarks" / "bench_train.py"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_short_training_has_finite_losses_and_only_valid_actions(env_id, capsys):
    threads = torch.get_num_threads()
    result = minimal(["--env-id", env_id, "--total-timesteps", "256", "--num-envs", "2", "--num-steps", "64",
                      "--num-jobs", "20", "--device", "cpu", "--update-epochs", "2"])
    assert result["updates"] == 2 and result["steps"] == 256 and result["episodes"] >= 1
    for key in ("policy_loss", "value_loss", "entropy"):
        assert np.isfinite(result[key]), key
    assert result["entropy"] >= 0 and result["value_loss"] >= 0
    # The env counts actions outside the mask (it falls back to a valid one): none were taken.
    assert result["invalid_actions"] == 0
    printed = capsys.readouterr().out
    start = f"ppo_masked_minimal: {env_id}, 2 envs × 64 steps × 2 updates = 256 steps, cpu, 1 torch thread\n"
    assert start in printed
    assert re.search(r"\nupdate 2/2  steps 256  mean JCT of recent episodes \d+\.\d\d h  \d+ steps/s\n", printed)
    assert torch.get_num_threads() == threads  # set to 1 for the run, then restored


def test_torch_threads_option(capsys):
    threads = torch.get_num_threads()
    minimal(["--total-timesteps", "4", "--num-envs", "1", "--num-steps", "4", "--num-jobs", "5", "--update-epochs", "1",
             "--num-minibatches", "1", "--device", "cpu", "--torch-threads", "2"])  # tiny: 2 threads are slow here
    assert ", cpu, 2 torch threads\n" in capsys.readouterr().out
    assert torch.get_num_threads() == threads


def test_the_callers_random_state_is_left_as_it_was(capsys):
    # Training reseeded torch's and numpy's global generators and left them so: the caller's next draws changed.
    import numpy as np

    np.random.seed(7)
    torch.manual_seed(7)
    expected = (np.random.random(), torch.rand(1).item())
    np.random.seed(7)
    torch.manual_seed(7)
    minimal(["--total-timesteps", "4", "--num-envs", "1", "--num-steps", "4", "--num-jobs", "5", "--update-epochs", "1",
             "--num-minibatches", "1", "--device", "cpu", "--seed", "3"])
    assert (np.random.random(), torch.rand(1).item()) == expected


def test_cuda_devices_are_named_as_elsewhere():
    assert ppo_masked_minimal.parse_args(["--device", "cuda:1"]).device == "cuda:1"


def test_a_cuda_device_that_is_not_there_is_one_line(monkeypatch):
    # cuda:N was not checked: "Torch not compiled with CUDA enabled" from deep inside PyTorch.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert ppo_masked_minimal.resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(SystemExit, match=r"--device cuda:1 but PyTorch sees 1 CUDA device$"):
        ppo_masked_minimal.resolve_device("cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match=r"--device cuda:0 but PyTorch sees no CUDA devices$"):
        ppo_masked_minimal.resolve_device("cuda:0")


def test_no_finished_episode_yet_is_said_not_printed_as_nan(capsys):
    # 20 jobs take at least 20 decisions: 4 steps finish no episode.
    result = minimal(["--total-timesteps", "4", "--num-envs", "1", "--num-steps", "4", "--num-jobs", "20",
                      "--update-epochs", "1", "--num-minibatches", "1", "--device", "cpu"])
    assert result["episodes"] == 0
    printed = capsys.readouterr().out
    assert "update 1/1  steps 4  mean JCT of recent episodes none finished yet  " in printed and "nan" not in printed


@pytest.mark.parametrize(("argv", "message"), [
    (["--env-id", "Synergy-smal-v0"], "--env-id: unknown env 'Synergy-smal-v0'; valid: " + ", ".join(ENV_IDS)),
    (["--num-envs", "0"], "--num-envs must be a positive integer, got 0"),
    (["--num-steps", "-1"], "--num-steps must be a positive integer, got -1"),
    (["--num-minibatches", "0"], "--num-minibatches must be a positive integer, got 0"),
    (["--total-timesteps", "-5"], "--total-timesteps must be a positive integer, got -5"),
    (["--num-jobs", "0"], "--num-jobs must be a positive integer, got 0"),
    (["--torch-threads", "0"], "--torch-threads must be a positive integer, got 0"),
    (["--num-envs", "2", "--num-steps", "32", "--num-minibatches", "1000"],
     "--num-minibatches 1000 must divide the rollout of --num-envs × --num-steps = 2 × 32 = 64 steps into equal "
     "minibatches"),
    (["--num-envs", "2", "--num-steps", "32", "--num-minibatches", "3"], "--num-minibatches 3 must divide the rollout"),
    (["--num-jobs", "10000000"], "--num-jobs 10000000 on Synergy-small-v0: env kwarg num_jobs 10000000 exceeds"),
    (["--device", "gpu"], "--device must be auto, cpu, cuda or cuda:N, got 'gpu'"),
    # the float options went unchecked: trained silently (a negative reward scale maximises JCT) or a deep traceback
    (["--reward-scale", "-1"], "--reward-scale must be a finite positive number, got -1.0"),
    (["--gamma", "2"], "--gamma must be in (0, 1], got 2.0"),
    (["--gamma", "nan"], "--gamma must be in (0, 1], got nan"),
    (["--gae-lambda", "-3"], "--gae-lambda must be in [0, 1], got -3.0"),
    (["--learning-rate", "-1"], "--learning-rate must be a finite positive number, got -1.0"),
    (["--ent-coef", "inf"], "--ent-coef must be a finite number ≥ 0, got inf"),
])
def test_bad_options_stop_in_one_line_before_training(argv, message, monkeypatch, capsys):
    def no_training(*_):
        raise AssertionError("training started")

    monkeypatch.setattr(ppo_masked_minimal, "train", no_training)
    assert usage_error(lambda: minimal(argv), capsys).startswith(message)


def test_sampling_never_picks_a_masked_action():
    torch.manual_seed(0)
    agent = Agent(n_features=7, n_actions=11)
    rng = np.random.default_rng(0)
    mask = torch.from_numpy(rng.random((2000, 11)) < 0.3)
    mask[:, -1] = True  # stop is always valid in the env
    mask[0] = False
    mask[0, 3] = True  # a single valid action
    x = torch.randn(2000, 7) * 5  # spread-out logits
    with torch.no_grad():
        action, log_prob, entropy, value = agent.act(x, mask)
    assert mask[torch.arange(2000), action].all()
    assert action[0] == 3 and log_prob[0] == pytest.approx(0.0, abs=1e-6)
    assert entropy[0] == pytest.approx(0.0, abs=1e-6)
    assert torch.isfinite(log_prob).all() and torch.isfinite(entropy).all() and value.shape == (2000,)
    # A masked action's log-probability is about MASKED_LOGIT; evaluated actions keep their gradient.
    _, masked_logp, _, _ = agent.act(x[:1], mask[:1], torch.tensor([0]))
    assert masked_logp.item() < MASKED_LOGIT / 2
    _, logp, ent, _ = agent.act(x, mask, action)
    (logp.mean() + ent.mean()).backward()
    assert all(torch.isfinite(p.grad).all() for p in agent.actor.parameters())
    # The probabilities of the valid actions sum to 1: every row's log-probabilities are normalised.
    all_actions = torch.arange(11).repeat(2000, 1)
    with torch.no_grad():
        per_action = torch.stack([agent.act(x, mask, all_actions[:, a])[1] for a in range(11)], dim=1)
    np.testing.assert_allclose(per_action.exp().sum(1).numpy(), 1.0, rtol=1e-5)
    assert (per_action.exp()[~mask] == 0).all()


def test_gae_matches_discounted_returns_and_stops_at_episode_ends():
    rng = np.random.default_rng(1)
    rewards, values = rng.normal(size=(6, 2)).astype(np.float32), rng.normal(size=(6, 2)).astype(np.float32)
    next_value = rng.normal(size=2).astype(np.float32)
    dones = np.zeros((6, 2), dtype=np.float32)
    dones[3, 1] = 1.0  # env 1: the observation of step 3 began a new episode (step 2 ended one)
    next_done = np.array([0.0, 1.0], dtype=np.float32)  # env 1's last step ended an episode too
    gamma = 0.9
    # lambda = 1: advantage + value = the discounted return, bootstrapped only within an episode.
    adv = gae(rewards, values, dones, next_value, next_done, gamma, 1.0)
    expected = np.zeros_like(rewards)
    for env in range(2):
        ret = next_value[env] * (1 - next_done[env])
        for t in reversed(range(6)):
            ends_here = next_done[env] if t == 5 else dones[t + 1, env]
            ret = rewards[t, env] + gamma * ret * (1 - ends_here)
            expected[t, env] = ret
    np.testing.assert_allclose(adv + values, expected, rtol=1e-5, atol=1e-5)
    # lambda = 0: the one-step TD error.
    td = gae(rewards, values, dones, next_value, next_done, gamma, 0.0)
    nxt = np.vstack([values[1:], next_value[None]]) * (1 - np.vstack([dones[1:], next_done[None]]))
    np.testing.assert_allclose(td, rewards + gamma * nxt - values, rtol=1e-5, atol=1e-5)


def test_benchmark_help():
    done = subprocess.run([sys.executable, str(BENCH), "--help"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0
    for option in ("--timesteps", "--skip-train", "--skip-minimal", "--no-pin"):
        assert option in done.stdout


@pytest.mark.slow
def test_benchmark_short_run_prints_steps_per_second():
    done = subprocess.run([sys.executable, str(BENCH), "--timesteps", "600", "--skip-train"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.startswith("machine: ") and "PyTorch " in out
    (row,) = [line for line in out.splitlines() if line.startswith("ppo_masked_minimal ")]
    fields = row.split()
    # One rollout of 4 envs × 256 steps (600 rounds down to at least one), then steps/s and the time to first step.
    assert fields[1] == "1,024" and float(fields[3].replace(",", "")) > 0 and float(fields[4]) > 0
    assert "synergy-gym train" not in out.split("program")[-1]

