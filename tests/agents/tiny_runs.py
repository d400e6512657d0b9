"""What the agent input tests share: a tiny training run (a few seconds), damaged copies of its files, one-line checks.

The run: MaskablePPO on ``Synergy-small-v0`` with 10 jobs, one environment, rollouts of 8 steps, 64 steps in all
and a periodic checkpoint every 16 steps, trained through ``synergy-gym train`` itself.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

from synergy_gym.cli import main

ENV = "Synergy-small-v0"
#: A tiny PPO: one update per rollout of 8 steps.
TINY_TOML = "n_steps = 8\nbatch_size = 8\nn_epochs = 1\nnet_arch = [16]\nglobal_dim = 16\nslot_dim = 8\n"
#: ``synergy-gym train`` options of a tiny run (one evaluation episode, only at the end).
QUICK = ["--env", ENV, "--env-kwargs", "num_jobs=10", "--n-envs", "1", "--eval-episodes", "1", "--eval-freq", "1000",
         "--no-progress", "--device", "cpu"]
#: ``synergy-gym evaluate`` of a model alone on one held-out seed.
EVALUATE = ["evaluate", "--baselines", "none", "--seeds", "1000000", "--device", "cpu", "--quiet"]


def tiny_config(folder: Path, extra: str = "") -> Path:
    """``folder/tiny.toml``: :data:`TINY_TOML` and ``extra`` settings."""
    path = Path(folder) / "tiny.toml"
    path.write_text(TINY_TOML + extra)
    return path


def train_tiny(out: Path, timesteps: int = 64, checkpoint_freq: int = 16, *extra: str) -> None:
    """Train the tiny run into ``out`` (its config file beside it)."""
    config = tiny_config(Path(out).parent)
    code = main(["train", *QUICK, "--config", str(config), "--timesteps", str(timesteps),
                 "--checkpoint-freq", str(checkpoint_freq), "--out", str(out), *extra])
    assert code == 0


def flip_a_byte(source: Path, target: Path, member: str = "policy.pth") -> Path:
    """A copy of the model zip ``source`` with one byte of ``member``'s data inverted (its CRC no longer matches)."""
    data = bytearray(Path(source).read_bytes())
    with zipfile.ZipFile(source) as archive:
        info = archive.getinfo(member)
    offset = info.header_offset
    name_length, extra_length = struct.unpack("<HH", data[offset + 26:offset + 30])  # the local header's own lengths
    data[offset + 30 + name_length + extra_length + info.compress_size // 2] ^= 0xFF
    Path(target).write_bytes(bytes(data))
    return Path(target)


def one_line_error(code: int, out: str, err: str, *words: str, command: str = "train") -> str:
    """Check a refusal: exit status 2, nothing on stdout, one line on stderr with every one of ``words``; the line."""
    assert code == 2, (code, out, err)
    assert out == "", out
    assert err.count("\n") == 1 and err.startswith(f"synergy-gym {command}: error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)
    return err.strip()


def usage_error(call, capsys) -> str:
    """Run ``call()``, which must stop as argparse does on a bad option (exit 2, one ``error:`` line, no
    traceback); the message after ``error: ``."""
    import pytest

    with pytest.raises(SystemExit) as stop:
        call()
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("error:") == 1
    return err.splitlines()[-1].split(" error: ", 1)[1]
