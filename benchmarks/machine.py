"""The machine a benchmark ran on, as its first line says (:func:`machine_line`): the CPU, the cores it
may use, the load, Python's version."""

from __future__ import annotations

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


def machine_line() -> str:
    """A benchmark's first line: ``machine: <CPU>, <n> cores, load average …; Python …; on core 1``."""
    return (f"machine: {cpu_model()}, {os.cpu_count()} cores, load average {load_average()}; "
            f"Python {platform.python_version()}; {cores()}")
