"""How the kernels of :mod:`synergy_gym.sim.kernels` are compiled, and where the compiled code is cached.

:func:`kernel` compiles a function with `numba <https://numba.pydata.org>`_ on its first call
and caches the machine code on disk, so that later processes only load it. The cache never goes
inside the installed package (an installed tree stays exactly as pip wrote it):

* ``NUMBA_CACHE_DIR`` set: numba's own setting is used;
* otherwise ``SYNERGY_GYM_CACHE_DIR`` if set, else the per-user cache folder
  (``platformdirs.user_cache_dir("synergy-gym")``, e.g. ``~/.cache/synergy-gym`` on Linux), in
  its ``numba`` sub-folder; ``SYNERGY_GYM_CACHE_DIR=""`` turns caching off;
* a folder that cannot be created or written turns caching off too (each process then compiles).

Without numba installed, :func:`kernel` returns the function unchanged: the kernels run as plain
Python (correct, slow).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: Environment variable naming the cache folder ("" turns caching off).
CACHE_ENV = "SYNERGY_GYM_CACHE_DIR"


def cache_dir() -> Path | None:
    """The folder compiled kernels are cached in (None: not cached, or numba's ``NUMBA_CACHE_DIR``)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        if not configured:
            return None
        folder = Path(configured)
    else:
        import platformdirs

        folder = Path(platformdirs.user_cache_dir("synergy-gym"))
    folder = folder / "numba"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def kernel(function: Callable[..., Any]) -> Any:
    """``function`` compiled by numba on first call (a numba dispatcher), cached as :func:`cache_dir` says."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; a test runs this path in a subprocess
        return function
    if os.environ.get("NUMBA_CACHE_DIR"):
        return numba.njit(cache=True)(function)
    folder = cache_dir()
    if folder is None:
        return numba.njit(cache=False)(function)
    with _numba_cache_dir(folder):  # numba fixes a function's cache path when it is decorated
        return numba.njit(cache=True)(function)


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
