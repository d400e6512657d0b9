"""The trace formats :func:`synergy_gym.traces.loader.load_trace` reads, and how a header tells them apart
(without importing the readers)."""

from __future__ import annotations

FORMATS: tuple[str, ...] = ("auto", "philly-csv", "philly-json", "alibaba", "helios")


def trace_format_of(columns: set[str]) -> str | None:
    """The trace format whose columns a header has, or None."""
    if {"timestamp", "duration", "num_gpus"} <= columns:
        return "philly-csv"
    if {"submit_time", "gpu_num"} <= columns:
        return "helios"
    if "job_name" in columns or "inst_id" in columns:
        return "alibaba"
    return None
