"""Default output folders: a name already taken (the same command again within one second) gets ``-2``, ``-3``, …;
so does one another process takes while the command runs."""

from __future__ import annotations

from tests.support.cli_runs import run_cli


def _frozen_clock(monkeypatch):
    import datetime as real

    from synergy_gym.cli import files

    class Frozen(real.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 12, 6, 9, 0, 0)

    monkeypatch.setattr(files, "datetime", Frozen)


def test_commands_run_again_within_a_second_get_folders_of_their_own(tmp_path, capsys, monkeypatch):
    # Default folders were named to the second: a loop of compares wrote into one folder (the last run's results
    # only, the earlier runs' workloads removed), and two trains into one run folder.
    from synergy_gym.cli import files

    _frozen_clock(monkeypatch)
    monkeypatch.chdir(tmp_path)
    for load in ("2", "3"):
        code, _, err = run_cli(["compare", "--cluster", "small", "--jobs", "10", "--policies", "fifo+tune", "--quiet",
                                "--load", load], capsys)
        assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["compare-20261206-090000",
                                                                       "compare-20261206-090000-2"]
    assert files.claim_folder(tmp_path / "runs" / "x") == tmp_path / "runs" / "x"
    assert files.claim_folder(tmp_path / "runs" / "x") == tmp_path / "runs" / "x-2"  # made meanwhile: the next name


def test_a_default_folder_another_process_makes_while_the_command_runs_is_left_to_it(tmp_path, capsys, monkeypatch):
    # Two compares started in the same second in separate processes chose one name; the later one merged its files
    # into the earlier one's folder.
    from synergy_gym.baselines import compare

    _frozen_clock(monkeypatch)
    monkeypatch.chdir(tmp_path)
    theirs = tmp_path / "runs" / "compare-20261206-090000"
    real_run = compare.run_compare

    def other_process_finishes_first(*args, **kwargs):
        theirs.mkdir(parents=True)
        (theirs / "results.csv").write_text("theirs\n")
        return real_run(*args, **kwargs)

    monkeypatch.setattr(compare, "run_compare", other_process_finishes_first)
    code, out, err = run_cli(["compare", "--cluster", "small", "--jobs", "10", "--policies", "fifo+tune", "--quiet"],
                             capsys)
    assert code == 0, err
    assert (theirs / "results.csv").read_text() == "theirs\n" and sorted(p.name for p in theirs.iterdir()) == [
        "results.csv"]
    mine = tmp_path / "runs" / "compare-20261206-090000-2"
    assert "fifo+tune" in (mine / "results.csv").read_text() and f"to {mine.relative_to(tmp_path)}" in out


def test_a_sweep_claims_its_default_folder_before_its_cells_are_written(tmp_path, capsys, monkeypatch):
    # A sweep writes its cells into its folder as they finish: two sweeps started in the same second shared it.
    from synergy_gym.baselines import sweep

    _frozen_clock(monkeypatch)
    monkeypatch.chdir(tmp_path)
    theirs = tmp_path / "runs" / "sweep-20261206-090000"
    real_checked = sweep.checked_cells

    def other_sweep_claims_it_meanwhile(*args, **kwargs):
        theirs.mkdir(parents=True)
        return real_checked(*args, **kwargs)

    monkeypatch.setattr(sweep, "checked_cells", other_sweep_claims_it_meanwhile)
    code, out, err = run_cli(["sweep", "--no-ray", "--cluster", "small", "--jobs", "10", "--policies", "fifo+tune",
                              "--load", "2", "--seed", "1", "--quiet"], capsys)
    assert code == 0, err
    assert list(theirs.iterdir()) == []
    assert (tmp_path / "runs" / "sweep-20261206-090000-2" / "results.csv").is_file()


def test_an_evaluate_whose_default_folder_another_process_made_meanwhile_writes_its_own(tmp_path, capsys,
                                                                                         monkeypatch):
    from synergy_gym.agents import evaluate

    _frozen_clock(monkeypatch)
    monkeypatch.chdir(tmp_path)
    theirs = tmp_path / "runs" / "evaluate-20261206-090000"
    real_run = evaluate.run_evaluation

    def other_process_finishes_first(*args, **kwargs):
        theirs.mkdir(parents=True)
        (theirs / "results.csv").write_text("theirs\n")
        return real_run(*args, **kwargs)

    monkeypatch.setattr(evaluate, "run_evaluation", other_process_finishes_first)
    code, out, err = run_cli(["evaluate", "--baselines", "env:fifo+tune", "--sim-policies", "none", "--seeds", "1",
                              "--env-kwargs", "num_jobs=10", "--quiet"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in theirs.iterdir()) == ["results.csv"] and (theirs / "results.csv").read_text() == \
        "theirs\n"
    mine = tmp_path / "runs" / "evaluate-20261206-090000-2"
    assert (mine / "results.json").is_file() and f"to {mine.relative_to(tmp_path)}" in out


def test_a_sweep_stopped_before_its_first_cell_leaves_no_folder(tmp_path, capsys, monkeypatch):
    # Claiming the default folder up front left it behind, empty, under "nothing written".
    from synergy_gym.baselines import sweep

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_sweep", interrupted)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["sweep", "--no-ray", "--cluster", "small", "--jobs", "10", "--policies", "fifo+tune",
                            "--load", "2", "--seed", "1", "--quiet"], capsys)
    assert code == 130 and "nothing written" in err and list(tmp_path.iterdir()) == []


def test_a_named_sweep_folder_another_command_makes_meanwhile_is_refused_not_overwritten(tmp_path, capsys,
                                                                                          monkeypatch):
    from synergy_gym.baselines import sweep

    monkeypatch.chdir(tmp_path)
    real_checked = sweep.checked_cells

    def other_command_makes_it(*args, **kwargs):
        (tmp_path / "new").mkdir()
        (tmp_path / "new" / "results.csv").write_text("theirs\n")
        return real_checked(*args, **kwargs)

    monkeypatch.setattr(sweep, "checked_cells", other_command_makes_it)
    code, _, err = run_cli(["sweep", "--no-ray", "--cluster", "small", "--jobs", "10", "--policies", "fifo+tune",
                            "--load", "2", "--seed", "1", "--quiet", "--out", "new"], capsys)
    assert code == 2 and "--out new: was made by another command since this one checked it" in err
    assert (tmp_path / "new" / "results.csv").read_text() == "theirs\n"


def test_a_named_evaluate_folder_made_meanwhile_writes_neither_its_json_nor_its_decision_logs(tmp_path, capsys,
                                                                                                monkeypatch):
    # The error said the files outside the folder were not written, but the decision logs were (committed first).
    from synergy_gym.agents import evaluate

    monkeypatch.chdir(tmp_path)
    real_run = evaluate.run_evaluation

    def other_process_makes_out(*args, **kwargs):
        (tmp_path / "new").mkdir()
        return real_run(*args, **kwargs)

    monkeypatch.setattr(evaluate, "run_evaluation", other_process_makes_out)
    code, _, err = run_cli(["evaluate", "--baselines", "env:fifo+tune", "--sim-policies", "none", "--seeds", "1",
                            "--env-kwargs", "num_jobs=10", "--quiet", "--out", "new", "--decisions", "dec", "--json",
                            "r.json"], capsys)
    assert code == 2 and "this one's outputs are in new-2 (its files outside the folder were not written)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "new-2"] and list((tmp_path / "new").iterdir()) == []


def test_a_sweep_whose_local_ray_does_not_start_leaves_no_folder(tmp_path, capsys, monkeypatch):
    # The folder was claimed before the local Ray started: a failed or interrupted start left it, empty.
    import importlib.util

    from synergy_gym.baselines import sweep
    from synergy_gym.errors import SynergyGymError

    real_find_spec = importlib.util.find_spec

    def no_raylet(address):
        raise SynergyGymError("cannot start a local Ray: Failed to start the raylet")

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "ray" else real_find_spec(name, *a))
    monkeypatch.setattr(sweep, "connect_ray", no_raylet)
    monkeypatch.chdir(tmp_path)
    for out in ([], ["--out", "named"]):
        code, _, err = run_cli(["sweep", "--cluster", "small", "--jobs", "10", "--policies", "fifo+tune", "--load", "2",
                                "--seed", "1", "--quiet", *out], capsys)
        assert code == 2 and "cannot start a local Ray" in err and list(tmp_path.iterdir()) == []
