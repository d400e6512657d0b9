"""RL Baselines3 Zoo (rl-zoo3), SB3's own training framework, trains PPO on the environment without masking.

Skipped when rl-zoo3 is not installed (``pip install -e ".[zoo]"``); the README gives the command.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import REPO

pytest.importorskip("rl_zoo3", reason="rl-zoo3 is not installed (pip install -e '.[zoo]')")

CONFIG = REPO / "agents" / "configs" / "rl_zoo_ppo.yml"


@pytest.mark.slow
def test_rl_zoo_ppo_trains_on_the_small_env(tmp_path):
    # Unmasked PPO samples actions outside the mask: the env must accept them all (invalid_action="fallback").
    cmd = [
        sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "Synergy-small-v0",
        "--gym-packages", "synergy_gym", "--conf-file", str(CONFIG), "-n", "3072",
        "--log-folder", str(tmp_path), "--seed", "0", "--eval-freq", "-1",
        "--env-kwargs", "num_jobs:40", "-params", "n_envs:2", "n_steps:512", "batch_size:128",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    models = list(tmp_path.glob("ppo/Synergy-small-v0_*/Synergy-small-v0.zip"))
    assert len(models) == 1, sorted(str(p) for p in tmp_path.rglob("*"))[:20]
    assert "total_timesteps" in done.stdout and "Traceback" not in done.stderr
