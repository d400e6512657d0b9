"""Whether an optional extra's libraries are installed, checked before a command starts.

``synergy-gym train``, and ``evaluate`` or ``benchmark`` with a ``--model``, need the ``rl`` extra
(PyTorch, Stable-Baselines3, sb3-contrib). Without it they stop at once, before anything is
written, with one line naming the extra and the missing modules (:func:`require_extra`) instead of
a traceback halfway through. Each module is looked up with :func:`importlib.util.find_spec`, which
finds it without importing it: the check costs a few file look-ups, not PyTorch's start-up.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

from synergy_gym.errors import SynergyGymError

#: The modules of the ``rl`` extra that the agents' commands import.
RL_MODULES = ("torch", "stable_baselines3", "sb3_contrib")
#: What training imports besides: SB3 logs to TensorBoard.
TRAIN_MODULES = (*RL_MODULES, "tensorboard")


class MissingExtraError(SynergyGymError, ImportError):
    """An optional extra that is not installed (a one-line error for the command line, an ``ImportError`` too)."""


def importable(module: str) -> bool:
    """Whether ``module`` (a top-level name) can be imported, found without importing it."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: an import blocked on purpose
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra(extra: str, modules: Sequence[str] = RL_MODULES) -> str | None:
    """The line saying that ``extra`` is needed and which of its ``modules`` are missing (None: all are found)."""
    missing = [module for module in modules if not importable(module)]
    if not missing:
        return None
    return f'needs the {extra} extra: pip install "synergy-gym[{extra}]" (missing: {", ".join(missing)})'


def require_extra(extra: str = "rl", modules: Sequence[str] = RL_MODULES) -> None:
    """Raise :class:`MissingExtraError` unless every one of ``modules`` (``extra``'s) can be imported."""
    problem = missing_extra(extra, modules)
    if problem is not None:
        raise MissingExtraError(problem)


def exit_if_missing(prog: str, extra: str, modules: Sequence[str]) -> None:
    """A script's check: ``PROG: error: needs the … extra …`` on stderr and exit status 2 unless every one of
    ``modules`` (``extra``'s) can be imported."""
    problem = missing_extra(extra, modules)
    if problem is not None:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        raise SystemExit(2)
