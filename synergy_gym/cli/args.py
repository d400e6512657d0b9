"""Parsers for command-line values shared by the ``synergy-gym`` subcommands.

Three argparse actions keep a user's intent from being lost silently: :class:`OnceList` refuses a list
option given twice (``--seeds 1 --seeds 2`` would otherwise run seed 2 alone), :class:`OnceFile` a
file option given twice (``--config``), and :class:`NonEmptyPath` refuses an empty path (``--out ""`` is
``Path(".")``, the current folder).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, overload

from synergy_gym.errors import SynergyGymError

#: The largest seed: results tables and Parquet files hold seeds as 64-bit integers.
MAX_SEED = 2**63 - 1
#: At most this many seeds are listed one by one (:func:`parse_seed_list`); commands that guard their
#: size (``compare``, ``sweep``) take :func:`parse_seeds`, which lists none, and refuse by estimate instead.
MAX_LISTED_SEEDS = 1_000_000


def list_items(text: str, flag: str) -> list[str]:
    """``"a, b,c"`` → ``["a", "b", "c"]``, each stripped; an empty item (``1,,2``, ``fifo+tune,``, ``,``) is an
    error naming the flag, rather than dropped without a word; ``text`` that is not text is an error too."""
    if not isinstance(text, str):
        raise SynergyGymError(f"{flag} must be text, comma-separated values, got {text!r}")
    if not text.strip():
        raise SynergyGymError(f"{flag} {text!r}: empty; give one or more values separated by commas")
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise SynergyGymError(f"{flag} {text!r}: an empty item (two commas in a row, or one at an end); "
                              "give one value between commas")
    return items


def _span(part: range) -> int:
    """Seeds in a step-1 range (``len`` overflows past ``sys.maxsize``; this does not)."""
    return max(0, part.stop - part.start)


class SeedList(Sequence[int]):
    """Seeds as ranges, never expanded: ``len`` of ``0..10**12`` is immediate, and iterating yields them in order.

    ``size`` is the number of seeds; ``len`` is the same, capped at ``sys.maxsize``.
    """

    def __init__(self, parts: Sequence[range]) -> None:
        self.parts = tuple(p for p in parts if _span(p))
        self.size = sum(_span(p) for p in self.parts)

    def __len__(self) -> int:
        return min(self.size, sys.maxsize)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self.size
        if not 0 <= index < self.size:
            raise IndexError("seed index out of range")
        for part in self.parts:
            if index < _span(part):
                return part.start + index
            index -= _span(part)
        raise IndexError("seed index out of range")  # pragma: no cover

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(self.parts)

    def __repr__(self) -> str:
        return f"SeedList({list(self.parts)!r})"


def _without(part: range, covered: list[range]) -> list[range]:
    """``part`` (a step-1 range) less every range of ``covered``, as ranges in order."""
    pieces = [part]
    for seen in covered:
        pieces = [piece for p in pieces
                  for piece in (range(p.start, min(p.stop, seen.start)), range(max(p.start, seen.stop), p.stop))
                  if _span(piece)]
    return pieces


def parse_seeds(text: str, flag: str = "--seed") -> SeedList:
    """``"42"``, ``"1,2,3"`` or ``"0..9"`` (inclusive) → seeds, de-duplicated in order, without listing them.

    ``0..10**12`` costs nothing until iterated: a command can estimate its size from ``len``
    and refuse before any seed is listed. A range that ends before it starts (``5..3``) is an
    error naming it, alone or beside others.
    """
    parts: list[range] = []
    items = list_items(text, flag)
    try:
        for part in items:
            if ".." in part:
                lo, hi = (int(x) for x in part.split(".."))
                parts.append(range(lo, hi + 1))
            else:
                parts.append(range(int(part), int(part) + 1))
    except ValueError:
        raise SynergyGymError(f"{flag} {text!r}: expected integers like 42, 1,2,3 or 0..9") from None
    reversed_part = next((p for p in parts if not _span(p)), None)
    if reversed_part is not None:
        raise SynergyGymError(f"{flag} {text!r}: the seed range is empty: {reversed_part.start}..{reversed_part.stop - 1} "
                              "ends before it starts")
    if any(p.start < 0 for p in parts):  # every part holds a seed now
        raise SynergyGymError(f"{flag} {text!r}: seeds must be non-negative")
    if any(p.stop - 1 > MAX_SEED for p in parts):
        raise SynergyGymError(f"{flag} {text!r}: seeds must be at most {MAX_SEED:,} (64-bit integers)")
    unique: list[range] = []
    for span in parts:
        unique += _without(span, unique)
    return SeedList(unique)


def parse_seed_list(text: str, flag: str = "--seed", limit: int = MAX_LISTED_SEEDS) -> tuple[int, ...]:
    """:func:`parse_seeds`, listed: at most ``limit`` seeds (more is refused before any is listed)."""
    seeds = parse_seeds(text, flag)
    if seeds.size > limit:
        raise SynergyGymError(f"{flag} {text!r}: {seeds.size:,} seeds; at most {limit:,}")
    return tuple(seeds)


def check_job_count(value: int | None, flag: str = "--jobs") -> int | None:
    """A job count of at least 1 and at most :data:`~synergy_gym.sim.workload.MAX_JOBS` (None passes)."""
    from synergy_gym.sim.workload import MAX_JOBS

    if value is None:
        return None
    if value < 1:
        raise SynergyGymError(f"{flag} must be a positive integer, got {value}")
    if value > MAX_JOBS:
        raise SynergyGymError(f"{flag} {value} exceeds the maximum of {MAX_JOBS:,}")
    return value


def parse_float_list(text: str, flag: str = "--load", minimum: float = 0.0, unit: str = "") -> tuple[float, ...]:
    """``"5,7,9"`` → positive finite numbers, each once (``9,9.0`` is an error naming the repeated value), none
    below ``minimum`` (its ``unit`` in the error: ``" jobs an hour"``)."""
    import math

    parts = list_items(text, flag)
    try:
        values = tuple(float(v) for v in parts)
    except ValueError:
        raise SynergyGymError(f"{flag} {text!r}: expected numbers like 5,7,9") from None
    if any(not math.isfinite(v) or v <= 0 for v in values):
        raise SynergyGymError(f"{flag} {text!r}: values must be positive numbers")
    if low := [part for part, value in zip(parts, values) if value < minimum]:
        raise SynergyGymError(f"{flag} {text!r}: {low[0]} is below the minimum of {minimum:g}{unit}")
    seen: dict[float, str] = {}
    for part, value in zip(parts, values):
        if value in seen:
            same = "is given twice" if part == seen[value] else f"is the same number as {seen[value]}"
            raise SynergyGymError(f"{flag} {text!r}: {part} {same}; give each value once")
        seen[value] = part
    return values


def parse_loads(text: str) -> tuple[float, ...]:
    """``--load 5,7,9``: arrival rates in jobs an hour (:func:`parse_float_list`), none below
    :data:`~synergy_gym.sim.workload.MIN_JOBS_PER_HOUR`."""
    from synergy_gym.sim.workload import MIN_JOBS_PER_HOUR

    return parse_float_list(text, "--load", minimum=MIN_JOBS_PER_HOUR, unit=" jobs an hour")


#: The namespace attribute where :class:`OnceList` notes the options already given (per parse).
_GIVEN = "_once_given"


class OnceList(argparse.Action):
    """A list option (``--seeds 1,2``) taken once: a second one is a one-line usage error naming both values.

    argparse keeps only the last of a repeated option, so ``--seeds 1 --seeds 2`` would run seed 2 alone.
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        flag = option_string or self.option_strings[-1]  # as typed
        given: dict[str, str] = namespace.__dict__.setdefault(_GIVEN, {})
        if self.dest in given:
            first = given[self.dest]
            parser.error(f"{flag} given twice ({first!r}, {values!r}); give one list: {flag} {first},{values}")
        given[self.dest] = str(values)
        setattr(namespace, self.dest, values)


class NonEmptyPath(argparse.Action):
    """A path option whose value may not be empty (``Path("")`` is ``.``: ``--out ""`` would write here)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if not str(values).strip():
            flag = option_string or (self.option_strings[-1] if self.option_strings else self.dest)  # as typed
            parser.error(f"{flag} {values!r}: the value is empty; give a path (. is the current folder)")
        setattr(namespace, self.dest, Path(values))


class OnceFile(argparse.Action):
    """A file option taken once (``--config``): a second one is a one-line usage error naming both files.

    argparse keeps only the last, so ``--config a.toml --config b.toml`` would drop ``a.toml``'s settings silently.
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        flag = option_string or self.option_strings[-1]  # as typed
        given: dict[str, str] = namespace.__dict__.setdefault(_GIVEN, {})
        if self.dest in given:
            parser.error(f"{flag} given twice ({given[self.dest]!r}, {values!r}); the second would replace the first: "
                         f"put the settings in one file")
        given[self.dest] = str(values)
        setattr(namespace, self.dest, Path(values))


def usage_error(parser: argparse.ArgumentParser, exc: Exception) -> int:
    """Print ``exc`` as argparse prints its own errors, ``PROG: error: …`` on one line of stderr, and return 2 (the
    exit status of a usage error): a ``python -m`` module's checks then read like its parser's."""
    print(f"{parser.prog}: error: {exc}", file=sys.stderr)
    return 2
