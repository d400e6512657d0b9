"""The scenario search's command line: every bad value is one line before any run (synergy_gym.baselines.scenario_search)."""

from __future__ import annotations

import pytest

from synergy_gym.baselines import scenario_search
from synergy_gym.baselines.scenario_search import ScarceConfig, compare_table, main, run_grid, summarize
from synergy_gym.errors import ConfigError

#: How the module's one-line errors start (as its argument parser's own).
ERROR = "python -m synergy_gym.baselines.scenario_search: error: "


@pytest.fixture()
def no_runs(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a simulation ran")

    monkeypatch.setattr(scenario_search, "run_grid", refuse)


@pytest.mark.parametrize("argv, message", [
    (["--quick", "--configs", "24:20/70/10:1", "--seeds", "0"],
     "--quick runs its own configs and seeds; it does not take --seeds, --configs"),
    (["--quick", "--seeds", "0"], "it does not take --seeds"),
    (["--policies", "fifo+tune,fifo+fair"],
     "--policies 'fifo+tune,fifo+fair': the comparison table needs fifo+tune and srtf+tune or tetris+greedy"),
    (["--policies", "fifo+bogus"], "unknown policy 'fifo+bogus'"),
    (["--seeds", "abc"], "--seeds 'abc': expected integers"),
    (["--configs", "0:20/70/10:2"], "--configs '0:20/70/10:2': cpus_per_server must be a positive number, got 0.0"),
    (["--configs", "12:0/0/0:2"], "--configs '12:0/0/0:2': class split"),
    (["--configs", "12:20/70/10:-1"], "--configs '12:20/70/10:-1': jobs_per_hour must be a positive number, got -1.0"),
    (["--configs", "12:20/70:1"], "--configs '12:20/70:1': expected CPUS:V/L/S:JOBS_PER_HOUR"),
    (["--top", "3"], "only --select-from uses --top"),
])
def test_bad_arguments_are_one_line_before_any_run(argv, message, tmp_path, capsys, no_runs):
    assert main(["--out", str(tmp_path / "out.csv"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(ERROR) and message in err and err.count("\n") == 1
    assert not (tmp_path / "out.csv").exists()


def test_a_folder_as_out_is_refused_before_any_run(tmp_path, capsys, no_runs):
    assert main(["--out", str(tmp_path), "--quick"]) == 2
    assert capsys.readouterr().err == ERROR + f"--out {tmp_path}: is a folder, not a file\n"


def test_top_must_be_positive(tmp_path, capsys):
    coarse = tmp_path / "coarse.csv"
    argv = ["--configs", "24:20/70/10:1", "--seeds", "0", "--policies", "fifo+tune,srtf+tune"]
    assert main(["--out", str(coarse), *argv]) == 0
    capsys.readouterr()
    for top in ("-3", "0"):
        assert main(["--out", str(tmp_path / "fine.csv"), "--select-from", str(coarse), "--top", top]) == 2
        assert capsys.readouterr().err == ERROR + f"--top must be a positive integer, got {top}\n"


def test_the_table_without_challengers_has_no_best():
    rows = run_grid([ScarceConfig(24.0, (20, 70, 10), 1.0, num_jobs=10)], seeds=[0], policies=("fifo+tune",))
    table = compare_table(summarize(rows))
    assert table["best"].isna().all() and table["cut"].isna().all()


def test_parse_raises_a_config_error():
    with pytest.raises(ConfigError, match="expected CPUS:V/L/S:JOBS_PER_HOUR"):
        ScarceConfig.parse("12")
