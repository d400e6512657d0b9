"""Plain ``--help`` texts: the reStructuredText of docstrings turned into what a terminal shows.

Command descriptions are taken from module docstrings, which are written for the
documentation (double backquotes, Sphinx roles such as :mod: or :func:). :func:`plain`
removes that markup; :func:`plain_parser` applies it to a parser's description, epilog
and option help, and to those of its subcommands, so every ``--help`` reads as text.
"""

from __future__ import annotations

import argparse
import re

#: ``:role:`text <target>```, ``:role:`~pkg.mod.name``` or ``:role:`name``` (any Sphinx role, with a domain or not).
_ROLE = re.compile(r":(?:[A-Za-z]+:)?[A-Za-z]+:`([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)
_INTERPRETED = re.compile(r"(?<![`\w])`([^`\n]+)`(?![`\w])")
_STRONG = re.compile(r"(?<![\w*])\*\*(\S(?:[^*\n]*\S)?)\*\*(?![\w*])")
_EMPHASIS = re.compile(r"(?<![\w*])\*(\w(?:[^*\n]*\w)?)\*(?![\w*])")


def _role_text(match: re.Match[str]) -> str:
    text = match.group(1).strip()
    titled = re.fullmatch(r"(.+?)\s*<[^<>]+>", text, re.DOTALL)
    if titled:  # :func:`the text <target>` shows the text
        return titled.group(1)
    if text.startswith("~"):  # :func:`~pkg.mod.name` shows name
        return text[1:].rsplit(".", 1)[-1]
    return text.lstrip(".!")


def plain(text: str | None) -> str | None:
    """``text`` without reST markup: ``x`` and `x` → x, :role:`~a.b` → b, :role:`a.b` → a.b, *x* and **x** → x."""
    if not text:
        return text
    text = _ROLE.sub(_role_text, text)
    text = _LITERAL.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _STRONG.sub(r"\1", text)
    return _EMPHASIS.sub(r"\1", text)


def plain_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser``'s texts and those of its subcommands plain (:func:`plain`), in place; returns it."""
    parser.description = plain(parser.description)
    parser.epilog = plain(parser.epilog)
    for action in parser._actions:
        if action.help not in (None, argparse.SUPPRESS):
            action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain(choice.help)
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                plain_parser(sub)
    return parser
