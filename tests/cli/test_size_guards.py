"""Issue 24: ``compare`` and ``sweep`` estimate their memory and time before any work, and refuse past the limits."""

from __future__ import annotations

import contextlib
import signal

import pytest

import synergy_gym.cli.guards as guards
from synergy_gym.cli.args import parse_seed_list, parse_seeds
from synergy_gym.cli.guards import (
    Estimate,
    SizeError,
    check_size,
    compare_estimate,
    format_bytes,
    format_duration,
    simulation_seconds,
    sweep_estimate,
)
from synergy_gym.errors import SynergyGymError
from tests.support.cli_runs import run_cli, snapshot

SMALL = ["--cluster", "small", "--jobs", "20", "--policies", "fifo+fair"]


def _refused(code: int, out: str, err: str, command: str) -> str:
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1 and err.startswith(f"synergy-gym {command}: error: "), err
    assert "Traceback" not in err and "--allow-large" in err, err
    return err


#: A refusal that has not come within this many seconds hangs: the test fails then rather than wait (these once
#: hung, growing past 7 GB in a minute). Not a speed goal – a refusal takes well under a second.
HANG_S = 30


class Hang(Exception):
    pass


@contextlib.contextmanager
def no_hang():
    """Fail the test with :class:`Hang` if the block has not returned within :data:`HANG_S` seconds (the alarm of
    ``tests/test_cli_fuzz.py``)."""
    seconds = HANG_S

    def alarm(_signum: int, _frame: object) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- refused before any work, in one line, writing nothing ---------------------------------


@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_a_cluster_of_a_hundred_million_servers_is_refused_at_once(place, capsys, command):
    (place / "big.toml").write_text("num_servers = 100000000\n")
    before = snapshot(place)
    extra = ["--policies", "fifo+fair", "--load", "9", "--seed", "0", "--no-ray"] if command == "sweep" else []
    with no_hang():  # it used to hang, growing past 7 GB in a minute
        code, out, err = run_cli([command, "--cluster", "big.toml", *extra, "--out", "o", "--quiet"], capsys)
    err = _refused(code, out, err, command)
    assert "on 100,000,000 servers" in err and "(over the limit of 1 h)" in err
    assert snapshot(place) == before


def test_sixty_jobs_on_a_hundred_thousand_seeds_is_refused_naming_memory_and_time(place, capsys):
    code, out, err = run_cli(["compare", "--quiet", "--jobs", "60", "--seed", "0..100000", "--out", "o"], capsys)
    err = _refused(code, out, err, "compare")
    assert err.startswith("synergy-gym compare: error: 300,003 runs of 60 jobs on 16 servers would need about ")
    assert "GiB of memory (over " in err and err.rstrip().endswith("pass --allow-large to run it anyway")
    assert list(place.iterdir()) == []


@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_a_trillion_seeds_are_refused_without_being_listed(place, capsys, command):
    extra = ["--policies", "fifo+tune", "--load", "9", "--no-ray"] if command == "sweep" else []
    with no_hang():  # listing the cells first would never end
        code, out, err = run_cli([command, *extra, "--seed", f"0..{10**12}", "--out", "o"], capsys)
    err = _refused(code, out, err, command)
    assert ("1,000,000,000,001 cells" if command == "sweep" else "3,000,000,000,003 runs") in err
    assert list(place.iterdir()) == []


def test_the_machine_s_memory_is_a_limit_too(place, capsys, monkeypatch):
    monkeypatch.setattr(guards, "machine_memory_bytes", lambda: 2 * 1024**3)
    code, out, err = run_cli(["compare", *SMALL, "--seed", "0..20000", "--out", "o"], capsys)
    err = _refused(code, out, err, "compare")
    assert "(over 80% of this machine's 2 GiB of memory)" in err and "over the limit of 1 h" not in err
    assert list(place.iterdir()) == []


def test_allow_large_runs_what_the_limits_refuse(place, capsys, monkeypatch):
    monkeypatch.setattr(guards, "TIME_LIMIT_S", 0.001)
    code, out, err = run_cli(["compare", *SMALL, "--out", "o", "--quiet"], capsys)
    assert "over the limit of 1 s" in _refused(code, out, err, "compare")
    assert main_ok(["compare", *SMALL, "--out", "o", "--quiet", "--allow-large"], capsys)
    assert (place / "o" / "results.csv").is_file()
    code, out, err = run_cli(["sweep", *SMALL, "--load", "40", "--seed", "0", "--no-ray", "--out", "s"], capsys)
    _refused(code, out, err, "sweep")
    assert main_ok(["sweep", *SMALL, "--load", "40", "--seed", "0", "--no-ray", "--out", "s", "--allow-large",
                    "--quiet"], capsys)


def main_ok(argv, capsys) -> bool:
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    return True


def test_a_resumed_sweep_is_sized_by_the_cells_still_to_run(place, capsys, monkeypatch):
    argv = ["sweep", *SMALL, "--load", "40", "--seed", "0..3", "--no-ray", "--out", "s", "--quiet"]
    assert main_ok(argv, capsys)
    for path in sorted((place / "s" / "cells").glob("*.json"))[1:]:
        path.unlink()
    seen = []

    def check(size, allow):
        seen.append(size.what)
        guards.check_size(size, allow)

    monkeypatch.setattr("synergy_gym.baselines.sweep.check_size", check)
    assert main_ok(argv, capsys)
    assert seen == ["3 cells of 20 jobs on 4 servers"]


# -- no silent minutes ----------------------------------------------------------------------


def test_quiet_says_in_one_line_when_the_run_would_be_silent_for_over_a_minute(place, capsys, monkeypatch):
    assert main_ok(["compare", *SMALL, "--quiet", "--out", "a"], capsys)
    monkeypatch.setattr(guards, "QUIET_NOTICE_S", 0.0)
    code, out, err = run_cli(["compare", *SMALL, "--quiet", "--out", "b"], capsys)
    assert code == 0
    assert err == "synergy-gym compare: about 3 s for 1 run of 20 jobs on 4 servers (estimated; --quiet shows no progress)\n"
    code, out, err = run_cli(["sweep", *SMALL, "--load", "40", "--seed", "0,1", "--no-ray", "--quiet", "--out", "s"], capsys)
    assert code == 0 and err.count("\n") == 1 and err.startswith("synergy-gym sweep: about ") and "for 2 cells" in err


# -- the model ------------------------------------------------------------------------------


def test_the_estimates_grow_with_servers_jobs_and_cases():
    base = compare_estimate(("fifo+fair",), 1, 1000, 16)
    assert compare_estimate(("fifo+fair",), 10, 1000, 16).memory_bytes > base.memory_bytes
    assert compare_estimate(("fifo+fair",), 1, 1000, 10**6).seconds > 100 * base.seconds
    with_opt = compare_estimate(("fifo+fair", "fifo+opt"), 1, 1000, 16)
    assert with_opt.seconds - base.seconds > 10 * simulation_seconds("fifo+fair", 16, 1000)
    assert simulation_seconds("las+tune", 16, 1000) > simulation_seconds("fifo+tune", 16, 1000)
    assert simulation_seconds("fifo+tune", 10**4, 100, "consolidate") > simulation_seconds("fifo+tune", 10**4, 100)
    local = sweep_estimate(("fifo+tune",), 100, 1000, 500, 16, workers=8, ray="local")
    remote = sweep_estimate(("fifo+tune",), 100, 1000, 500, 16, workers=8, ray="remote")
    alone = sweep_estimate(("fifo+tune",), 100, 1000, 500, 16)
    assert local.memory_bytes > alone.memory_bytes > remote.memory_bytes
    assert alone.seconds - guards.WRITE_S > 7 * (local.seconds - guards.WRITE_S)
    assert local.what == "100 cells of 1,000 jobs on 16 servers on 8 Ray workers"


def test_the_paper_s_experiments_pass_the_guards():
    for estimate in (compare_estimate(("fifo+fair", "fifo+greedy", "fifo+tune"), 3, 10_000, 16),
                     sweep_estimate(("fifo+fair", "fifo+tune", "srtf+tune"), 120, 10_000, 1000, 16)):
        check_size(estimate, allow_large=False)


def test_check_size_and_its_units():
    with pytest.raises(SizeError, match=r"^x would need about 20 GiB of memory \(over .*\) and about 3 min; pass"):
        check_size(Estimate("x", 20 * 1024**3, 180), allow_large=False)
    check_size(Estimate("x", 1e18, 1e12), allow_large=True)
    assert issubclass(SizeError, SynergyGymError)
    assert [format_bytes(b) for b in (512, 3 * 1024**2, 1.5 * 1024**3, 2e15)] == ["0.5 KiB", "3 MiB", "1.5 GiB", "1,819 TiB"]
    assert [format_duration(s) for s in (0.2, 40, 180, 5400, 86400 * 9, 1e12)] == [
        "1 s", "40 s", "3 min", "1.5 h", "9 days", "31,710 years"]


# -- seeds: ranges are never listed before the size is known --------------------------------


def test_seed_ranges_are_counted_not_listed():
    seeds = parse_seeds(f"0..{10**12}")
    assert len(seeds) == 10**12 + 1 and seeds[0] == 0 and seeds[-1] == 10**12 and seeds[10**11] == 10**11
    assert tuple(parse_seeds("3,1,2,1..5,4..8,0")) == (3, 1, 2, 4, 5, 6, 7, 8, 0)
    assert list(parse_seeds("5..7,0..9")) == [5, 6, 7, 0, 1, 2, 3, 4, 8, 9]
    assert parse_seed_list("5,5,0..2") == (5, 0, 1, 2)
    with pytest.raises(SynergyGymError, match=r"--seed '0\.\.2000000': 2,000,001 seeds; at most 1,000,000"):
        parse_seed_list("0..2000000")
    everything = parse_seeds(f"0..{2**63 - 1}")  # more seeds than len() can count
    assert everything.size == 2**63 and everything[-1] == 2**63 - 1 and len(everything) == 2**63 - 1
    for bad, words in (("3..1", "empty"), ("1000000,5..3", "empty: 5..3 ends before it starts"),
                       ("0..9,4..3,12", "4..3 ends before it starts"), ("-1", "non-negative"),
                       ("x", "expected integers"), ("", "empty"), ("1,,2", "an empty item"), ("1,", "an empty item"),
                       (str(10**20), "at most 9,223,372,036,854,775,807"), (f"0..{2**63}", "64-bit")):
        with pytest.raises(SynergyGymError, match=words):
            parse_seeds(bad)
