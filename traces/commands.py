"""The command line of ``synergy-gym trace-stats`` (the ``synergy_gym.commands`` entry point).

Building the parser imports only this light module; :mod:`synergy_gym.traces.trace_stats`, with
pandas and matplotlib, is imported when the command runs (:class:`~synergy_gym.cli.command.RunLater`).
"""

from __future__ import annotations

import argparse

from synergy_gym.cli.args import NonEmptyPath
from synergy_gym.cli.command import RunLater
from synergy_gym.traces.formats import FORMATS

TRACE_STATS_DESCRIPTION = "``synergy-gym trace-stats PATH``: what a job trace contains."


def register_trace_stats(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("trace-stats", help="summarise a job trace", description=TRACE_STATS_DESCRIPTION)
    p.add_argument("path", action=NonEmptyPath, help="trace file (or an Alibaba trace folder)")
    p.add_argument("--format", dest="fmt", default="auto", choices=FORMATS)
    p.add_argument("--all-durations", action="store_true", help="do not apply the paper's duration filter to Philly traces")
    p.add_argument("--out", action=NonEmptyPath, default=None,
                   help="folder for trace_stats.png (default: runs/trace-stats-<timestamp>)")
    p.add_argument("--allow-large", action="store_true",
                   help="read a trace estimated to need over an hour or too much memory (default: refused)")
    p.set_defaults(run=RunLater("synergy_gym.traces.trace_stats"))
