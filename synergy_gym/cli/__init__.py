"""The ``synergy-gym`` command: the entry point (:mod:`.command`), shared argument parsers
(:mod:`.args`), output files (:mod:`.files`) and figures (:mod:`.plots`)."""

from synergy_gym.cli.command import build_parser, console_main, main

__all__ = ["build_parser", "console_main", "main"]
