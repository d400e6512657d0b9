"""``--json`` may not name a file the command reads: ``compare --trace t.csv --json t.csv`` replaced the trace."""

from __future__ import annotations

import pytest

from tests.cli.test_output_paths import COMMANDS, assert_refused, place, snapshot  # noqa: F401 (place: its fixture)
from tests.support.cli_runs import run_cli


@pytest.mark.parametrize("argv, flag", [
    (["compare", "--trace", "p.csv", "--cluster", "small", "--jobs", "3", "--quiet"], "--trace"),
    (["compare", "--workload", "p.csv", "--quiet"], "--workload"),
    (["compare", "--jobs", "40", "--cluster", "small.toml", "--quiet"], "--cluster"),
    ([*COMMANDS["sweep"], "--cluster", "small.toml"], "--cluster"),
    (COMMANDS["evaluate"], "--model"),
])
def test_json_may_not_be_a_file_the_command_reads(place, capsys, argv, flag):  # noqa: F811 (the fixture)
    # compare --trace t.csv --json t.csv replaced the trace with the results
    (place / "small.toml").write_text("num_servers = 4\n")
    json_path = {"--cluster": "small.toml", "--model": "model.zip"}.get(flag, "p.csv")
    before = snapshot(place)
    code, out, err = run_cli([*argv, "--out", "adir", "--json", json_path], capsys)
    assert_refused(code, out, err, "--json", json_path, f"is the {flag} file this command reads; name another file")
    assert snapshot(place) == before
