"""``synergy-gym sweep``: on Ray and in-process, resuming, bad input."""

import json

import pandas as pd
import pytest

from synergy_gym.baselines.sweep import format_seed_summary
from synergy_gym.baselines.sweep_cells import SweepCell
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


def test_a_smaller_grid_into_an_earlier_sweeps_folder_says_its_results_hold_that_grid_alone(tmp_path, capsys):
    # The results files were replaced by the one-cell grid's, unsaid, while cells/ still held all eight.
    out = tmp_path / "s"
    assert main(["sweep", *SPEC, "--no-ray", "--out", str(out)]) == 0
    capsys.readouterr()
    smaller = ["--policies", "fifo+fair", "--load", "20", "--seed", "0", "--jobs", "60", "--quiet", "--cluster", "small"]
    assert main(["sweep", *smaller, "--no-ray", "--out", str(out)]) == 0
    assert len(_table(out)) == 1 and len(list((out / "cells").glob("*.json"))) == 8
    assert capsys.readouterr().err.splitlines() == [
        f"synergy-gym sweep: note: the results files hold this sweep's 1 cell; {out}/cells also keeps 7 of an earlier "
        "sweep there (a sweep over their grid writes their results again)"]
    assert main(["sweep", *SPEC, "--no-ray", "--out", str(out)]) == 0  # the whole grid again: no note
    assert len(_table(out)) == 8 and capsys.readouterr().err == ""


@pytest.mark.slow
def test_sweep_on_local_ray_matches_in_process(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    assert main(["sweep", *SPEC, "--out", str(tmp_path / "ray")]) == 0
    assert main(["sweep", *SPEC, "--no-ray", "--out", str(tmp_path / "local")]) == 0
    pd.testing.assert_frame_equal(_table(tmp_path / "ray"), _table(tmp_path / "local"))
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow")
    parquet = pd.read_parquet(tmp_path / "ray" / "results.parquet").drop(columns=["wall_s"])
    pd.testing.assert_frame_equal(parquet, _table(tmp_path / "ray"), check_dtype=False)


@pytest.mark.slow
def test_connecting_to_ray_keeps_the_sigterm_handler():
    # ray.init installs a SIGTERM handler that crashes the process (exit 134): SIGTERM must stop a sweep as
    # Ctrl-C does (exit 130, the finished cells kept), so the command's handler stays.
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    import signal

    from synergy_gym.baselines.sweep_cells import connect_ray

    def handler(signum, frame):
        raise KeyboardInterrupt

    if ray.is_initialized():
        ray.shutdown()  # a fresh ray.init, which is what installs its handler
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        assert connect_ray(None) is ray and ray.is_initialized()
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)


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


# -- resuming only what was run with the same settings; malformed cells; exact keys -------------------

ONE = ["--policies", "fifo+tune", "--load", "40", "--seed", "1", "--no-ray", "--quiet"]


@pytest.mark.parametrize(
    "first, second, message",
    [
        (["--jobs", "20", "--cluster", "small"], ["--jobs", "30", "--cluster", "small"], "made with --jobs 20, not --jobs 30"),
        (["--jobs", "20", "--cluster", "small"], ["--cluster", "small"], "--jobs 20, not the open-ended run (no --jobs)"),
        (["--jobs", "20", "--cluster", "small"], ["--jobs", "20", "--cluster", "large"], "made with --cluster 4 servers"),
    ],
)
def test_an_out_made_with_other_settings_is_refused_and_left_as_it_was(tmp_path, capsys, first, second, message):
    out = tmp_path / "s"
    assert main(["sweep", *ONE, *first, "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["sweep", *ONE, *second, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {out}: its cells were made with" in err and message in err, err
    assert "use another --out" in err
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_cluster_file_that_differs_in_one_field_is_named(tmp_path, capsys):
    out, toml = tmp_path / "s", tmp_path / "c.toml"
    toml.write_text("num_servers = 4\nstorage_mb_s_per_server = 500\n")
    assert main(["sweep", *ONE, "--jobs", "20", "--cluster", str(toml), "--out", str(out)]) == 0
    toml.write_text("num_servers = 4\nstorage_mb_s_per_server = 600\n")  # the same description, another result
    assert main(["sweep", *ONE, "--jobs", "20", "--cluster", str(toml), "--out", str(out)]) == 2
    assert "--cluster storage_mb_s_per_server 500.0, not storage_mb_s_per_server 600.0" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["[]", '{"policy": "fifo+tune"}', "null", "{not json", "legacy", "other load"])
def test_a_malformed_or_foreign_cell_file_is_run_again(tmp_path, capsys, content):
    out = tmp_path / "s"
    args = ["sweep", *ONE, "--jobs", "20", "--cluster", "small", "--out", str(out)]
    assert main(args) == 0
    path = out / "cells" / "fifo+tune__load40__seed1.json"
    good = json.loads(path.read_text())
    assert good["settings"]["jobs"] == 20 and good["settings"]["cluster"]["num_servers"] == 4
    if content == "legacy":  # written before cells recorded their settings
        content = json.dumps({k: v for k, v in good.items() if k != "settings"})
    elif content == "other load":
        content = json.dumps({**good, "load": 40.0000001})
    path.write_text(content)
    assert main(args) == 0, capsys.readouterr().err
    assert json.loads(path.read_text())["jct_h"] == good["jct_h"]
    assert _table(out)["mean_jct_h"].tolist() == [good["mean_jct_h"]]


def test_repeated_loads_are_refused_and_near_equal_ones_have_their_own_cells(tmp_path, capsys):
    for load, message in (("9,9", "9 is given twice"), ("9,9.0", "9.0 is the same number as 9")):
        assert main(["sweep", "--policies", "fifo+tune", "--load", load, "--seed", "1", "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--load '{load}': {message}" in err, err
    assert not (tmp_path / "o").exists()
    keys = {SweepCell("fifo+tune", load, 1).key for load in (9.0, 9.0000001, 2.5, 1e-9)}
    assert keys == {"fifo+tune__load9__seed1", "fifo+tune__load9.0000001__seed1", "fifo+tune__load2.5__seed1",
                    "fifo+tune__load1e-09__seed1"}


def test_address_with_no_ray_is_refused(tmp_path, capsys):
    assert main(["sweep", *ONE, "--address", "127.0.0.1:6379", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--address '127.0.0.1:6379'" in err and "--no-ray" in err, err
    assert not (tmp_path / "o").exists()


def test_the_seed_table_keeps_wide_numbers_apart():
    summary = pd.DataFrame({"policy": ["ftf_ref+opt_lp"], "load": [9.0000001], "seeds": [2],
                            "mean_jct_h": [123456789012.5], "ci95_h": [98765432.1]})
    row = format_seed_summary(summary).splitlines()[3]
    assert row.split() == ["ftf_ref+opt_lp", "9.0000001", "2", "123456789012.50", "±", "98765432.10"]
