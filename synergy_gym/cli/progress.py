"""Progress of the commands: a bar on a terminal, plain lines in a log, nothing with --quiet.

:class:`Progress` is what every command shows while it works (``compare``'s runs,
``evaluate``'s episodes, ``train``'s steps when its output is not a terminal). On
a terminal it is a tqdm bar, redrawn in place. When the stream is not a terminal
(a file, a pipe, a CI log) a redrawn bar would leave carriage returns and hundreds
of partial lines; it prints instead one plain line each time the work passes another
``every`` percent (10 by default) but at most one a second, one at the start when the
total is known and one at the end, so a piece of work adds at most 100 / ``every`` + 2
lines (a quick one two). Disabled (``--quiet``) it shows nothing.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

#: Percent of the work between two lines when the stream is not a terminal.
LINE_EVERY_PERCENT = 10
#: Seconds at least between two such lines before the end (a quick piece of work gets its first and last only).
LINE_MIN_INTERVAL_S = 1.0


def is_terminal(stream: Any) -> bool:
    """``stream`` is an interactive terminal (a redrawn bar is readable there)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # a closed stream
        return False


class Progress:
    """Progress of one piece of work: ``update(done, total)`` as it goes, ``close()`` at the end.

    ``desc`` names the work, ``unit`` what is counted ("job", "episode", "step").
    ``total`` may be unknown at first and may change (``update`` takes it). ``leave``:
    the terminal bar stays once closed (a line per piece of work) or disappears.
    Usable as a context manager, which closes it.
    """

    def __init__(self, desc: str, total: int | None = None, unit: str = "it", enabled: bool = True,
                 stream: TextIO | None = None, leave: bool = True, every: int = LINE_EVERY_PERCENT,
                 min_interval_s: float = LINE_MIN_INTERVAL_S) -> None:
        self.desc, self.total, self.unit, self.every = desc, total, unit, max(1, int(every))
        self.done = 0
        self.min_interval_s = min_interval_s
        self._last_line = time.monotonic()
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self._bar: Any = None
        self._printed_step = 0  # the last multiple of ``every`` percent a line was printed for
        self._printed_done = -1
        self._closed = False
        if enabled and is_terminal(self.stream):
            from tqdm.auto import tqdm

            self._bar = tqdm(desc=desc, total=total, unit=unit, leave=leave, file=self.stream, mininterval=0.5)
        elif enabled and total:
            self._line()  # the work has started (its total known)

    @property
    def mode(self) -> str:
        """``"bar"`` (a terminal), ``"lines"`` (anything else) or ``"off"``."""
        return "off" if not self.enabled else "bar" if self._bar is not None else "lines"

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` units of ``total`` (None: the total as before) are finished."""
        if total is not None:
            self.total = int(total)
        self.done = int(done)
        if self._bar is not None:
            if total is not None:
                self._bar.total = self.total
            self._bar.update(self.done - self._bar.n)
        elif self.enabled and self.total:
            step = min(100, 100 * self.done // self.total) // self.every
            if step > self._printed_step and (self.done >= self.total
                                              or time.monotonic() - self._last_line >= self.min_interval_s):
                self._printed_step = step
                self._line()

    def advance(self, n: int = 1) -> None:
        """``n`` more units are finished."""
        self.update(self.done + n)

    def close(self) -> None:
        """The work has ended: the bar closes; in lines, the last line is printed unless it already was."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self._printed_done != self.done:
            self._line()

    def _line(self) -> None:
        if self.total:
            units = self.unit if self.total == 1 else f"{self.unit}s"
            text = f"{self.desc}: {100 * self.done // self.total:3d}% ({self.done:,}/{self.total:,} {units})"
        else:
            text = f"{self.desc}: {self.done:,} {self.unit if self.done == 1 else self.unit + 's'}"
        print(text, file=self.stream, flush=True)
        self._printed_done = self.done
        self._last_line = time.monotonic()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
