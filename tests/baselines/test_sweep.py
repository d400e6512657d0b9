"""``synergy-gym sweep``: on Ray and in-process, resuming, bad input."""

import json

import pandas as pd
import pytest

from synergy_gym.cli import main

SPEC = ["--policies", "fifo+fair,fifo+tune", "--load", "20,40", "--seed", "0..1", "--jobs", "60", "--quiet",
        "--cluster", "small"]


def _table(out):
    return pd.read_csv(out / "results.csv", dtype={"sensitivity": str}).drop(columns=["wall_s"])


def test_sweep_in_process_writes_cells_table_and_plots(tmp_path):
    out = tmp_path / "s"
    assert main(["sweep", *SPEC, "--no-ray", "--out", str(out)]) == 0
    table = _table(out)
    assert len(table) == 8 and not table.duplicated(["policy", "load", "seed"]).any()
    assert len(list((out / "cells").glob("*.json"))) == 8
    for name in ("avg_jct_vs_load.png", "jct_cdf.png"):
        assert (out / name).is_file()
    cell = json.loads((out / "cells" / "fifo+tune__load40__seed1.json").read_text())
    assert cell["jobs_measured"] == len(cell["jct_h"]) == 30


def test_rerunning_resumes_without_losing_or_duplicating_cells(tmp_path):
    out = tmp_path / "s"
    assert main(["sweep", *SPEC, "--no-ray", "--out", str(out)]) == 0
    full = _table(out)
    for path in sorted((out / "cells").glob("*.json"))[::2]:
        path.unlink()  # as if the sweep had been interrupted
    stamp = {p.name: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")}
    assert main(["sweep", *SPEC, "--no-ray", "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(_table(out), full)
    assert all((out / "cells" / name).stat().st_mtime_ns == t for name, t in stamp.items())  # kept, not redone


@pytest.mark.slow
def test_sweep_on_local_ray_matches_in_process(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    assert main(["sweep", *SPEC, "--out", str(tmp_path / "ray")]) == 0
    assert main(["sweep", *SPEC, "--no-ray", "--out", str(tmp_path / "local")]) == 0
    pd.testing.assert_frame_equal(_table(tmp_path / "ray"), _table(tmp_path / "local"))
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow")
    parquet = pd.read_parquet(tmp_path / "ray" / "results.parquet").drop(columns=["wall_s"])
    pd.testing.assert_frame_equal(parquet, _table(tmp_path / "ray"), check_dtype=False)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policies", "fifo+tune,fifo+nope", "--load", "5", "--seed", "0"], "unknown policy 'fifo+nope'"),
        (["--policies", "fifo+tune", "--load", "5", "--seed", "3..1"], "the seed range is empty"),
        (["--policies", "fifo+tune", "--load", "5", "--seed", "0", "--address", "127.0.0.1:{port}"], "cannot connect to Ray"),
    ],
)
def test_bad_sweep_specs_give_one_line_errors_and_write_nothing(tmp_path, capsys, args, message):
    if "--address" in args:
        pytest.importorskip("ray", reason="the ray extra is not installed")
        import socket

        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        args = [a.format(port=port) for a in args]
    out = tmp_path / "out"
    assert main(["sweep", *args, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()
