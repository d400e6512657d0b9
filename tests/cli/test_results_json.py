"""``compare``, ``sweep`` and ``evaluate`` write one results shape: ``{"results": [...], "meta": {...}}``."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest

from synergy_gym.agents.eval_summary import SUMMARY_FIELDS
from synergy_gym.baselines.compare import JSON_FIELDS
from synergy_gym.cli import main
from synergy_gym.cli.command import package_version
from synergy_gym.cli.results_json import META_KEYS, json_safe, results_text


def _no_constants(name: str) -> None:
    raise AssertionError(f"{name} in a results file: not valid JSON")


def _utc(text: str) -> datetime:
    stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0, text
    return stamp


def test_compare_sweep_and_evaluate_write_the_same_shape_and_meta(tmp_path):
    small = ["--jobs", "30", "--load", "30", "--cluster", "small", "--quiet"]
    runs = {
        # no fair run to compare with: speedup_vs_fair is NaN, written as null
        "compare": ["compare", *small, "--policies", "fifo+greedy,srtf+tune", "--seed", "1,2",
                    "--out", str(tmp_path / "c"), "--json", str(tmp_path / "c.json")],
        "sweep": ["sweep", *small, "--policies", "fifo+fair,fifo+tune", "--seed", "1,2", "--no-ray",
                  "--out", str(tmp_path / "s"), "--json", str(tmp_path / "s.json")],
        "evaluate": ["evaluate", "--env", "Synergy-small-v0", "--env-kwargs", "num_jobs=8", "--seeds", "1,2",
                     "--baselines", "env:fifo+tune,sim:fifo+fair", "--quiet",
                     "--out", str(tmp_path / "e"), "--json", str(tmp_path / "e.json")],
    }
    documents = {}
    for command, argv in runs.items():
        before = datetime.now(timezone.utc).replace(microsecond=0)
        assert main(argv) == 0, command
        after = datetime.now(timezone.utc)
        data = json.loads((tmp_path / f"{command[0]}.json").read_text(), parse_constant=_no_constants)
        assert list(data) == ["results", "meta"] and isinstance(data["results"], list) and data["results"], command
        meta = data["meta"]
        assert list(meta)[:len(META_KEYS)] == list(META_KEYS), command
        assert meta["version"] == package_version()
        assert meta["command"] == ["synergy-gym", *argv]
        assert meta["seeds"] == [1, 2]
        assert before <= _utc(meta["started"]) <= _utc(meta["finished"]) <= after
        documents[command] = data
    for command in ("compare", "sweep"):  # the simulator: no environment
        assert documents[command]["meta"]["env_id"] is None and documents[command]["meta"]["env_kwargs"] is None
        assert documents[command]["meta"]["policies"] and documents[command]["meta"]["cluster"]
    assert documents["evaluate"]["meta"]["env_id"] == "Synergy-small-v0"
    assert documents["evaluate"]["meta"]["env_kwargs"] == {"num_jobs": 8}
    # Each command's rows keep their fields.
    compare_rows = documents["compare"]["results"]
    assert len(compare_rows) == 4 and all(list(r) == list(JSON_FIELDS) for r in compare_rows)
    assert all(r["speedup_vs_fair"] is None for r in compare_rows)
    sweep_rows = documents["sweep"]["results"]
    columns = list(pd.read_csv(tmp_path / "s" / "results.csv", nrows=0).columns)
    assert len(sweep_rows) == 4 and all(list(r) == columns for r in sweep_rows)
    assert {(r["policy"], r["seed"]) for r in sweep_rows} == {(p, s) for p in ("fifo+fair", "fifo+tune") for s in (1, 2)}
    eval_rows = documents["evaluate"]["results"]
    assert {(r["policy"], r["source"]) for r in eval_rows} == {("fifo+tune", "env"), ("fifo+fair", "sim")}
    assert all(set(SUMMARY_FIELDS) <= set(r) for r in eval_rows)
    # The output folders hold the same file as --json.
    for command, folder in (("sweep", "s"), ("evaluate", "e")):
        assert (tmp_path / folder / "results.json").read_text() == (tmp_path / f"{command[0]}.json").read_text()


def test_nan_and_infinities_are_null_and_numpy_values_plain():
    value = {"a": float("nan"), "b": np.float64("inf"), "c": np.int64(3), "d": pd.NA, 5: np.array([1.0, np.nan]),
             "e": (np.bool_(True), -float("inf"))}
    assert json_safe(value) == {"a": None, "b": None, "c": 3, "d": None, "5": [1.0, None], "e": [True, None]}
    text = results_text([{"x": float("nan")}], {"version": "1", "seeds": [np.int64(1)]})
    assert json.loads(text, parse_constant=_no_constants) == {"results": [{"x": None}], "meta": {"version": "1", "seeds": [1]}}


@pytest.mark.parametrize("key", ["version", "command"])
def test_meta_keys_cannot_be_overridden(key):
    import argparse

    from synergy_gym.cli.results_json import build_meta

    with pytest.raises(ValueError, match=key):
        build_meta(argparse.Namespace(command="compare"), [1], "2025-01-01T00:00:00Z", **{key: "x"})
