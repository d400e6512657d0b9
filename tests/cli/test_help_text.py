"""Every ``--help`` is plain text: no reStructuredText from the docstrings it is built from."""

from __future__ import annotations

import argparse

import pytest

from synergy_gym.cli import build_parser, main
from synergy_gym.cli.help_text import plain

MARKUP = ("``", ":mod:", ":func:", ":class:", ":data:", ":attr:", ":meth:")


def _commands() -> list[str]:
    actions = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(name for action in actions for name in action.choices)


COMMANDS = _commands()


def test_every_command_is_covered():
    assert {"compare", "sweep", "evaluate", "train", "trace-stats"} <= set(COMMANDS)


@pytest.mark.parametrize("argv", [["--help"], *([c, "--help"] for c in COMMANDS)], ids=lambda a: " ".join(a))
def test_help_has_no_rest_markup(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: synergy-gym")
    for markup in MARKUP:
        assert markup not in text, f"{markup!r} in synergy-gym {' '.join(argv)}:\n{text}"


def test_plain_turns_markup_into_text():
    assert plain("``synergy-gym compare``: run it") == "synergy-gym compare: run it"
    assert plain("see :func:`~synergy_gym.agents.evaluate.run_policies` and :mod:`synergy_gym.cli`") == \
        "see run_policies and synergy_gym.cli"
    assert plain(":class:`the env <synergy_gym.env.SynergyEnv>`, :py:func:`.main`") == "the env, main"
    assert plain("the seed *is* the workload seed, **always**; `x` stays x") == \
        "the seed is the workload seed, always; x stays x"
    assert plain("Synergy-* environments, 2 * 3, fifo+tune") == "Synergy-* environments, 2 * 3, fifo+tune"
    assert plain(None) is None and plain("") == ""
