"""Shared fixtures: the model zoo, small workloads, and the reference material in ../shared."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from synergy_gym import ModelZoo, Workload
from tests.support import SHARED


def pytest_addoption(parser):
    parser.addoption(
        "--long", action="store_true", default=False,
        help="run the long versions: the full reliability suite (10^6 fuzzed steps in each env mode, 50 long "
        "episodes) instead of its short version, and the Synergy-OPT goldens on the uncompressed 2,000-job "
        "replays (about 2.5 min) besides the compressed ones",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "reliability: long-running robustness checks (short unless --long)")
    config.addinivalue_line(
        "markers", "slow: takes more than a few seconds; the quick subset is `python -m pytest -m \"not slow\"`"
    )


@pytest.fixture(scope="session")
def long_run(request) -> bool:
    """True with ``pytest --long``: the reliability suite runs at full size."""
    return bool(request.config.getoption("--long"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the clone; tests that need it skip when it is absent."""
    if not (SHARED / "synergy").is_dir():
        pytest.skip(f"reference material not found at {SHARED} (clone the project beside its shared/ folder)")
    return SHARED


@pytest.fixture(scope="session")
def zoo() -> ModelZoo:
    return ModelZoo.default()


@pytest.fixture
def make_workload(zoo):
    """Build a workload from lists: models by name, GPUs, arrivals (s) and iterations."""

    def build(models, arrivals, iters, gpus=None, measured=None, run_until="all", **kwargs) -> Workload:
        n = len(models)
        return Workload.build(
            zoo,
            job_id=np.arange(n),
            model=[zoo.index(m) for m in models],
            gpus=gpus if gpus is not None else [1] * n,
            arrival_s=arrivals,
            total_iters=iters,
            measured=measured,
            run_until=run_until,
            **kwargs,
        )

    return build
