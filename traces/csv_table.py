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
    """The file's first line (at most ``limit`` bytes of it), decompressed and decoded."""
    path = require_file(path, kind, WorkloadError)
    with _opened(path) as fh:
        head = fh.read(limit)
    if not head.strip():
        raise WorkloadError(f"{path}: the file is empty")
    whole_lines = head[: head.rfind(b"\n") + 1] or head  # no character cut in two
    text = check_text(str(path), whole_lines, WorkloadError).decode("utf-8")
    return text.split("\n", 1)[0].rstrip("\r")


def parse_csv(path: Path, data: bytes, **kwargs: Any) -> pd.DataFrame:
    """``data`` (from :func:`read_file`) parsed as CSV; a malformed table is a one-line WorkloadError."""
    import pandas as pd

    try:
        return pd.read_csv(io.BytesIO(data), **kwargs)
    except pd.errors.EmptyDataError:
        raise WorkloadError(
            f"{path}: not a readable CSV: the file is empty (expected a header row naming the columns)"
        ) from None
    except pd.errors.ParserError as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        fields = _FIELDS.search(text)
        if fields:
            expected, line, saw = fields.groups()
            raise WorkloadError(f"{path}: row {line} has {saw} cells, but the header names {expected} columns") from None
        raise WorkloadError(f"{path}: not a readable CSV: {text}") from None


def read_job_table(path: str | Path, required: Sequence[str], kind: str, what: str | None = None) -> pd.DataFrame:
    """The CSV at ``path`` as a DataFrame with at least one row and the ``required`` columns.

    ``kind`` names the file in errors ("workload file", "trace file"); ``what``
    (e.g. "a Philly CSV trace") is what a file without the required columns is not.
    """
    path = Path(path)
    frame = parse_csv(path, read_file(path, kind))
    missing = [c for c in required if c not in frame.columns]
    if missing:
        not_what = f"not {what}: " if what else ""
        raise WorkloadError(f"{path}: {not_what}missing column(s) {', '.join(missing)}")
    if frame.empty:
        raise WorkloadError(f"{path}: no jobs (the file has only its header row)")
    return frame
