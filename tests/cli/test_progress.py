"""Progress: a bar on a terminal, a few plain lines in a log or pipe (no carriage returns), nothing when quiet."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest

from synergy_gym.cli.progress import Progress, is_terminal

PROGRESS_LINE = re.compile(r": +\d+% \([\d,]+/[\d,]+ \w+\)$")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_line_every_ten_percent_and_at_the_end():
    log = io.StringIO()
    with Progress("fifo+tune load9", total=1000, unit="job", stream=log, min_interval_s=0.0) as bar:
        assert bar.mode == "lines"
        for done in range(1, 1001):
            bar.update(done)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert lines[0] == "fifo+tune load9:   0% (0/1,000 jobs)" and lines[-1] == "fifo+tune load9: 100% (1,000/1,000 jobs)"
    assert len(lines) == 11 and all(PROGRESS_LINE.search(line) for line in lines)


def test_quick_work_prints_its_first_and_last_line_only_and_a_late_total_works():
    log = io.StringIO()
    bar = Progress("run", unit="job", stream=log)  # total not known yet: no first line
    for done in range(1, 501):
        bar.update(done, 500)
    bar.close()
    bar.close()
    assert log.getvalue().splitlines() == ["run: 100% (500/500 jobs)"]
    log = io.StringIO()
    with Progress("agent a", total=3, unit="episode", stream=log) as bar:
        bar.advance()
    assert log.getvalue().splitlines() == ["agent a:   0% (0/3 episodes)", "agent a:  33% (1/3 episodes)"]


def test_quiet_shows_nothing_and_a_terminal_gets_a_bar():
    log = io.StringIO()
    with Progress("x", total=10, stream=log, enabled=False) as bar:
        bar.update(10)
        assert bar.mode == "off"
    assert log.getvalue() == ""
    screen = Terminal()
    assert is_terminal(screen) and not is_terminal(io.StringIO())
    with Progress("x", total=10, unit="job", stream=screen) as bar:
        assert bar.mode == "bar"
        bar.update(10)
    assert "10/10" in screen.getvalue()


@pytest.mark.slow
def test_compare_into_a_pipe_logs_plain_bounded_progress(tmp_path):
    argv = ["compare", "--jobs", "400", "--load", "30", "--cluster", "small", "--policies", "fifo+fair,fifo+tune",
            "--out", str(tmp_path / "c")]
    done = subprocess.run([sys.executable, "-m", "synergy_gym", *argv], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "\r" not in done.stdout
    progress = [line for line in done.stderr.splitlines() if PROGRESS_LINE.search(line)]
    assert 2 <= len(progress) <= 2 * 12, done.stderr  # two runs, at most a line per 10 % and the first and last
    assert sum(line.endswith("(400/400 jobs)") for line in progress) == 2
    assert "fifo+tune" in done.stdout and "mean JCT" in done.stderr
