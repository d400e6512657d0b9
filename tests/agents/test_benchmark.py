"""``synergy-gym benchmark``: the score, the cells a model fits, the table, the JSON, bad input, and a whole run.

The score is 0 exactly at env fifo+tune and 100 exactly at the best env heuristic (``random`` never
the best while another ran), undefined where the two coincide. A model runs only in the cells whose
spaces it fits; the others are listed with the reason, and a model that fits none is refused. Bad
input is one line, exit status 2, nothing written. The end-to-end runs use 2 seeds of 30-job episodes.
"""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synergy_gym.agents.benchmark import load_agents
from synergy_gym.agents.benchmark_cells import MODES, Cell, benchmark_cells
from synergy_gym.agents.benchmark_outputs import OUTPUT_FILES, csv_rows, format_leaderboard, format_table, records
from synergy_gym.agents.benchmark_runs import BenchAgent, CellRun, env_parts, plan_cell
from synergy_gym.agents.benchmark_scores import cell_reference, normalised_score, score_cell
from synergy_gym.agents.eval_summary import summarise
from synergy_gym.agents.pretrained_policies import pretrained_model_path
from synergy_gym.agents.provenance import TrainedOn
from synergy_gym.cli.results_json import META_KEYS
from synergy_gym.env.scenarios import SCENARIOS
from synergy_gym.errors import ConfigError
from tests.agents.tiny_runs import one_line_error
from tests.support.cli_runs import run_cli, snapshot

SCARCE = "Synergy-small-scarce-v0"
#: A quick benchmark of the shipped small-scarce policy: 2 seeds of 30-job episodes (enough for the heuristics to differ).
QUICK = ["benchmark", "--model", "pretrained:small-scarce", "--env", SCARCE, "--seeds", "1000000,1000001",
         "--env-kwargs", "num_jobs=30", "--device", "cpu"]


def frame(means: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    """Per-seed rows of a cell: ``{(policy, source): [mean JCT per seed]}``."""
    rows = [{"policy": p, "source": s, "seed": 1_000_000 + i, "mean_jct_h": v, "median_jct_h": math.nan,
             "p99_jct_h": math.nan, "makespan_h": math.nan, "terminated": True, "wall_s": 0.1}
            for (p, s), values in means.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


CELL = {("agent-a", "agent"): [23.1, 24.3, 22.2], ("fifo+tune", "env"): [39.41, 38.27, 40.58],
        ("srtf+price", "env"): [24.52, 24.83, 23.17], ("tetris", "env"): [26.9, 27.13, 25.01],
        ("random", "env"): [3.0, 3.0, 3.0], ("no-wait-bound", "bound"): [10.99, 10.5, 11.2]}


# -- the score ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fifo, best", [(39.42, 24.52), (14.55, 14.51), (1e-3 + 0.1, 0.1), (36.56, 26.9)])
def test_the_score_is_exactly_0_at_fifo_tune_and_100_at_the_best_heuristic(fifo, best):
    assert normalised_score(fifo, fifo, best) == 0.0
    assert normalised_score(best, fifo, best) == 100.0
    assert normalised_score(fifo + (fifo - best), fifo, best) == pytest.approx(-100.0)
    assert normalised_score(best - (fifo - best), fifo, best) == pytest.approx(200.0)


def test_the_score_is_undefined_without_room_between_the_references():
    assert math.isnan(normalised_score(20.0, 24.0, 24.0))
    assert math.isnan(normalised_score(math.nan, 30.0, 24.0))


def test_a_cell_is_scored_against_env_fifo_tune_and_its_best_heuristic_never_random():
    score = score_cell(frame(CELL))
    scores = {(r.policy, r.source): r.score for r in score.summary.itertuples()}
    assert score.reference.best == "srtf+price"  # random's lower JCT does not make it the reference
    assert scores[("fifo+tune", "env")] == 0.0 and scores[("srtf+price", "env")] == 100.0
    fifo, best = np.mean(CELL[("fifo+tune", "env")]), np.mean(CELL[("srtf+price", "env")])
    assert scores[("agent-a", "agent")] == pytest.approx(100 * (fifo - np.mean(CELL[("agent-a", "agent")])) / (fifo - best))
    assert scores[("no-wait-bound", "bound")] > scores[("agent-a", "agent")] > 100
    paired = score.paired["agent-a"]
    diffs = np.subtract(CELL[("agent-a", "agent")], CELL[("srtf+price", "env")])
    assert paired["heuristic"] == "srtf+price" and paired["seeds"] == 3
    assert paired["mean_diff_h"] == pytest.approx(diffs.mean()) and paired["better_seeds"] == int((diffs < 0).sum())
    assert paired["ci95_h"] > 0


def test_a_cell_without_env_fifo_tune_cannot_be_scored():
    with pytest.raises(ConfigError, match="fifo\\+tune"):
        cell_reference(summarise(frame({("tetris", "env"): [1.0, 2.0]})))


# -- the cells and their input --------------------------------------------------------------------


def test_the_default_cells_are_every_registered_id_in_every_mode():
    cells = benchmark_cells(None, None, {"num_jobs": 30})
    assert [(c.env_id, c.mode) for c in cells] == [(e, m) for e in SCENARIOS for m in MODES]
    assert all(c.env_kwargs == {**MODES[c.mode], "num_jobs": 30} for c in cells)
    chosen = benchmark_cells([f"{SCARCE},Synergy-v0", SCARCE], ["preemptive"])
    assert [c.name for c in chosen] == [f"{SCARCE} preemptive", "Synergy-v0 preemptive"]


def test_preemptive_only_env_kwargs_go_to_the_preemptive_cells():
    # The default-mode policies run in the preemptive cells with redecide="every_event" (docs/pretrained.md).
    cells = benchmark_cells([SCARCE], None, {"num_jobs": 30, "redecide": "every_event"})
    assert [c.env_kwargs for c in cells] == [{"num_jobs": 30}, {"preemptive": True, "num_jobs": 30, "redecide": "every_event"}]
    for cell in cells:
        env_parts(cell)  # the environment takes each cell's kwargs


@pytest.mark.parametrize("argv, words", [
    (["--env", "Synergy-nope-v0"], ("--env 'Synergy-nope-v0'", "unknown environment", SCARCE)),
    (["--mode", "greedy"], ("--mode 'greedy'", "unknown mode", "default, preemptive")),
    (["--seeds", "abc"], ("--seeds 'abc'", "expected integers")),
    (["--seeds", "5..1"], ("--seeds '5..1'", "empty")),
    (["--seeds", ""], ("--seeds '': empty",)),  # not the 20 default seeds
    (["--seeds", "1000000,5..3"], ("--seeds '1000000,5..3'", "5..3 ends before it starts")),
    (["--env-kwargs", "preemptive=true"], ("--env-kwargs preemptive=True", "--mode")),
    (["--env-kwargs", "num_jobs=-4"], ("num_jobs", "-4")),
    (["--model", "missing.zip"], ("missing.zip",)),
    (["--model", "pretrained:nope"], ("nope", "small-scarce")),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, out, err = run_cli(["benchmark", *argv, "--out", str(tmp_path / "out"), "--quiet"], capsys)
    one_line_error(code, out, err, *words, command="benchmark")
    assert snapshot(tmp_path) == before


def test_a_model_without_its_statistics_is_refused_naming_only_what_benchmark_takes(tmp_path, capsys):
    (tmp_path / "copy").mkdir()
    model = Path(shutil.copy(pretrained_model_path("small-scarce"), tmp_path / "copy" / "model.zip"))
    before = snapshot(tmp_path)
    code, out, err = run_cli(["benchmark", "--model", str(model), "--env", SCARCE, "--out", str(tmp_path / "out"),
                              "--quiet"], capsys)
    line = one_line_error(code, out, err, f"--model {model}: its normalisation statistics are missing",
                          f"looked for {tmp_path / 'copy' / 'vecnormalize.pkl'}",
                          "benchmark reads them only from beside the model", command="benchmark")
    assert "--vecnormalize" not in line  # evaluate's option, not benchmark's
    assert "or give --no-normalize for models trained without VecNormalize" in line
    assert snapshot(tmp_path) == before


def test_output_paths_are_checked_before_any_work(tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    code, out, err = run_cli(["benchmark", "--out", str(tmp_path / "a-file"), "--quiet"], capsys)
    one_line_error(code, out, err, "--out", "a-file", command="benchmark")
    code, out, err = run_cli(["benchmark", "--out", str(tmp_path / "out"), "--json", str(tmp_path / "out"), "--quiet"],
                             capsys)
    one_line_error(code, out, err, "--json", "--out folder", command="benchmark")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


# -- the models a cell runs --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_scarce():
    return load_agents(["pretrained:small-scarce"], ["ss"], "cpu")[0]


@pytest.mark.slow
def test_a_default_mode_model_fits_the_default_cells_and_is_skipped_in_the_preemptive_ones(small_scarce):
    for cell in benchmark_cells(None, None):
        run, fits = plan_cell(cell, [small_scarce], env_parts(cell))
        if cell.mode == "default":
            assert fits == [small_scarce] and run.agents == ["ss"] and not run.skipped
            assert run.trained_here == (["ss"] if cell.env_id == SCARCE else [])
        else:
            assert fits == [] and run.agents == []
            (label, why), = run.skipped
            assert label == "ss" and "preemptive" in why and "action_mask" in why


def test_the_training_cell_is_the_trained_id_mode_and_env_kwargs_as_evaluate_compares_them():
    # Only the id and the mode were compared: --env-kwargs num_jobs=60 marked a model trained with 300 "*".
    def here(trained_kwargs: dict, env_kwargs: dict, env_id: str = SCARCE, mode: str = "default") -> bool:
        trained = TrainedOn(SCARCE, trained_kwargs, None, Path("card.json"))
        agent = BenchAgent("ss", "model.zip", Path("model.zip"), None, None, trained)  # type: ignore[arg-type]
        cell, = benchmark_cells([env_id], [mode], env_kwargs)
        return agent.trained_here(cell)

    assert here({}, {}) and here({}, {"num_jobs": 300})  # the id's registered value given: no difference
    assert here({"num_jobs": 60}, {"num_jobs": 60}) and here({"preemptive": True}, {}, mode="preemptive")
    assert not here({}, {}, env_id="Synergy-small-v0") and not here({}, {}, mode="preemptive")
    assert not here({}, {"num_jobs": 60}) and not here({"num_jobs": 60}, {})
    assert not here({"preemptive": True}, {"redecide": "every_event"}, mode="preemptive")


@pytest.mark.slow
def test_a_model_that_fits_no_cell_chosen_is_refused(tmp_path, capsys):
    code, out, err = run_cli([*QUICK, "--mode", "preemptive", "--out", str(tmp_path / "out"), "--quiet"], capsys)
    one_line_error(code, out, err, "no model fits", "preemptive", command="benchmark")
    assert not (tmp_path / "out").exists()


# -- the table and the JSON rows ------------------------------------------------------------------


def test_the_table_marks_the_training_cell_and_lists_the_skipped_ones():
    results = frame(CELL)
    ran = CellRun(Cell(SCARCE, "default"), ["agent-a"], [], ["agent-a"], results)
    tie = frame({("agent-a", "agent"): [5.0, 5.0], ("fifo+tune", "env"): [4.0, 4.0], ("tetris", "env"): [4.5, 4.5]})
    tied = CellRun(Cell("Synergy-v0", "default"), ["agent-a"], [], [], tie)
    skipped = CellRun(Cell(SCARCE, "preemptive", {"preemptive": True}), [], [("agent-a", "its spaces differ")])
    scored = [(ran, score_cell(results)), (tied, score_cell(tie)), (skipped, None)]
    lines = format_table(scored, [1_000_000, 1_000_001, 1_000_002]).splitlines()
    assert "1000000..1000002" in lines[0]
    row = next(line for line in lines if line.startswith(SCARCE))
    assert "agent-a*" in row and "srtf+price 24.173" in row and "3/3" in row
    tied_row = next(line for line in lines if line.startswith("Synergy-v0"))
    assert tied_row.split()[4] == "-"  # fifo+tune is the best heuristic there: no score
    assert f"skipped: agent-a in {SCARCE} preemptive: its spaces differ" in lines
    board = format_leaderboard(scored).splitlines()
    assert board[2].startswith("agent-a") and board[-1].split()[0] == "no-wait-bound"
    rows = records(scored)
    agent = next(r for r in rows if r["policy"] == "agent-a" and r["env_id"] == SCARCE)
    assert agent["trained_here"] is True and agent["paired_vs_best_env"]["heuristic"] == "srtf+price"
    assert next(r for r in rows if r["policy"] == "agent-a" and r["env_id"] == "Synergy-v0")["score"] is None


def test_results_csv_writes_the_seed_counts_as_integers_as_the_json_does():
    ran = CellRun(Cell(SCARCE, "default"), ["agent-a"], [], [], frame(CELL))
    rows = records([(ran, score_cell(frame(CELL)))])
    table = pd.read_csv(io.StringIO(csv_rows(rows).to_csv(index=False)), dtype=str, keep_default_na=False)
    agent = table[table["policy"] == "agent-a"].iloc[0]
    assert (agent["lower_seeds"], agent["paired_seeds"]) == ("3", "3")  # not 3.0 beside the heuristics' empty cells
    heuristic = table[table["policy"] == "tetris"].iloc[0]
    assert (heuristic["lower_seeds"], heuristic["paired_seeds"]) == ("", "")


# -- whole runs ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_benchmark_prints_the_table_and_writes_every_file_then_reuses_the_cached_heuristics(tmp_path, capsys):
    out, extra = tmp_path / "out", tmp_path / "elsewhere.json"
    code, stdout, err = run_cli([*QUICK, "--mode", "default,preemptive", "--out", str(out), "--json", str(extra),
                                 "--contention-bound", "--quiet"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES)
    lines = stdout.splitlines()
    row = next(line for line in lines if line.startswith(f"{SCARCE}  "))
    assert "pretrained:small-scarce" in row and "/2" in row and "*" not in row  # trained with num_jobs=300, not 30
    assert any(line.startswith(f"skipped: pretrained:small-scarce in {SCARCE} preemptive: ") for line in lines)
    assert "scores (mean JCT h) per cell" in stdout and lines[-1].startswith(f"wrote {', '.join(OUTPUT_FILES)} to {out}")

    document = json.loads((out / "results.json").read_text())
    assert document == json.loads(extra.read_text())
    meta, rows = document["meta"], document["results"]
    assert list(meta)[:len(META_KEYS)] == list(META_KEYS)
    assert meta["seeds"] == [1_000_000, 1_000_001] and meta["env_kwargs"] == {"num_jobs": 30}
    assert [(c["env_id"], c["mode"], c["ran"]) for c in meta["cells"]] == [(SCARCE, "default", True),
                                                                          (SCARCE, "preemptive", False)]
    assert meta["cells"][1]["skipped"][0]["agent"] == "pretrained:small-scarce"
    assert meta["agents"][0]["trained_on"]["env_id"] == SCARCE and not meta["cells"][0]["heuristics_cached"]
    sources = {(r["policy"], r["source"]) for r in rows}
    assert {("pretrained:small-scarce", "agent"), ("fifo+tune", "env"), ("random", "env"),
            ("no-wait-bound", "bound")} <= sources
    for r in rows:
        assert {"env_id", "mode", "policy", "source", "episodes", "mean_jct_h", "mean_jct_ci95_h", "score",
                "per_seed"} <= set(r) and r["episodes"] == 2
    cell = meta["cells"][0]
    by_name = {r["policy"]: r for r in rows if r["source"] == "env"}
    assert by_name[cell["best_heuristic"]]["mean_jct_h"] == cell["best_heuristic_jct_h"]
    assert cell["best_heuristic_jct_h"] < cell["fifo_tune_jct_h"] == by_name["fifo+tune"]["mean_jct_h"]
    assert by_name["fifo+tune"]["score"] == 0.0 and by_name[cell["best_heuristic"]]["score"] == 100.0
    assert max(r["score"] for r in by_name.values()) == 100.0
    assert isinstance(cell["contention_bound"], str)  # computed, or why not: the bound is optional
    agent = next(r for r in rows if r["source"] == "agent")
    assert agent["trained_here"] is False and set(agent["paired_vs_best_env"]) >= {"mean_diff_h", "ci95_h", "better_seeds"}
    csv = pd.read_csv(out / "results.csv")
    assert len(csv) == len(rows) and set(csv["env_id"]) == {SCARCE}
    assert len(pd.read_csv(out / "episodes.csv")) == 2 * len(rows)

    again = tmp_path / "again"
    code, _, err = run_cli([*QUICK, "--mode", "default", "--out", str(again)], capsys)
    assert code == 0, err
    assert "env heuristics from the cache" in err and "env fifo+tune" not in err  # no heuristic ran again
    second = json.loads((again / "results.json").read_text())
    assert second["meta"]["cells"][0]["heuristics_cached"] is True
    first = {(r["policy"], r["source"]): r["per_seed"] for r in rows}
    assert all(first[(r["policy"], r["source"])] == r["per_seed"] for r in second["results"])


@pytest.mark.parametrize("title", ["Default mode:", "Preemptive mode"])
def test_the_docs_leaderboards_are_in_the_order_the_command_prints(title):
    # docs/benchmark.md's tables, fed back to leaderboard() as scored cells, come out in the same order.
    import re
    from types import SimpleNamespace

    from synergy_gym.agents.benchmark_outputs import leaderboard

    doc = (Path(__file__).resolve().parents[2] / "docs" / "benchmark.md").read_text()
    rows = [line for line in doc[doc.index(title):].split("\n\n")[1].splitlines() if line.startswith("| `")]
    cells = [[part.strip() for part in line.strip("|").split("|")] for line in rows]
    assert len(cells) > 8 and all(len(row) == 6 for row in cells)
    scored = []
    for column in range(2, 6):
        records = []
        for row in cells:
            number = re.fullmatch(r"\**(-?[\d.]+)\** \(([\d.]+)\)( \*)?", row[column])
            assert number, row[column]
            records.append({"policy": row[0].strip("`"), "source": row[1], "score": float(number[1]),
                            "mean_jct_h": float(number[2]), "truncated": 0})
        cell = SimpleNamespace(name=f"cell{column}", short=f"cell{column}")
        scored.append((SimpleNamespace(cell=cell), SimpleNamespace(summary=pd.DataFrame(records))))
    assert list(leaderboard(scored)["policy"]) == [row[0].strip("`") for row in cells]
