"""Argument types the benchmarks share: a bad value ends in argparse's one-line error (exit status 2)
naming the option and the value."""

from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """An argparse ``type=``: a whole number ≥ 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def positive_float(text: str) -> float:
    """An argparse ``type=``: a number > 0 (``inf`` allowed, ``nan`` not)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value
