"""A command's output files appear all together or not at all.

:func:`staged_outputs` gives a command a temporary folder beside its output folder to write
everything into; when the block ends normally the files move into place, and when it ends with an
error, Ctrl-C or SIGTERM (:func:`sigterm_as_interrupt` turns SIGTERM into Ctrl-C for the duration
of a command) the temporary folder is removed, so "nothing written" is true:

* an output folder that does not exist yet is created by renaming the temporary folder (one
  atomic step). If another command makes it while this one runs (the same default name, chosen
  in the same second by two processes), this command's files go to a folder of their own (``-2``,
  …), not into the other's: a command's default folder (``default_name``) quietly, as
  :attr:`Staging.final` says; a folder the user named with a one-line error saying where;
* into an existing output folder (``--out`` naming an empty or reused folder) each file moves by
  an atomic rename, after everything has been written: the window in which only some of them are
  there is a handful of renames, not the run.

Parent folders created for the outputs (``runs/`` of a default ``runs/compare-<time>``) are removed
again when the outputs are discarded, if nothing else was put in them.

A file the command writes outside its folder (``--json FILE``) is staged beside its target and
moved in the same final step. A new output folder gets the mode ``mkdir`` would give it (``0o777``
less the umask), not the temporary folder's private one.

:func:`interrupt_of` tells a Ctrl-C that arrived wrapped (a numba kernel interrupted returns
``SystemError``, its ``__context__`` the ``KeyboardInterrupt``) from a real error.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from synergy_gym.cli.files import current_umask, unused_path
from synergy_gym.errors import PathError


class Staging:
    """Where a command writes its outputs before they move into place (see :func:`staged_outputs`)."""

    def __init__(self, target: Path, default_name: bool = False, new: bool | None = None) -> None:
        self.target = Path(target)
        #: Where the folder's files went (known after :meth:`commit`): ``target``, or for a default name that another
        #: command took meanwhile, the first free ``target-2``, ``target-3``, ….
        self.final = self.target
        self._default_name = default_name
        # a folder made since the command checked its paths (``new``; by default, now) is not its to write into
        self._new = not os.path.lexists(self.target) if new is None else new
        self._made: list[Path] = []  # parent folders created here, removed again by discard()
        self._make_parents(self.target.parent)
        #: The temporary folder standing in for ``target``.
        self.folder = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.", suffix=".partial", dir=self.target.parent))
        # mkdtemp makes the folder private (0700); renamed into place it would stay so: give it mkdir's usual mode.
        os.chmod(self.folder, 0o777 & ~current_umask())
        self._extra: list[tuple[Path, Path]] = []  # (staged file, final path) outside the folder
        self._removed: list[Path] = []  # files of ``target`` removed when the staged files move in

    def _make_parents(self, folder: Path) -> None:
        """Create ``folder`` and its missing parents, remembering which were made."""
        missing = []
        while not folder.exists() and folder.parent != folder:
            missing.append(folder)
            folder = folder.parent
        for path in reversed(missing):
            path.mkdir(exist_ok=True)
            self._made.append(path)

    def file(self, final: Path) -> Path:
        """A staged path for ``final``: inside the folder when ``final`` is in ``target``, else beside ``final``."""
        final = Path(final)
        try:
            return self.folder / final.resolve().relative_to(self.target.resolve())
        except ValueError:
            self._make_parents(final.parent)
            fd, staged = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent)
            os.close(fd)
            self._extra.append((Path(staged), final))
            return Path(staged)

    def remove(self, final: Path) -> None:
        """Remove the file ``final`` (an earlier run's output the command no longer writes) at :meth:`commit` – unless
        the outputs went to a folder of their own (:attr:`final`)."""
        self._removed.append(Path(final))

    def commit(self) -> None:
        """Move every staged file into place, and remove the files given to :meth:`remove`."""
        if not self.target.exists():
            try:
                os.rename(self.folder, self.target)
            except OSError:  # made meanwhile (with files: an empty folder is replaced)
                if not self.target.exists():
                    raise
                self._lost_the_race()
        elif self._new:  # made by another command while this one ran
            self._lost_the_race()
        else:
            for path in sorted(self.folder.rglob("*")):
                if path.is_file():
                    final = self.target / path.relative_to(self.folder)
                    final.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(path, final)
            shutil.rmtree(self.folder, ignore_errors=True)
        for staged, final in self._extra:
            os.replace(staged, final)
        if self.final == self.target:  # (files of another command's folder are not this one's to remove)
            for path in self._removed:
                path.unlink(missing_ok=True)

    def _lost_the_race(self) -> None:
        """The new output folder was made by another command while this one ran (the same default name, chosen in the
        same second by two processes): this command's files go to a folder of their own, not into the other's. For a
        default name that is all (:attr:`final` says where); for a folder the user named, a one-line error says where
        (not a traceback and a ``.partial`` folder left)."""
        while True:
            alt = unused_path(self.target.parent, self.target.name)
            try:
                os.rename(self.folder, alt)
                break
            except OSError:
                if not alt.exists():
                    raise
        self.final = alt
        if self._default_name:
            return
        for staged, _ in self._extra:
            staged.unlink(missing_ok=True)
        raise PathError(f"{self.target} was made by another command while this one ran; this one's outputs are in "
                        f"{alt}" + (" (its files outside the folder were not written)" if self._extra else ""))

    def discard(self) -> None:
        """Remove everything staged."""
        shutil.rmtree(self.folder, ignore_errors=True)
        for staged, _ in self._extra:
            staged.unlink(missing_ok=True)
        for folder in reversed(self._made):  # the parents made for the outputs, if still empty
            try:
                folder.rmdir()
            except OSError:
                pass


@contextmanager
def staged_outputs(target: Path, default_name: bool = False, new: bool | None = None) -> Iterator[Staging]:
    """Stage a command's outputs for the folder ``target``; they move into place only if the block succeeds.

    ``default_name``: ``target`` is the command's default folder, which moves to a free name of its own if another
    command takes it meanwhile (:attr:`Staging.final`). ``new``: ``target`` did not exist when the command checked
    its paths (:func:`is_new`; by default: when the block starts), so that one made during the run is not written into.
    """
    staging = Staging(target, default_name, new)
    try:
        yield staging
    except BaseException:
        staging.discard()
        raise
    staging.commit()


def is_new(folder: Path) -> bool:
    """``folder`` does not exist yet: what a command notes when it checks its paths, for :func:`staged_outputs`."""
    return not os.path.lexists(folder)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises KeyboardInterrupt (as Ctrl-C does), so clean-up code runs.

    Outside the main thread, or where the process ignores SIGTERM, nothing changes.
    """
    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        yield
        return
    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt_of(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C ``exc`` is or stands for: itself, or for a ``SystemError`` the ``KeyboardInterrupt`` that is its
    ``__cause__`` or ``__context__`` (numba's compiled functions report an interrupt inside them that way); else None."""
    if isinstance(exc, KeyboardInterrupt):
        return exc
    if isinstance(exc, SystemError):
        for inner in (exc.__cause__, exc.__context__):
            if isinstance(inner, KeyboardInterrupt):
                return inner
    return None
