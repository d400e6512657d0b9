"""``trace-stats`` sizes a trace by its bytes before reading it: refused past the limits, announced when large."""

from __future__ import annotations

import synergy_gym.traces.trace_stats as trace_stats
from tests.support.cli_runs import run_cli, snapshot

TRACE = "timestamp,duration,num_gpus\n" + "".join(f"2017-10-09 06:{m:02d}:00,{3600 * (m + 1)},1\n" for m in range(6))


def test_a_trace_too_large_to_read_is_refused_before_it_is_read(tmp_path, capsys, monkeypatch):
    (tmp_path / "t.csv").write_text(TRACE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(trace_stats, "READ_BYTES_S", 1e-3)  # as if the file were terabytes
    before = snapshot(tmp_path)
    code, out, err = run_cli(["trace-stats", "t.csv"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("synergy-gym trace-stats: error: a trace of ") and "pass --allow-large" in err
    assert snapshot(tmp_path) == before
    code, out, err = run_cli(["trace-stats", "t.csv", "--all-durations", "--allow-large", "--out", "o"], capsys)
    assert code == 0 and (tmp_path / "o" / "trace_stats.png").is_file(), err


def test_a_large_trace_says_that_it_is_being_read(tmp_path, capsys, monkeypatch):
    (tmp_path / "t.csv").write_text(TRACE)
    monkeypatch.setattr(trace_stats, "ANNOUNCE_BYTES", 1)
    code, _, err = run_cli(["trace-stats", str(tmp_path / "t.csv"), "--all-durations", "--out", str(tmp_path / "o")],
                           capsys)
    assert code == 0, err
    assert err.startswith("synergy-gym trace-stats: reading a trace of ") and err.count("\n") == 1


def test_the_estimate_counts_an_alibaba_folders_files(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"x" * 1000)
    (tmp_path / "b.csv").write_bytes(b"x" * 3000)
    folder, one = trace_stats.trace_estimate(tmp_path), trace_stats.trace_estimate(tmp_path / "a.csv")
    assert folder.seconds == 4 * one.seconds and folder.memory_bytes > one.memory_bytes


def test_a_compressed_trace_is_sized_by_what_it_holds(tmp_path):
    # A .gz trace was sized by its packed bytes, 5× too small for the Philly trace: past the guard unseen.
    import bz2
    import gzip
    import zipfile

    text = (TRACE * 400).encode()
    (tmp_path / "t.csv").write_bytes(text)
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress(text))
    with zipfile.ZipFile(tmp_path / "t.csv.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("t.csv", text)
    (tmp_path / "t.csv.bz2").write_bytes(bz2.compress(text))
    plain = trace_stats.trace_estimate(tmp_path / "t.csv")
    assert (tmp_path / "t.csv.gz").stat().st_size < len(text) / 5
    for name in ("t.csv.gz", "t.csv.zip"):
        packed = trace_stats.trace_estimate(tmp_path / name)
        assert (packed.seconds, packed.memory_bytes, packed.what) == (plain.seconds, plain.memory_bytes, plain.what)
    bz = trace_stats.trace_estimate(tmp_path / "t.csv.bz2")
    assert bz.seconds == (tmp_path / "t.csv.bz2").stat().st_size * trace_stats.PACKED_RATIO / trace_stats.READ_BYTES_S
