"""MkDocs hook: the command-line page's usage lines and option tables, generated from the parsers.

A page line ``<!-- cli-options: NAME -->`` becomes the usage of ``synergy-gym NAME`` and a table of
its arguments and options, built from the same argparse parser the command uses
(:func:`synergy_gym.cli.command.build_parser`, which loads every subcommand from its entry point).
The page therefore cannot fall behind the code; ``tests/test_docs.py`` checks that every
subcommand has its section and that the prose names no option a parser does not have.
"""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

PLACEHOLDER = re.compile(r"^<!-- cli-options: ([\w-]+) -->$", re.M)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|])")
_WIDTH = "100"


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every ``synergy-gym`` subcommand's parser, by name."""
    from synergy_gym.cli.command import build_parser

    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def escape(text: str) -> str:
    """``text`` as literal Markdown inside a table cell (HTML's own characters as entities)."""
    text = " ".join(text.split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def option_names(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string (``--seed``, ``-h``) and positional name of ``parser``."""
    names: list[str] = []
    for action in parser._actions:
        names += list(action.option_strings) or [action.dest]
    return names


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    metavar = action.metavar or (action.dest if not action.option_strings else action.dest.upper())
    text = f"`{metavar}`" if isinstance(metavar, str) else " ".join(f"`{m}`" for m in metavar)
    if action.nargs in ("*", "+"):
        text += " …"
    return text


def _usage(parser: argparse.ArgumentParser) -> str:
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = _WIDTH
    try:
        return parser.format_usage().strip()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def options_markdown(name: str, parser: argparse.ArgumentParser) -> str:
    """The usage block and the argument table of one subcommand."""
    formatter = parser._get_formatter()
    rows = ["| argument | value | meaning |", "|---|---|---|"]
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        flags = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
        text = formatter._expand_help(action) if action.help else ""
        if action.required and action.option_strings:
            text = f"(required) {text}"
        rows.append(f"| {flags} | {_value(action)} | {escape(text)} |")
    return "\n".join([f"```text\n{_usage(parser)}\n```", "", *rows])


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if not PLACEHOLDER.search(markdown):
        return markdown
    parsers = subcommand_parsers()

    def table(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in parsers:
            raise ValueError(f"cli-options: no subcommand {name!r}; there are {', '.join(sorted(parsers))}")
        return options_markdown(name, parsers[name])

    return PLACEHOLDER.sub(table, markdown)
