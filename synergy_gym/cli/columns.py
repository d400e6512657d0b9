"""Text tables: a value in a column of fixed width."""

from __future__ import annotations


def fit(text: str, width: int, left: bool = False) -> str:
    """``text`` aligned in a column ``width`` wide; a wider one overflows, but a space still parts it from its neighbour."""
    if len(text) < width:
        return text.ljust(width) if left else text.rjust(width)
    return text + " " if left else " " + text
