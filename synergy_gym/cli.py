"""The ``synergy-gym`` command.

Subcommands are plug-ins: each installed package that declares an entry point
in the ``synergy_gym.commands`` group (``compare`` from ``baselines``, …)
registers its own parser. The core thus runs every command without importing
the packages built on it. Errors in user input print one line and exit with
status 2; nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from importlib.metadata import entry_points
from typing import NoReturn, Sequence

from synergy_gym.errors import SynergyGymError


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are a single line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="synergy-gym", description="Multi-tenant GPU cluster scheduling simulator and gym.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    for ep in sorted(entry_points(group="synergy_gym.commands"), key=lambda e: e.name):
        ep.load()(sub)
    return parser


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"synergy-gym: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            return int(args.run(args) or 0)
    except SynergyGymError as exc:
        print(f"synergy-gym {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"synergy-gym {args.command}: interrupted; nothing written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
