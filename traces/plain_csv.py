"""A workload file of plain cells read into columns without pandas, as pandas would read it.

Most workload files are a table of plain cells: no quotes, no ``\\r`` but at a line's end, no blank line, every row
as long as the header, every number written as digits with at most one decimal point and at most
:data:`MAX_DIGITS` digits, no text that pandas reads as missing. :func:`plain_columns` reads such a
file with ``str.split`` and gives exactly the columns pandas' ``read_csv`` gives (an integer
column as int64, a column with a decimal point as float64, text as Python strings): a number of
at most 15 digits and no exponent is an exact integer divided by an exact power of ten, one
correctly rounded operation both in pandas' parser and in numpy's text parser (``np.fromstring``,
which converts as Python's ``float`` does; ``tests/traces/test_plain_csv.py`` checks it). Any other file gets
None, and the caller reads it with pandas (which also names what is wrong with it).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

import numpy as np

#: The most digits a number read here may have (any such decimal is exact as int / 10^k).
MAX_DIGITS = 15
#: Cells pandas reads as missing by default (``pandas.io.parsers`` ``STR_NA_VALUES``).
NA_TEXT = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
    "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
})
#: Deletes the characters of plain numbers (and the commas between them): what is left is not plain.
_DELETE_NUMBER_CHARACTERS = str.maketrans("", "", "0123456789.,")
#: More characters between two commas than a plain number has.
_TOO_LONG = re.compile(f"[^,]{{{MAX_DIGITS + 1}}}")
_TWO_POINTS = re.compile(r"\.[0-9]*\.")


def plain_columns(text: str, header: Sequence[str], text_columns: Collection[str]) -> dict[str, np.ndarray] | None:
    """The columns of the CSV ``text`` (its first line is ``header``), or None if it is not plain.

    Columns named in ``text_columns`` are object arrays of strings; the others numbers.
    """
    if "\r" in text:  # lines may end in \r\n; a \r elsewhere is for pandas
        text = text.replace("\r\n", "\n")
    if '"' in text or "\r" in text:
        return None
    text = text.removesuffix("\n")
    width = len(header)
    if not _commas_per_line_are(text, width - 1):  # also: no blank line
        return None
    cells = text.replace("\n", ",").split(",")  # one list: no list per row for the garbage collector to walk
    if cells[:width] != list(header) or len(cells) == width:
        return None
    body = cells[width:]
    out: dict[str, np.ndarray] = {}
    for k, name in enumerate(header):
        values = _text(body[k::width]) if name in text_columns else _numbers(body[k::width])
        if values is None:
            return None
        out[name] = values
    return out


def _commas_per_line_are(text: str, commas: int) -> bool:
    """Whether every line of ``text`` has exactly ``commas`` commas."""
    raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)  # in UTF-8 no other character holds these bytes
    line_ends = np.flatnonzero(raw == ord("\n"))
    at = np.flatnonzero(raw == ord(","))
    per_line = np.diff(np.searchsorted(at, line_ends), prepend=0, append=at.size)
    return bool(np.all(per_line == commas))


def _text(cells: Sequence[str]) -> np.ndarray | None:
    if not NA_TEXT.isdisjoint(cells):
        return None
    column = np.empty(len(cells), dtype=object)
    column[:] = cells
    return column


def _numbers(cells: Sequence[str]) -> np.ndarray | None:
    joined = "," + ",".join(cells) + ","
    if joined.translate(_DELETE_NUMBER_CHARACTERS) or ",," in joined or ",." in joined or ".," in joined \
            or _TOO_LONG.search(joined) or _TWO_POINTS.search(joined):
        return None
    # numpy's text parser (Python's correctly rounded conversion, in one C loop)
    values = np.fromstring(joined[1:-1], dtype=np.float64 if "." in joined else np.int64, sep=",")
    return values if values.size == len(cells) else None
