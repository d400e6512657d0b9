"""``synergy-gym benchmark``: truncated episodes are shown, and input that would be lost or misread is refused.

A policy whose episodes ended at ``max_rounds`` gets its count in the table, the leaderboard and
``results.csv``, and a note under the table says its scores are not comparable. ``--json`` may not be one of
the command's own files; a repeated ``--seeds``, a repeated env kwarg, an empty ``--out``, ``--json`` or
``--model`` and ``--device`` without ``--model`` are one-line errors that write nothing, and every message
names its flag. The runs that could start use one seed of 10-job episodes.
"""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from synergy_gym.agents.benchmark_cells import Cell
from synergy_gym.agents.benchmark_outputs import OUTPUT_FILES, csv_rows, format_leaderboard, format_table, records
from synergy_gym.agents.benchmark_runs import CellRun
from synergy_gym.agents.benchmark_scores import score_cell
from tests.agents.test_benchmark import CELL, QUICK, SCARCE, frame
from tests.agents.tiny_runs import one_line_error
from tests.support.cli_runs import run_cli, snapshot

#: One cell of one seed of 10-job episodes: quick wherever a refused command would have run.
TINY = ["--env", SCARCE, "--mode", "default", "--seeds", "1"]


def test_truncated_episodes_are_counted_in_every_table_and_the_csv_and_flagged_under_the_table():
    results = frame(CELL)
    cut = ((results["policy"] == "agent-a") & (results["seed"] < 1_000_002)) | (
        (results["policy"] == "fifo+tune") & (results["seed"] == 1_000_000))
    results.loc[cut, "terminated"] = False
    scored = [(CellRun(Cell(SCARCE, "default"), ["agent-a"], [], [], results), score_cell(results))]
    lines = format_table(scored, [1_000_000, 1_000_001, 1_000_002]).splitlines()
    row = next(line for line in lines if line.startswith(SCARCE))
    assert row.endswith("(2 truncated)")
    note, = [line for line in lines if line.startswith("truncated in")]
    assert note.startswith(f"truncated in {SCARCE} default") and "not comparable" in note
    assert "agent-a 2/3" in note and "fifo+tune 1/3" in note and "tetris" not in note
    board = {line.split()[0]: line for line in format_leaderboard(scored).splitlines()[2:]}
    assert board["agent-a"].endswith(", 2 truncated)") and board["fifo+tune"].endswith(", 1 truncated)")
    assert "truncated" not in board["tetris"]
    table = pd.read_csv(io.StringIO(csv_rows(records(scored)).to_csv(index=False)), dtype=str, keep_default_na=False)
    assert dict(zip(table["policy"], table["truncated"])) == {
        "agent-a": "2", "fifo+tune": "1", "tetris": "0", "srtf+price": "0", "random": "0", "no-wait-bound": "0"}


def test_scores_figure_marks_the_bars_of_truncated_policies():
    from synergy_gym.agents.benchmark_outputs import scores_figure

    results = frame(CELL)
    cut_results = results.copy()
    cut_results.loc[(cut_results["policy"] == "agent-a") & (cut_results["seed"] == 1_000_000), "terminated"] = False
    axes = [scores_figure([(CellRun(Cell(SCARCE, "default"), ["agent-a"], [], [], r), score_cell(r))]).axes[0]
            for r in (results, cut_results)]
    clean, cut = ([t for t in ax.texts if t.get_text() == "T"] for ax in axes)
    assert clean == [] and "truncated" not in axes[0].get_title()
    assert len(cut) == 1 and "T: some episodes truncated" in axes[1].get_title()
    bar = next(c for c in axes[1].containers if c.get_label() == "agent-a (agent)").patches[0]
    assert cut[0].xy[0] == pytest.approx(bar.get_x() + bar.get_width() / 2)  # over the agent's bar


def test_an_agent_skipped_in_a_cell_has_no_bar_there_not_a_score_of_zero():
    # A skipped agent's NaN score was drawn as a bar of height 0: the score of env fifo+tune.
    import math

    from synergy_gym.agents.benchmark_outputs import scores_figure

    results = frame(CELL)
    results = results[results["policy"] != "agent-a"]
    run = CellRun(Cell(SCARCE, "default"), ["agent-a"], [], [], results)
    ax = scores_figure([(run, score_cell(results)), (CellRun(Cell(SCARCE, "preemptive"), ["agent-a"], [], [],
                                                                 frame(CELL)), score_cell(frame(CELL)))]).axes[0]
    bars = next(c for c in ax.containers if c.get_label() == "agent-a (agent)").patches
    assert math.isnan(bars[0].get_height()) and math.isfinite(bars[1].get_height())
    assert [t.get_text() for t in ax.texts] == ["not run"]


def test_an_agent_whose_score_is_undefined_is_not_said_not_to_have_run_and_its_cell_stays_on_the_axis():
    # Where fifo+tune is the best env heuristic every score is undefined (NaN): the agent's bar was labelled
    # "not run", and the cell, with no finite bar, fell half off the axis.
    from synergy_gym.agents.benchmark_outputs import scores_figure

    tied = {**CELL, ("fifo+tune", "env"): [20.0, 20.0, 20.0]}
    first = CellRun(Cell(SCARCE, "default"), ["agent-a"], [], [], frame(tied))
    second = CellRun(Cell(SCARCE, "preemptive"), ["agent-a"], [], [], frame(CELL))
    ax = scores_figure([(first, score_cell(frame(tied))), (second, score_cell(frame(CELL)))]).axes[0]
    texts = [t for t in ax.texts if t.get_text()]
    assert [t.get_text() for t in texts] == ["scores undefined:\nfifo+tune is the best\nenv heuristic"]
    assert texts[0].xy[0] == 0.0
    assert ax.get_xlim() == (-0.5, 1.5)


@pytest.mark.slow
def test_a_benchmark_cut_short_by_max_rounds_says_so_and_keeps_both_env_kwargs_groups(tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = run_cli([*QUICK, "--mode", "default", "--env-kwargs", "max_rounds=60", "--out", str(out),
                                 "--quiet"], capsys)
    assert code == 0, err
    row = next(line for line in stdout.splitlines() if line.startswith(f"{SCARCE}  "))
    assert row.endswith("(2 truncated)")
    assert f"truncated in {SCARCE} default" in stdout and "2 truncated)" in stdout.split("per cell")[1]
    document = json.loads((out / "results.json").read_text())
    assert document["meta"]["env_kwargs"] == {"num_jobs": 30, "max_rounds": 60}  # both --env-kwargs groups
    csv = pd.read_csv(out / "results.csv")
    assert csv.loc[csv["source"] == "agent", "truncated"].tolist() == [2]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``run_cli``, with a usage error (argparse exits) as its exit status and output."""
    try:
        return run_cli(argv, capsys)
    except SystemExit as exc:
        out, err = capsys.readouterr()
        return int(exc.code or 0), out, err


@pytest.mark.parametrize("name", [n for n in OUTPUT_FILES if n != "results.json"])
def test_json_may_not_be_one_of_its_own_output_files(tmp_path, capsys, name):
    before = snapshot(tmp_path)
    out = tmp_path / "out"
    code, stdout, err = run_cli(["benchmark", *TINY, "--env-kwargs", "num_jobs=10", "--out", str(out),
                                 "--json", str(out / name), "--quiet"], capsys)
    one_line_error(code, stdout, err, f"--json {out / name}", f"own {name}", command="benchmark")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("argv, words", [
    (["--seeds", "2", *TINY, "--env-kwargs", "num_jobs=10"], ("--seeds given twice ('2', '1')", "--seeds 2,1")),
    ([*TINY, "--env-kwargs", "num_jobs=10", "num_jobs=20"], ("--env-kwargs num_jobs given twice", "num_jobs=20")),
    ([*TINY, "--env-kwargs", "num_jobs=10", "--env-kwargs", "num_jobs=20"], ("--env-kwargs num_jobs given twice",)),
    ([*TINY, "--env-kwargs", "num_jobs=10", "--out", ""], ("--out ''", "empty")),
    ([*TINY, "--env-kwargs", "num_jobs=10", "--json", ""], ("--json ''", "empty")),
    (["--model", "", *TINY, "--env-kwargs", "num_jobs=10"], ("--model ''", "empty")),
    (["--model", "notzip.zip", *TINY], ("--model notzip.zip: is not a Stable-Baselines3 model zip",)),
    (["--model", "pretrained:nope", *TINY], ("--model pretrained:nope: unknown pretrained policy 'nope'",)),
    (["--device", "cpu", *TINY, "--env-kwargs", "num_jobs=10"], ("--device 'cpu': needs --model",)),
    (["--model", "pretrained:small", "--device", "gpu", *TINY], ("--device 'gpu': unknown device",)),
    (["--env", SCARCE, "--mode", "default", "--seeds", "1", "--env-kwargs", "num_jobs=10", "max_running=4"],
     ("--env-kwargs max_running=4: only the preemptive mode takes it", "--mode chose default",
      "give --mode preemptive")),
])
def test_bad_input_is_one_line_naming_its_flag_and_writes_nothing(tmp_path, capsys, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)  # an empty --out or --json would write here
    (tmp_path / "notzip.zip").write_text("not a zip")
    before = snapshot(tmp_path)
    out = [] if "--out" in argv else ["--out", str(tmp_path / "out")]
    code, stdout, err = _refused(["benchmark", *argv, *out, "--quiet"], capsys)
    one_line_error(code, stdout, err, *words, command="benchmark")
    assert snapshot(tmp_path) == before
