"""Issue 24: ``compare``'s and ``sweep``'s results appear all together or not at all (Ctrl-C, SIGTERM while writing)."""

from __future__ import annotations

import os
import signal

import pytest

import synergy_gym.baselines.compare as compare
import synergy_gym.baselines.sweep as sweep
from tests.support.cli_runs import run_cli, snapshot

COMPARE = ["compare", "--cluster", "small", "--jobs", "20", "--policies", "fifo+fair,fifo+tune", "--quiet"]
SWEEP = ["sweep", "--policies", "fifo+fair", "--load", "40", "--seed", "0..2", "--jobs", "12", "--cluster", "small",
         "--no-ray", "--quiet"]


def _stop_while_writing(monkeypatch, module, how: str) -> None:
    """The CDF figure (written after the tables) is interrupted: Ctrl-C, or SIGTERM sent to this process."""
    def figure(*args, **kwargs):
        if how == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)  # sigterm_as_interrupt turns it into Ctrl-C here
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "jct_cdf_png", figure)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
@pytest.mark.parametrize("out", [None, "new", "existing"])
def test_compare_interrupted_while_writing_leaves_nothing(tmp_path, monkeypatch, capsys, how, out):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    if out == "existing":
        (tmp_path / "existing").mkdir()
        (tmp_path / "existing" / "mine.txt").write_text("kept")
    before = snapshot(tmp_path)
    _stop_while_writing(monkeypatch, compare, how)
    argv = [*_out_args(out), "--json", "elsewhere/r.json", "--plots"]
    code, stdout, err = run_cli([*COMPARE, *argv], capsys)
    assert code == 130 and err == "synergy-gym compare: interrupted; nothing written\n", err
    assert "mean JCT h" in stdout  # the table was printed before the files were written
    assert snapshot(tmp_path) == before  # no runs/ folder, no results.csv, no staging folder, no JSON


def _out_args(out: str | None) -> list[str]:
    return [] if out is None else ["--out", out]


@pytest.mark.parametrize("plots", [True, False])
def test_compare_writes_everything_when_not_interrupted(tmp_path, capsys, plots):
    out = tmp_path / "c"
    flag = ["--plots"] if plots else []
    code, stdout, err = run_cli([*COMPARE, "--out", str(out), "--json", str(tmp_path / "r.json"), *flag], capsys)
    assert code == 0, err
    figures = ["avg_jct.png", "jct_cdf.png"] if plots else []
    assert sorted(p.name for p in out.iterdir()) == [*figures, "jobs.csv", "results.csv", "workloads"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "r.json"]
    written = "avg_jct.png, jct_cdf.png to" if plots else f"to {out} (--plots also draws avg_jct.png and jct_cdf.png)"
    assert stdout.splitlines()[-1].startswith("wrote results.csv, jobs.csv") and written in stdout


def test_compare_without_plots_removes_an_earlier_run_s_figures_from_its_folder(tmp_path, capsys):
    out = tmp_path / "c"
    assert run_cli([*COMPARE, "--out", str(out), "--plots"], capsys)[0] == 0
    (out / "mine.txt").write_text("kept")
    code, stdout, err = run_cli([*COMPARE, "--out", str(out)], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["jobs.csv", "mine.txt", "results.csv", "workloads"]
    assert stdout.rstrip().endswith("; removed the earlier run's avg_jct.png, jct_cdf.png")


def test_compare_removes_an_earlier_run_s_workloads_it_does_not_write_again(tmp_path, capsys):
    # Left beside the new results.csv, they were not "the jobs each synthetic case ran".
    out = tmp_path / "c"
    assert run_cli([*COMPARE, "--out", str(out), "--seed", "1,2"], capsys)[0] == 0
    assert sorted(p.name for p in (out / "workloads").iterdir()) == ["load9_seed1.csv", "load9_seed2.csv"]
    code, stdout, err = run_cli([*COMPARE, "--out", str(out), "--seed", "2"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (out / "workloads").iterdir()) == ["load9_seed2.csv"]
    assert stdout.rstrip().endswith("; removed the earlier run's workloads/load9_seed1.csv")
    # A replay writes no workloads; the file it read stays.
    replay = [a for a in COMPARE if a not in ("--jobs", "20")]
    code, stdout, err = run_cli([*replay, "--out", str(out), "--workload", str(out / "workloads" / "load9_seed2.csv")],
                                capsys)
    assert code == 0, err
    assert sorted(p.name for p in (out / "workloads").iterdir()) == ["load9_seed2.csv"]


def test_compare_interrupted_keeps_an_earlier_run_s_figures(tmp_path, monkeypatch, capsys):
    out = tmp_path / "c"
    assert run_cli([*COMPARE, "--out", str(out), "--plots"], capsys)[0] == 0
    before = snapshot(tmp_path)
    monkeypatch.setattr(compare, "workload_table", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt))
    code, _, err = run_cli([*COMPARE, "--out", str(out)], capsys)
    assert code == 130 and err == "synergy-gym compare: interrupted; nothing written\n", err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_sweep_interrupted_while_writing_keeps_its_cells_only_and_resumes(tmp_path, monkeypatch, capsys, how):
    out, extra = tmp_path / "s", tmp_path / "r.json"
    _stop_while_writing(monkeypatch, sweep, how)
    code, _, err = run_cli([*SWEEP, "--out", str(out), "--json", str(extra)], capsys)
    assert code == 130
    assert err == f"synergy-gym sweep: interrupted; 3 of 3 cells kept in {out / 'cells'}; re-run the same command to resume\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"] and [p.name for p in out.iterdir()] == ["cells"]
    monkeypatch.undo()
    code, _, err = run_cli([*SWEEP, "--out", str(out), "--json", str(extra)], capsys)
    assert code == 0, err
    names = {p.name for p in out.iterdir()}
    assert {"cells", "results.csv", "results.json", "avg_jct_vs_load.png", "jct_cdf.png"} <= names and extra.is_file()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".partial")]
