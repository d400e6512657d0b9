"""Issue 24: a Ray sweep whose worker process is killed mid-cell still finishes with every cell."""

from __future__ import annotations

import json
import os
import signal

import pandas as pd
import pytest

import synergy_gym.baselines.sweep as sweep
from synergy_gym.baselines.sweep_cells import CELL_RETRIES, run_cell
from synergy_gym.cli import main

SPEC = ["--policies", "fifo+fair,fifo+tune", "--load", "20,40", "--seed", "0..1", "--jobs", "60", "--quiet",
        "--cluster", "small"]
KILLED = "fifo+tune__load40__seed1"


def _cells(out):
    return {p.name: {k: v for k, v in json.loads(p.read_text()).items() if k != "wall_s"}
            for p in (out / "cells").glob("*.json")}


@pytest.mark.slow
def test_a_killed_ray_worker_s_cell_is_run_again_and_the_sweep_matches_one_without_ray(tmp_path, monkeypatch, capsys):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    assert CELL_RETRIES >= 1
    marker = tmp_path / "killed-once"

    def dying_cell(cell):  # pickled by value for the Ray workers (a local function)
        row = run_cell(cell)
        if cell.key == KILLED and not marker.exists():  # its first attempt: the worker dies before returning
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return row

    monkeypatch.setattr(sweep, "run_cell", dying_cell)
    assert main(["sweep", *SPEC, "--out", str(tmp_path / "ray")]) == 0
    assert marker.is_file() and int(marker.read_text()) != os.getpid()  # a Ray worker was killed, not this process
    monkeypatch.undo()
    assert main(["sweep", *SPEC, "--no-ray", "--out", str(tmp_path / "local")]) == 0
    capsys.readouterr()
    ray_cells, local_cells = _cells(tmp_path / "ray"), _cells(tmp_path / "local")
    assert len(ray_cells) == 8 and ray_cells == local_cells
    tables = [pd.read_csv(tmp_path / d / "results.csv").drop(columns=["wall_s"]) for d in ("ray", "local")]
    pd.testing.assert_frame_equal(*tables)
