"""Default output folders: a name already taken (the same command again within one second) gets ``-2``, ``-3``, …"""

from __future__ import annotations

from tests.support.cli_runs import run_cli


def test_commands_run_again_within_a_second_get_folders_of_their_own(tmp_path, capsys, monkeypatch):
    # Default folders were named to the second: a loop of compares wrote into one folder (the last run's results
    # only, the earlier runs' workloads removed), and two trains into one run folder.
    import datetime as real

    from synergy_gym.cli import files

    class Frozen(real.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 12, 6, 9, 0, 0)

    monkeypatch.setattr(files, "datetime", Frozen)
    monkeypatch.chdir(tmp_path)
    for load in ("2", "3"):
        code, _, err = run_cli(["compare", "--cluster", "small", "--jobs", "10", "--policies", "fifo+tune", "--quiet",
                                "--load", load], capsys)
        assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["compare-20261206-090000",
                                                                       "compare-20261206-090000-2"]
    assert files.claim_folder(tmp_path / "runs" / "x") == tmp_path / "runs" / "x"
    assert files.claim_folder(tmp_path / "runs" / "x") == tmp_path / "runs" / "x-2"  # made meanwhile: the next name
