"""Fixtures of the agent tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.agents.tiny_runs import train_tiny


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny networks run fastest on one thread (and do not fight over a shared machine's cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def own_baseline_cache(tmp_path_factory, monkeypatch):
    """Each test scores the env heuristics afresh, in a cache folder of its own (never the user's)."""
    from synergy_gym.agents import baseline_cache

    folder = tmp_path_factory.mktemp("baseline_cache")
    monkeypatch.setattr(baseline_cache, "cache_folder", lambda: folder)
    return folder


@pytest.fixture(scope="module")
def run64(tmp_path_factory) -> Path:
    """A tiny run of 64 steps with a checkpoint every 16 (the latest kept: step 48) and last_model.zip (step 64)."""
    out = tmp_path_factory.mktemp("run64") / "run"
    train_tiny(out, 64, 16)
    return out
