"""``synergy-gym evaluate``'s outputs appear all together or not at all.

Ctrl-C, SIGTERM or an error while the files are written leaves none of them: not ``--out``'s files, not
``--json``, ``--jobs-csv`` or the ``--decisions`` logs, and no temporary file either; Ctrl-C and SIGTERM exit
with status 130 saying "nothing written", which is then true.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import time

import pytest

from synergy_gym.agents import eval_outputs
from synergy_gym.agents import evaluate as evaluate_module
from tests.support.cli_runs import run_cli, snapshot

#: The env heuristic fifo+tune (and the simulator's) on one 10-job workload: every kind of output, in a second.
ARGS = ["evaluate", "--env", "Synergy-small-v0", "--env-kwargs", "num_jobs=10", "--baselines", "fifo+tune",
        "--seeds", "1000000", "--quiet"]


def outputs(tmp_path):
    return ["--out", str(tmp_path / "out"), "--json", str(tmp_path / "r.json"), "--jobs-csv", str(tmp_path / "jobs.csv"),
            "--decisions", str(tmp_path / "decisions")]


def test_every_output_is_written_when_nothing_goes_wrong(tmp_path, capsys):
    code, out, err = run_cli([*ARGS, *outputs(tmp_path)], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["jct_cdf.png", "results.csv", "results.json"]
    assert json.loads((tmp_path / "r.json").read_text())["results"]
    assert (tmp_path / "jobs.csv").read_text().startswith("policy,source,seed,job_id,")
    assert [p.name for p in (tmp_path / "decisions").iterdir()] == ["fifo+tune.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decisions", "jobs.csv", "out", "r.json"]  # nothing else


def _failing(what: str):
    """A stand-in for a function called while the outputs are written: Ctrl-C, SIGTERM or an error there."""

    def fail(*_args, **_kwargs):
        if what == "ctrl-c":
            raise KeyboardInterrupt
        if what == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)  # the command turns SIGTERM into Ctrl-C
            time.sleep(10)
            raise AssertionError("SIGTERM did not stop the command")
        if what == "disk full":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "results.csv")
        raise RuntimeError("a bug while writing")

    return fail


@pytest.mark.parametrize("existing_out", [False, True], ids=["new --out", "existing --out"])
@pytest.mark.parametrize("what", ["ctrl-c", "sigterm", "disk full", "error"])
@pytest.mark.parametrize("where", [(eval_outputs, "jct_cdf_png"), (evaluate_module, "jobs_table"),
                                   (eval_outputs, "write_results_json")],
                         ids=["the plot (after results.csv and the json files)",
                              "the jobs table (after the plot and the decision logs)", "results.json"])
def test_outputs_are_all_or_nothing(where, what, existing_out, tmp_path, capsys, monkeypatch):
    if existing_out:  # a folder reused: the last run's files stay as they were
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "results.csv").write_text("the last run's\n")
    monkeypatch.setattr(*where, _failing(what))
    before = snapshot(tmp_path)
    if what == "error":
        with pytest.raises(RuntimeError, match="a bug while writing"):
            run_cli([*ARGS, *outputs(tmp_path)], capsys)
    else:
        code, out, err = run_cli([*ARGS, *outputs(tmp_path)], capsys)
        if what == "disk full":
            assert code == 2 and err == ("synergy-gym evaluate: error: writing the results failed: No space left on device "
                                         "(results.csv); nothing written\n"), err
        else:
            assert code == 130 and err == "synergy-gym evaluate: interrupted; nothing written\n", err
    assert snapshot(tmp_path) == before  # no output, no temporary file or folder
