"""The machine a benchmark ran on, as its first line says: the CPU, the cores it may use, the load.

Also the argument types the benchmarks share (:func:`positive_int`, :func:`positive_float`): a bad
value ends in argparse's one-line error (exit status 2) that names the option and the value.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cores() -> str:
    """The cores this process may run on: ``on core 1`` when pinned (``taskset -c 1``)."""
    if not hasattr(os, "sched_getaffinity"):
        return f"{os.cpu_count()} cores, not pinned"
    allowed = sorted(os.sched_getaffinity(0))
    return f"on core {allowed[0]}" if len(allowed) == 1 else f"on {len(allowed)} cores (not pinned)"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (``unknown`` where the system has none)."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except (OSError, AttributeError):
        return "unknown"


def positive_int(text: str) -> int:
    """An argparse ``type=``: a whole number ≥ 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def positive_float(text: str) -> float:
    """An argparse ``type=``: a number > 0 (``inf`` allowed, ``nan`` not)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value
