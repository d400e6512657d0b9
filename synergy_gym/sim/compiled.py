"""How the kernels of :mod:`synergy_gym.sim.kernels` are compiled, and where the compiled code is cached.

:func:`kernel` compiles a function with `numba <https://numba.pydata.org>`_ on its first call
and caches the machine code on disk, so that later processes only load it. numba itself is imported
then too, not when the kernels' module is (:class:`LazyKernel`): a process that runs no kernel
(``synergy-gym --help``, ``import synergy_gym``) pays for neither. The cache never goes inside the
installed package (an installed tree stays exactly as pip wrote it):

* ``NUMBA_CACHE_DIR`` set: numba's own setting is used, with numba's checks only (after a change
  of the kernels' code, empty that folder); one that cannot be created or written turns caching off
  (numba would cache beside the package's modules instead);
* otherwise ``SYNERGY_GYM_CACHE_DIR`` if set, else the per-user cache folder
  (``platformdirs.user_cache_dir("synergy-gym")``, e.g. ``~/.cache/synergy-gym`` on Linux), in
  its ``numba`` sub-folder, under a hash of the kernels' modules (:func:`kernel_sources_digest`:
  numba would keep a kernel compiled with an older version of a kernel it calls from another
  file); ``SYNERGY_GYM_CACHE_DIR=""`` turns caching off;
* a folder that cannot be created or written turns caching off too (each process then compiles);
* a cached file that cannot be read (truncated by a crash or a full disk) is compiled and written anew.

Without numba installed, the kernels stay the functions as written: they run as plain Python
(correct, slow).

Loading a cached kernel sets up numba's compiler once per process. Part of that set-up,
``numba.np.arraymath``, checks that a BLAS is there for ``np.dot`` by importing
``scipy.linalg.cython_blas``, which imports all of ``scipy.linalg`` (a quarter of a second or
more, for linear algebra no kernel does): :func:`_import_numba` lets that check see a
placeholder for the module instead, and takes it away again at once (:func:`_blas_check_without_scipy_linalg`).
"""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: Environment variable naming the cache folder ("" turns caching off).
CACHE_ENV = "SYNERGY_GYM_CACHE_DIR"


def cache_dir() -> Path | None:
    """The folder compiled kernels are cached in (None: not cached, or numba's ``NUMBA_CACHE_DIR``).

    It is a sub-folder of the project's ``numba`` cache named by :func:`kernel_sources_digest`:
    numba checks a cached kernel against its own file only, not against the kernels of other
    files compiled into it (a Tune placement kernel holds the ledger's), so code that changes
    anywhere among the kernels' modules gets a fresh folder.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    folder = project_cache_folder("numba")
    if folder is None:
        return None
    folder = folder / kernel_sources_digest()
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def _usable_folder(folder: Path) -> bool:
    """Whether ``folder`` is (or can be made) a folder this process can write in."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


#: The packages whose modules define kernels (their ``*.py`` files make the cache's digest).
KERNEL_PACKAGES = ("sim", "env")


@functools.cache  # the same for the life of the process: read once
def kernel_sources_digest(root: Path | None = None) -> str:
    """A short hash of the source of every module of :data:`KERNEL_PACKAGES` under ``root`` (the installed
    ``synergy_gym`` by default): their content, not their times."""
    import hashlib

    root = Path(__file__).resolve().parents[1] if root is None else root
    digest = hashlib.sha1()
    for package in KERNEL_PACKAGES:
        for path in sorted((root / package).glob("*.py")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def project_cache_folder(name: str) -> Path | None:
    """The sub-folder ``name`` of the project's cache folder, created if need be.

    The cache folder is ``SYNERGY_GYM_CACHE_DIR`` if set, else the per-user one
    (``platformdirs.user_cache_dir("synergy-gym")``). None: caching is off
    (``SYNERGY_GYM_CACHE_DIR=""``) or the folder cannot be created or written.
    """
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        if not configured:
            return None
        root = Path(configured)
    else:
        import platformdirs

        root = Path(platformdirs.user_cache_dir("synergy-gym"))
    folder = root / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def kernel(function: Callable[..., Any] | None = None, *, inline: bool = False) -> Any:
    """``function`` compiled by numba on first call (a numba dispatcher), cached as :func:`cache_dir` says.

    Until its first use the kernel is a :class:`LazyKernel`, and numba is not imported.
    ``@kernel(inline=True)`` marks a small helper that numba copies into the kernels calling it
    (``inline="always"``) rather than calling it: a call passes the ledger's tuple of arrays by value.
    """
    if function is None:
        return lambda f: LazyKernel(f, inline)
    return LazyKernel(function, inline)


class LazyKernel:
    """A kernel whose numba dispatcher is made on first use (a call or an attribute, e.g. ``py_func``).

    Kernels call one another through their module's globals, which numba must find to be
    dispatchers when it compiles them; so the first use of any kernel of a module puts the
    dispatchers of all of them in its place, in the module (``kernels.run_rounds`` is numba's
    dispatcher from then on, with nothing in between). A reference taken before that forwards to it.
    """

    __slots__ = ("function", "inline", "dispatcher")

    def __init__(self, function: Callable[..., Any], inline: bool = False) -> None:
        self.function = function
        self.inline = inline
        self.dispatcher: Any = None

    def compiled(self) -> Any:
        """numba's dispatcher of the function (the function itself without numba)."""
        if self.dispatcher is None:
            namespace = self.function.__globals__
            for name, value in list(namespace.items()):
                if isinstance(value, LazyKernel):
                    if value.dispatcher is None:
                        value.dispatcher = _dispatcher(value.function, value.inline)
                    namespace[name] = value.dispatcher
            if self.dispatcher is None:  # not a global of its module
                self.dispatcher = _dispatcher(self.function, self.inline)
        return self.dispatcher

    def __call__(self, *args: Any) -> Any:
        return self.compiled()(*args)

    def __getattr__(self, name: str) -> Any:
        if name in LazyKernel.__slots__:  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"<kernel {self.function.__qualname__}, not compiled yet>"


def _dispatcher(function: Callable[..., Any], inline: bool = False) -> Any:
    """``function`` compiled by numba on first call, cached as :func:`cache_dir` says (unchanged without numba)."""
    numba = _import_numba()
    if numba is None:  # pragma: no cover - numba is a dependency; a test runs this path in a subprocess
        return function
    options: dict[str, Any] = {"inline": "always"} if inline else {}
    if os.environ.get("NUMBA_CACHE_DIR"):  # numba's own folder; one it cannot use it would swap for the package's
        if not _usable_folder(Path(os.environ["NUMBA_CACHE_DIR"])):
            return numba.njit(cache=False, **options)(function)
        return _recompiling_corrupt_files(numba.njit(cache=True, **options)(function))
    folder = cache_dir()
    if folder is None:
        return numba.njit(cache=False, **options)(function)
    with _numba_cache_dir(folder):  # numba fixes a function's cache path when it is decorated
        return _recompiling_corrupt_files(numba.njit(cache=True, **options)(function))


def _recompiling_corrupt_files(dispatcher: Any) -> Any:
    """``dispatcher`` with a cache that compiles again where a cached file cannot be read.

    numba fails on a truncated or corrupt cache file (a process killed while writing it, a full disk,
    a network file system) with an unpickling traceback, and so did every later process until the
    folder was emptied. Its index is emptied instead, so the kernel is compiled and cached anew.
    """
    dispatcher._cache = _tolerant_cache_class()(dispatcher.py_func)
    return dispatcher


@functools.cache
def _tolerant_cache_class() -> type:
    """numba's ``FunctionCache`` that takes a cached file it cannot load for a miss (made on first use: numba is
    imported only then)."""
    from numba.core.caching import FunctionCache

    class TolerantFunctionCache(FunctionCache):  # numba has no type information: Any
        def load_overload(self, sig: Any, target_context: Any) -> Any:
            try:
                return super().load_overload(sig, target_context)
            except Exception:  # noqa: BLE001 - any unreadable cached file: a miss; numba compiles and saves anew
                try:
                    self.flush()  # an empty index, so that the save does not read the broken one again
                except OSError:
                    pass
                return None

    return TolerantFunctionCache


def _import_numba() -> Any:
    """numba (None when it is not installed), with the part of its compiler set-up that checks for a BLAS done."""
    try:
        import numba
    except ImportError:
        return None
    if "numba.np.arraymath" not in sys.modules:
        with _blas_check_without_scipy_linalg():
            import numba.np.arraymath  # noqa: F401 - numba imports it anyway, on the first call of a kernel
    return numba


#: The module numba's BLAS check imports (``numba.np.linalg.ensure_blas``).
_CYTHON_BLAS = "scipy.linalg.cython_blas"


@contextmanager
def _blas_check_without_scipy_linalg() -> Iterator[None]:
    """While it lasts, ``import scipy.linalg.cython_blas`` finds a placeholder rather than importing ``scipy.linalg``.

    numba's check (``_HAVE_BLAS``) then still imports ``scipy`` itself and reads its build
    configuration, so it fails as before without SciPy. The placeholder is removed when the
    block ends: a later import (numba compiling ``np.dot``, the user's own code) gets the real module.
    """
    if _CYTHON_BLAS in sys.modules:  # already imported: nothing to save
        yield
        return
    sys.modules[_CYTHON_BLAS] = types.ModuleType(_CYTHON_BLAS)
    try:
        yield
    finally:
        del sys.modules[_CYTHON_BLAS]


@contextmanager
def _numba_cache_dir(folder: Path) -> Iterator[None]:
    """numba's cache folder set to ``folder`` for the duration (restored after, for the user's own numba code)."""
    from numba.core import config as numba_config

    config: Any = numba_config  # its settings are set at run time, unknown to type checkers
    saved = config.CACHE_DIR
    config.CACHE_DIR = str(folder)
    try:
        yield
    finally:
        config.CACHE_DIR = saved
