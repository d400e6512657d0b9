"""Reading trace and workload files with one-line errors.

Every reader of the ``traces`` package reads its file through
:func:`read_file`: a file whose name ends in ``.gz``, ``.bz2``, ``.xz`` or
``.zip`` (one file inside) is decompressed, as pandas would; the content must
be UTF-8 text (a leading byte-order mark is dropped). Whatever goes wrong on the
way – a missing or unreadable file, compressed data that is truncated or not of
the kind its name says, bytes that are not UTF-8 text, a NUL byte – is a
:class:`~synergy_gym.errors.WorkloadError` whose one line starts with the
file's path (and names the line where it is known).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import re
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from synergy_gym.cli.files import require_file
from synergy_gym.errors import WorkloadError
from synergy_gym.sim.validation import check_text

if TYPE_CHECKING:
    import pandas as pd

#: Compressed files, by the end of their name (as pandas infers them).
COMPRESSIONS: dict[str, str] = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zip": "zip"}

_FIELDS = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def compression(path: Path) -> str | None:
    """``"gzip"``, ``"bzip2"``, ``"xz"`` or ``"zip"`` by the file's name; None for a plain file."""
    return COMPRESSIONS.get(path.suffix.lower())


def plain_suffix(path: Path) -> str:
    """The file's extension without a compression suffix (``.json`` for ``log.json.gz``)."""
    return Path(path.stem).suffix.lower() if compression(path) else path.suffix.lower()


@contextmanager
def _opened(path: Path) -> Iterator[IO[bytes]]:
    """The file's (decompressed) bytes as a stream; every failure becomes a one-line WorkloadError."""
    fmt = compression(path)
    try:
        if fmt == "zip":
            with zipfile.ZipFile(path) as archive:
                members = [m for m in archive.infolist() if not m.is_dir()]
                if len(members) != 1:
                    raise WorkloadError(f"{path}: a .zip file must hold exactly one file; it holds {len(members)}")
                with archive.open(members[0]) as fh:
                    yield fh
        elif fmt is not None:
            opener: Any = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}[fmt]
            with opener(path, "rb") as fh:
                yield fh
        else:
            with path.open("rb") as fh:
                yield fh
    except EOFError:
        raise WorkloadError(
            f"{path}: the {fmt or 'compressed'} data is truncated (the file ends before its end-of-stream marker)"
        ) from None
    except (OSError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
        if fmt is None or (isinstance(exc, OSError) and exc.errno is not None):
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise WorkloadError(f"{path}: cannot be read: {reason}") from None
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise WorkloadError(f"{path}: not valid {fmt} data, though its name ends in {path.suffix} ({reason})") from None


def read_file(path: str | Path, kind: str) -> bytes:
    """The whole (decompressed) content of the file at ``path``, checked to be UTF-8 text.

    ``kind`` names the file when it does not exist ("workload file", "trace file").
    """
    path = require_file(path, kind, WorkloadError)
    with _opened(path) as fh:
        data = fh.read()
    return check_text(str(path), data, WorkloadError)


def first_line(path: Path, kind: str, limit: int = 1 << 16) -> str:
    """The file's first line that is not blank, as pandas skips blank lines (within ``limit`` bytes), decoded."""
    path = require_file(path, kind, WorkloadError)
    with _opened(path) as fh:
        head = fh.read(limit)
    if not head.strip():
        raise WorkloadError(f"{path}: the file is empty")
    whole_lines = head[: head.rfind(b"\n") + 1] or head  # no character cut in two
    text = check_text(str(path), whole_lines, WorkloadError).decode("utf-8")
    return next((line for line in text.split("\n") if line.strip()), "").rstrip("\r")


def parse_csv(path: Path, data: bytes, **kwargs: Any) -> pd.DataFrame:
    """``data`` (from :func:`read_file`) parsed as CSV; a malformed table is a one-line WorkloadError."""
    import pandas as pd

    if kwargs.get("header", "infer") == "infer" and "names" not in kwargs:
        _refuse_repeated_columns(path, data)
    try:
        frame = pd.read_csv(io.BytesIO(data), **kwargs)
    except pd.errors.EmptyDataError:
        raise WorkloadError(
            f"{path}: not a readable CSV: the file is empty (expected a header row naming the columns)"
        ) from None
    except pd.errors.ParserError as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        fields = _FIELDS.search(text)
        if fields:
            expected, line, saw = fields.groups()
            long_row = _long_record(data, int(expected))  # pandas counts records, not lines: a quoted cell spans lines
            line, saw = (str(long_row[0]), str(long_row[1])) if long_row else (line, saw)
            raise WorkloadError(f"{path}: row {line} has {saw} cells, but the header names {expected} columns") from None
        raise WorkloadError(f"{path}: not a readable CSV: {text}") from None
    return frame


def _records(data: bytes) -> Iterator[tuple[int, list[str]]]:
    """The CSV's records that are not blank lines (as pandas skips them), each with the line it starts on."""
    reader = csv.reader(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=""))
    while True:
        start = reader.line_num + 1  # a quoted cell may span lines
        record = next(reader, None)
        if record is None:
            return
        if record and not (len(record) == 1 and not record[0].strip()):
            yield start, record


def _long_record(data: bytes, width: int) -> tuple[int, int] | None:
    """(line, cells) of the first data record with more than ``width`` cells; None if Python's csv finds none."""
    try:
        rows = _records(data)
        next(rows, None)  # the header
        return next(((line, len(record)) for line, record in rows if len(record) > width), None)
    except csv.Error:
        return None


def _refuse_repeated_columns(path: Path, data: bytes) -> None:
    """Refuse a header that names a column twice (pandas would read the second as ``name.1``, silently unused)."""
    try:
        first = next(_records(data), None)
    except csv.Error:
        return  # what Python's csv cannot read pandas reports itself
    names = [name.strip() for name in (first[1] if first else [])]
    repeated = next((name for i, name in enumerate(names) if name and name in names[:i]), None)
    if repeated is not None:
        raise WorkloadError(f"{path}: column {repeated!r} appears twice in the header")


def refuse_a_longer_first_row(path: Path, data: bytes, names: Sequence[str] | None = None) -> None:
    """Refuse a first data row with more cells than the header (or ``names``) names columns.

    :func:`parse_csv` reads such a table with its first cells as the index and every column shifted (a later
    row that is too long it refuses); call this after checking the table's columns.
    """
    width = len(names) if names is not None else None
    try:
        for start, record in _records(data):
            if width is None:
                width = len(record)  # the header
                continue
            if len(record) > width:
                raise WorkloadError(f"{path}: row {start} has {len(record)} cells, but the header names {width} columns")
            return
    except csv.Error:
        return  # what Python's csv cannot read (a cell over its size limit) pandas has read: nothing to refuse here


def read_job_table(path: str | Path, required: Sequence[str], kind: str, what: str | None = None) -> pd.DataFrame:
    """The CSV at ``path`` as a DataFrame with at least one row, the ``required`` columns and no row longer than the header.

    ``kind`` names the file in errors ("workload file", "trace file"); ``what``
    (e.g. "a Philly CSV trace") is what a file without the required columns is not.
    """
    path = Path(path)
    data = read_file(path, kind)
    frame = parse_csv(path, data)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        not_what = f"not {what}: " if what else ""
        spaced = [repr(c) for c in frame.columns if isinstance(c, str) and c != c.strip() and c.strip() in missing]
        hint = f" (the header has {', '.join(spaced)}: names are matched exactly)" if spaced else ""
        raise WorkloadError(f"{path}: {not_what}missing column(s) {', '.join(missing)}{hint}")
    refuse_a_longer_first_row(path, data)
    if frame.empty:
        raise WorkloadError(f"{path}: no jobs (the file has only its header row)")
    return frame
