"""Issue 24: a value that starts with '-' gets the value's own error, not argparse's "expected one argument"."""

from __future__ import annotations

import pytest

from synergy_gym.cli import build_parser
from synergy_gym.cli.command import join_dash_values
from tests.support.cli_runs import run_cli, snapshot

SWEEP = ["sweep", "--policies", "fifo+fair", "--load", "9", "--seed", "0", "--no-ray"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "--window", "-1:10"], "window -1:10 must satisfy 0 ≤ A < B"),
        (["compare", "--split", "-10/100/10"], "--split '-10/100/10': each percentage must be a number ≥ 0"),
        (["compare", "--seed", "-3..4"], "--seed '-3..4': seeds must be non-negative"),
        (["compare", "--load", "-5,9"], "--load '-5,9': values must be positive numbers"),
        (["compare", "--policies", "-fifo+fair"], "unknown policy '-fifo+fair'"),
        (["compare", "--cluster", "-big.toml"], "--cluster '-big.toml' is neither a preset"),
        (["compare", "--win", "-1:10"], "window -1:10 must satisfy"),  # an abbreviated option too
        (["compare", "--profile-noise", "-1e-3"], "profile noise must be in [0, 1), got -0.001"),
        ([*SWEEP[:4], "-1,5", *SWEEP[5:]], "--load '-1,5': values must be positive numbers"),
        ([*SWEEP[:4], "5,1e-9", *SWEEP[5:]],
         "--load '5,1e-9': 1e-9 is below the minimum of 1e-06 jobs an hour"),
        ([*SWEEP[:6], "-2..3", *SWEEP[7:]], "--seed '-2..3': seeds must be non-negative"),
        (["evaluate", "--seeds", "-1..3"], "--seeds '-1..3': seeds must be non-negative"),
        (["evaluate", "--device", "-x"], "unknown device '-x'"),
        (["trace-stats", "--format", "-x", "trace.csv"], "argument --format: invalid choice: '-x'"),
    ],
)
def test_a_value_starting_with_a_dash_gets_its_own_error(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    try:
        code, out, err = run_cli([*argv, "--out", "o"], capsys)
    except SystemExit as exc:  # a usage error: argparse exits
        code, (out, err) = exc.code, capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert message in err and "expected one argument" not in err and "Traceback" not in err, err
    assert snapshot(tmp_path) == {}


def test_options_and_values_are_told_apart():
    parser = build_parser()
    join = lambda *argv: join_dash_values(parser, argv)  # noqa: E731
    assert join("compare", "--window", "-1:10", "--quiet") == ["compare", "--window=-1:10", "--quiet"]
    assert join("compare", "--window", "--quiet") == ["compare", "--window", "--quiet"]  # a known option stays one
    assert join("compare", "--window", "--qu") == ["compare", "--window", "--qu"]  # so does its abbreviation
    assert join("compare", "--quiet", "-x") == ["compare", "--quiet", "-x"]  # a flag takes no value
    assert join("compare", "--window=-1:10") == ["compare", "--window=-1:10"]
    assert join("compare", "--", "--window", "-1") == ["compare", "--", "--window", "-1"]
    assert join("--window", "-1:10") == ["--window", "-1:10"]  # not an option of the top-level parser
    assert join("compare", "--out", "sweep", "--seed", "-1") == ["compare", "--out", "sweep", "--seed=-1"]
    assert join("sweep", "--load", "-1") == ["sweep", "--load=-1"]
