"""The ``synergy-gym`` command.

Subcommands are plug-ins: each installed package that declares an entry point
in the ``synergy_gym.commands`` group (``compare`` from ``baselines``, …)
registers its own parser. The core thus runs every command without importing
the packages built on it. Errors in user input print one line and exit with
status 2; nothing is written. Every ``--help`` text is plain (:mod:`.help_text`), and
each command finds the command line as given in ``args.command_line`` (for the
``meta`` of its results, :mod:`.results_json`).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, entry_points, version
from typing import NoReturn, TextIO

from synergy_gym.cli.help_text import plain_parser
from synergy_gym.cli.staging import sigterm_as_interrupt
from synergy_gym.errors import Interrupted, SynergyGymError


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are a single line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="synergy-gym", description="Multi-tenant GPU cluster scheduling simulator and gym.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for ep in sorted(entry_points(group="synergy_gym.commands"), key=lambda e: e.name):
        ep.load()(sub)
    return plain_parser(parser)


def package_version() -> str:
    try:
        return version("synergy-gym")
    except PackageNotFoundError:  # running from a source tree that is not installed
        from synergy_gym import __version__

        return __version__


def command_list(parser: argparse.ArgumentParser) -> str:
    """Usage and one line per command (its name and the help its register function gave)."""
    commands = [
        (choice.dest, choice.help or "")
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in action._choices_actions
    ]
    width = max((len(name) for name, _ in commands), default=0)
    lines = [parser.format_usage().rstrip(), "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in commands]
    lines += ["", f"run '{parser.prog} COMMAND --help' for a command's options"]
    return "\n".join(lines)


def _one_line_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int,
    file: TextIO | None = None, line: str | None = None,
) -> None:
    """``warnings.showwarning`` as one line on stderr: only the message is shown."""
    del category, filename, lineno, file, line
    print(f"synergy-gym: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.command_line = ["synergy-gym", *argv]
    if args.version:
        print(f"synergy-gym {package_version()}")
        return 0
    if args.command is None:
        print(command_list(parser), file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings(), sigterm_as_interrupt():
            warnings.showwarning = _one_line_warning
            return int(args.run(args) or 0)
    except SynergyGymError as exc:
        print(f"synergy-gym {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Interrupted as exc:  # the command says what it kept
        print(f"synergy-gym {args.command}: interrupted; {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(f"synergy-gym {args.command}: interrupted; nothing written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
