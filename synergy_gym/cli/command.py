"""The ``synergy-gym`` command.

Subcommands are plug-ins: each installed package that declares an entry point
in the ``synergy_gym.commands`` group (``compare`` from ``baselines``, …)
registers its own parser. The core thus runs every command without importing
the packages built on it. A register function is light (a ``commands`` module): it names the
command's own module, imported only when that command runs (:class:`RunLater`), so that
``--help`` and each command import only what they use. Errors in user input print one line and exit with
status 2; nothing is written. Every ``--help`` text is plain (:mod:`.help_text`), and
each command finds the command line as given in ``args.command_line`` (for the
``meta`` of its results, :mod:`.results_json`). A value that starts with '-' (``--window -1:10``)
is taken as the option's value (:func:`join_dash_values`), so that it gets the value's own error.
Ctrl-C ends a command with status 130 and one line, also where it arrived inside a numba kernel
(which reports it as a ``SystemError``; :func:`~synergy_gym.cli.staging.interrupt_of`). A package of the
namespace that cannot be imported (a source checkout's ``./synergy_gym`` hiding the installed one) is one
line too (:func:`missing_package`).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, entry_points, version
from pathlib import Path
from typing import NoReturn, TextIO

from synergy_gym.cli.help_text import plain_parser
from synergy_gym.cli.staging import interrupt_of, sigterm_as_interrupt
from synergy_gym.errors import Interrupted, SynergyGymError

#: The packages installed from the repository's ``agents/``, ``baselines/`` and ``traces/`` folders.
OUTER_PACKAGES = ("synergy_gym.agents", "synergy_gym.baselines", "synergy_gym.traces")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are a single line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


@dataclass(frozen=True)
class RunLater:
    """A command's ``run``: ``module.function(args)``, with ``module`` imported only when the command runs.

    A command's ``register`` (its entry point, called for every ``synergy-gym`` command line and
    ``--help``) thus imports none of what the command itself needs (pandas, matplotlib, PyTorch, …).
    """

    module: str
    function: str = "main"

    def __call__(self, args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(self.module), self.function)(args) or 0)


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


@dataclass
class _OneLineWarnings:
    """``warnings.showwarning`` as one line on stderr, each message once a command (an environment built per
    policy or seed reads its trace, and warns, each time)."""

    shown: set[str]

    def __call__(
        self, message: Warning | str, category: type[Warning], filename: str, lineno: int,
        file: TextIO | None = None, line: str | None = None,
    ) -> None:
        del category, filename, lineno, file, line
        if str(message) not in self.shown:
            self.shown.add(str(message))
            print(f"synergy-gym: warning: {message}", file=sys.stderr)


def _options(parser: argparse.ArgumentParser) -> tuple[set[str], set[str], dict[str, argparse.ArgumentParser]]:
    """A parser's option strings, those that take exactly one value, and its subcommands' parsers."""
    known: set[str] = set()
    valued: set[str] = set()
    commands: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            commands.update(action.choices)
            continue
        known.update(action.option_strings)
        if action.option_strings and action.nargs in (None, 1):
            valued.update(action.option_strings)
    return known, valued, commands


def _resolve(token: str, known: set[str]) -> str | None:
    """The option ``token`` names: itself, or the one long option it abbreviates (as argparse allows)."""
    name = token.split("=", 1)[0]
    if name in known:
        return name
    if name.startswith("--"):
        matches = [option for option in known if option.startswith(name)]
        if len(matches) == 1:
            return matches[0]
    return None


def join_dash_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``--window -1:10`` → ``--window=-1:10``: a value that starts with '-' stays the option's value.

    argparse takes a token starting with '-' for an option unless it is a plain negative number,
    so ``--window -1:10`` or ``--split -10/100/10`` would fail with "expected one argument" instead
    of the value's own error. An option that takes one value, followed by a token that starts with
    '-' and is not an option of its (sub)command, is joined with it; ``--`` ends the options.
    """
    out: list[str] = []
    known, valued, commands = _options(parser)
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        out.append(token)
        i += 1
        if token == "--":
            out += tokens[i:]
            break
        if token in commands and not token.startswith("-"):
            known, valued, commands = _options(commands[token])
            continue
        option = _resolve(token, known) if token.startswith("-") and "=" not in token else None
        if option in valued and i < len(tokens):
            value = tokens[i]
            if value.startswith("-") and value != "--" and _resolve(value, known) is None:
                out[-1] = f"{token}={value}"
                i += 1
            elif not value.startswith("-"):
                out.append(value)  # an ordinary value: never taken for a subcommand's name
                i += 1
    return out


def missing_package(exc: ModuleNotFoundError) -> str | None:
    """The one-line problem when ``exc`` says one of :data:`OUTER_PACKAGES` is not found (None: any other module).

    Installed from a wheel (``pip install .``), ``python -m synergy_gym`` run in the source checkout imports the
    checkout's ``./synergy_gym`` (the current folder comes first on ``sys.path``), which holds the core but not
    ``agents/``, ``baselines/`` or ``traces/``: those live beside it and install under the namespace. A module
    missing inside one of those packages, or any other, is a bug, not this, and is not caught.
    """
    if exc.name not in OUTER_PACKAGES:
        return None
    core = Path(__file__).resolve().parents[1]  # the synergy_gym folder imported
    checkout = core.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / exc.name.split(".")[1]).is_dir():
        try:
            shown = "./synergy_gym" if checkout == Path.cwd().resolve() else str(core)
        except OSError:  # the current folder was removed
            shown = str(core)
        return (f"cannot import {exc.name}: the folder {shown} (a source checkout) hides the installed package; "
                "run from another folder, or install with pip install -e .")
    return f"cannot import {exc.name}: it is missing from the installed synergy_gym ({core}); reinstall synergy-gym"


def _refuse_unknown(parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]) -> NoReturn:
    """Exit with the command's own usage error for arguments it does not know, and its hint where it has one
    (``set_defaults(unknown_hint=…)``: ``train`` names a setting that only a ``--config`` file sets)."""
    command = getattr(args, "command", None)
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    owner = subparsers[0].choices.get(command, parser) if command and subparsers else parser
    hint = getattr(args, "unknown_hint", None)
    owner.error(f"unrecognized arguments: {' '.join(unknown)}{hint(unknown) if hint else ''}")
    raise AssertionError("unreachable: ArgumentParser.error exits")  # pragma: no cover


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()  # loads every command's register function, from all three packages
    except ModuleNotFoundError as exc:
        problem = missing_package(exc)
        if problem is None:
            raise
        print(f"synergy-gym: error: {problem}", file=sys.stderr)
        return 2
    argv = list(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(join_dash_values(parser, argv))
    if unknown:
        _refuse_unknown(parser, args, unknown)
    args.command_line = ["synergy-gym", *argv]
    if args.version:
        print(f"synergy-gym {package_version()}")
        return 0
    if args.command is None:  # asked for nothing but the list (as `synergy-gym --help` is): on stdout, for a pager
        print(command_list(parser))
        return 0
    try:
        with warnings.catch_warnings(), sigterm_as_interrupt():
            warnings.showwarning = _OneLineWarnings(set())
            return int(args.run(args) or 0)
    except (SynergyGymError, Warning) as exc:  # a Warning raised: python -W error
        print(f"synergy-gym {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # a command's own module, imported when it runs (RunLater)
        problem = missing_package(exc)
        if problem is None:
            raise
        print(f"synergy-gym {args.command}: error: {problem}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SystemError) as exc:  # Ctrl-C inside a numba kernel comes back as a SystemError
        interrupt = interrupt_of(exc)
        if interrupt is None:
            raise
        kept = str(interrupt) if isinstance(interrupt, Interrupted) else "nothing written"  # Interrupted says what
        print(f"synergy-gym {args.command}: interrupted; {kept}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (``… | head``): stop quietly, as a shell tool does
        _silence_stdout()
        return 141  # 128 + SIGPIPE


def console_main() -> int:
    """The ``synergy-gym`` script: :func:`main`, then the heap frozen for a quick exit.

    A command leaves hundreds of thousands of objects (numba's compiler, matplotlib, the
    simulation) that the interpreter's last garbage collections would walk for a tenth of a
    second or more before the process ends; :func:`gc.freeze` keeps them out of those walks.
    Every command has written its files by then; reference counting still closes what it left open.
    """
    code = main()
    gc.freeze()
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises no second BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (captured output)
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
