"""Writing files so that a reader never sees a partial one, and checking output paths up front."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from synergy_gym.errors import PathError, SynergyGymError


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``/proc/self/status``).

    Elsewhere it is set and restored at once (``os.umask`` has no read-only form).
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask



def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to a temporary file beside ``path``, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes files private; use the usual mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


# -- checking paths before any work -----------------------------------------------------
#
# Every command checks the paths it will write (``--out``, ``--json``, …) and the
# files it must read (``--resume``) before it loads, simulates or trains
# anything, so a bad path costs nothing and leaves nothing behind: the checks
# create nothing. A folder the user names (``--out DIR``) need not exist, but
# its parent must (as with ``mkdir``): a typo in a parent is refused, not
# created. A command's default folder (``runs/<command>-<time>``) is created
# with any missing parents (like ``mkdir -p``). A file the user names
# (``--json FILE``) goes into an existing folder, or into the command's own
# output folder. A file (not a folder) anywhere on the way, or a folder that
# cannot be written, is an error.


def is_writable_dir(path: str | os.PathLike) -> bool:
    """``path`` is a folder this process can create entries in.

    Besides :func:`os.access`, a folder with no write bit at all in its mode
    counts as read-only for every user, root included (permission bits do not
    stop root), so that a ``chmod 555`` folder is refused alike everywhere.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) and mode & 0o222 != 0 and os.access(path, os.W_OK | os.X_OK)


def _shown(path: Path) -> str:
    return str(Path.cwd()) if str(path) == "." else str(path)


def _folder_problem(path: Path, what: str = "", create_parents: bool = True) -> str | None:
    """Why ``path`` cannot be used or created as a writable folder (None if it can).

    Without ``create_parents`` its parent must already be a folder.
    """
    if os.path.isdir(path):
        return None if is_writable_dir(path) else f"{what}folder {_shown(path)} is not writable"
    if os.path.lexists(path):
        if os.path.islink(path):
            return f"{what}{path} is a broken symbolic link"
        return f"{what}{path} is a file, not a folder"
    current = path
    while current.parent != current:
        current = current.parent
        if os.path.isdir(current):
            if not is_writable_dir(current):
                return f"cannot create it: folder {_shown(current)} is not writable"
            if not create_parents and current != path.parent:
                return f"{what or 'its parent '}folder {path.parent} does not exist"
            return None
        if os.path.lexists(current):
            kind = "a broken symbolic link" if os.path.islink(current) else "a file, not a folder"
            return f"parent {current} is {kind}"
    return "cannot create it: none of its parent folders exists"


def check_output_dir(
    path: str | os.PathLike, flag: str, contents: tuple[str, ...] = (), create_parents: bool = False
) -> Path:
    """Refuse (with a one-line :class:`PathError`) an output folder that cannot be written.

    ``path`` must be a writable folder or creatable (see above; missing parents
    only with ``create_parents``, for a command's default folder). ``contents``
    are the names the command writes inside it (``"cells/"`` for a folder); an
    existing one of the wrong kind – a folder where a file goes, a file or
    read-only folder where a folder goes – is refused too.
    """
    path = Path(path)
    problem = _folder_problem(path, create_parents=create_parents)
    if problem is None and os.path.isdir(path):
        for name in contents:
            target = path / name.rstrip("/")
            if not os.path.lexists(target):
                continue
            if name.endswith("/"):
                problem = _folder_problem(target)
            elif os.path.isdir(target):
                problem = f"{target} is a folder, but the command writes a file there"
            if problem is not None:
                break
    if problem is not None:
        raise PathError(f"{flag} {path}: {problem}")
    return path


def check_output_file(path: str | os.PathLike, flag: str, folders: tuple[tuple[str | os.PathLike, str], ...] = (),
                      outputs: Sequence[str] = (), inputs: Sequence[tuple[object, str]] = ()) -> Path:
    """Refuse an output file that is a folder or whose folder does not exist or cannot be written.

    ``folders`` are the command's output folders as ``(path, flag)`` (already
    checked); the file may not be one of them, but may go inside one – though not onto one of the files the
    command writes there, ``outputs`` (names; one ending in ``/`` a folder of them). ``inputs``, as
    ``(path or None, flag)``, are files the command reads: the file may not be one of them.
    """
    path = Path(path)
    if os.path.isdir(path):
        raise PathError(f"{flag} {path}: is a folder, not a file")
    for given, input_flag in inputs:
        if not isinstance(given, (str, os.PathLike)) or not os.path.isfile(given):  # (a --cluster preset is no file)
            continue
        if os.path.realpath(given) == os.path.realpath(path):
            raise PathError(f"{flag} {path}: is the {input_flag} file this command reads; name another file")
    for folder, folder_flag in folders:
        if os.path.abspath(folder) == os.path.abspath(path):
            raise PathError(f"{flag} {path}: is also the {folder_flag} folder")
        target = os.path.realpath(path)
        for name in outputs:
            own = os.path.realpath(Path(folder) / name.rstrip("/"))
            if target == own or (name.endswith("/") and target.startswith(own + os.sep)):
                raise PathError(f"{flag} {path}: is the command's own {name} in {folder_flag} {folder}; name another file")
    if any(os.path.abspath(folder) == os.path.abspath(path.parent) for folder, _ in folders):
        return path  # it goes into an output folder the command creates
    problem = _folder_problem(path.parent, what="parent ", create_parents=False)
    if problem is None and not os.path.isdir(path.parent):
        problem = f"parent folder {path.parent} does not exist"
    if problem is not None:
        raise PathError(f"{flag} {path}: {problem}")
    return path


def require_file(path: str | os.PathLike, kind: str, error: type[SynergyGymError] = PathError) -> Path:
    """``path`` when it is a file; otherwise ``error`` saying that it does not exist or is a folder.

    ``kind`` names the input in the message ("workload file", "--cluster file").
    """
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        raise error(f"{kind} {str(path)!r} is a folder, not a file")
    if path.exists():
        raise error(f"{kind} {str(path)!r} is not a regular file")
    raise error(f"{kind} {str(path)!r} does not exist")


def check_input_file(path: str | os.PathLike, flag: str) -> Path:
    """Refuse an input file that does not exist, is a folder or cannot be read."""
    path = require_file(path, flag, PathError)
    if not os.access(path, os.R_OK):
        raise PathError(f"{flag} {str(path)!r} is not readable")
    return path


def unused_path(folder: Path, stem: str, suffix: str = "") -> Path:
    """``folder/<stem><suffix>``, or the first of ``<stem>-2<suffix>``, ``<stem>-3<suffix>``, … that does not exist."""
    path, n = Path(folder) / f"{stem}{suffix}", 1
    while path.exists():
        n += 1
        path = Path(folder) / f"{stem}-{n}{suffix}"
    return path


def timestamped_dir(stem: str, parent: Path = Path("runs")) -> Path:
    """A command's default output folder, ``runs/<stem>-<YYYYmmdd-HHMMSS>`` – with ``-2``, ``-3``, … when that name
    is taken: a command run again within the same second (a loop) gets a folder of its own, not the last one's."""
    return unused_path(parent, f"{stem}-{datetime.now():%Y%m%d-%H%M%S}")


def claim_new_folder(path: Path, default_name: bool, flag: str = "--out") -> list[Path]:
    """Create the folder ``path``, which did not exist when the command checked its paths, for this process alone.

    Returns the folders made: its missing parents, then the folder (for :func:`remove_empty_folders`, should
    nothing be written). A default name (``default_name``) another process took meanwhile gives the next free
    one, ``-2``, …, as :func:`claim_folder`; a folder the user named is refused in one line.
    """
    path = Path(path)
    made: list[Path] = []
    parent = path.parent
    while not parent.exists() and parent.parent != parent:
        made.insert(0, parent)
        parent = parent.parent
    if default_name:
        return [*made, claim_folder(path)]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir()
    except FileExistsError:
        raise PathError(f"{flag} {path}: was made by another command since this one checked it; give another "
                        f"{flag}") from None
    return [*made, path]


def remove_empty_folders(made: Sequence[Path]) -> None:
    """Remove the folders of :func:`claim_new_folder` again, innermost first, those that are still empty."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            pass


def claim_folder(path: Path) -> Path:
    """Create the folder ``path`` for this process alone – or, when another has made it meanwhile (the same default
    name chosen in the same second), the first free ``path-2``, ``path-3``, …; returns the folder made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate = path
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            candidate = unused_path(path.parent, path.name)
