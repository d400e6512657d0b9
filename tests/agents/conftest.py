"""Fixtures of the agent tests."""

from __future__ import annotations

import pytest
import torch


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
