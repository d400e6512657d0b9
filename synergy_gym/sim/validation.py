"""The one check every settings dataclass uses for its positive (or non-negative) numbers and counts.

:func:`check_positive` refuses, with a one-line :class:`SynergyGymError` that
names the field and the value, anything that is not a finite number greater
than zero (or ≥ 0 with ``allow_zero``): a bool, a string, NaN, ±inf; with
``integer`` also a number with a fractional part. It returns the value as an
``int`` (``integer``) or a ``float``, so a caller may store it normalised::

    check_positive("num_jobs", 300.0, integer=True)        # -> 300
    check_positive("round_s", 0, unit="seconds")           # ConfigError: round_s must be a positive number of seconds, got 0
    check_positive("env kwarg max_rounds", 1.5, integer=True)
    # ConfigError: env kwarg max_rounds must be a positive integer, got 1.5

:func:`check_text` is the one check of every input file's bytes: UTF-8 text
(a leading byte-order mark dropped) without NUL bytes, or a one-line error that
names the file and the line.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Literal, overload

import numpy as np

from synergy_gym.errors import ConfigError, SynergyGymError


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` on one line, cut to ``limit`` characters (a NumPy array's repr spans lines), for messages."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_number(value: Any) -> bool:
    """An int or float (NumPy's included), not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def is_integer(value: Any) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def whole_number(value: Any) -> int | None:
    """``value`` as an ``int`` if it is a Python or NumPy integer (not a bool) or a finite whole float; else None."""
    if is_integer(value):
        return int(value)
    if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        return int(value)
    return None


def check_flag(name: str, value: Any, error: type[SynergyGymError] = ConfigError) -> bool:
    """``value`` as a ``bool`` if it is one (NumPy's included); else a one-line ``error`` naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(f"{name} must be True or False, got {value!r}")
    return bool(value)


@overload
def check_positive(
    name: str, value: Any, *, integer: Literal[True], allow_zero: bool = ..., allow_none: Literal[False] = ...,
    unit: str | None = ..., error: type[SynergyGymError] = ...,
) -> int: ...
@overload
def check_positive(
    name: str, value: Any, *, integer: Literal[True], allow_zero: bool = ..., allow_none: bool,
    unit: str | None = ..., error: type[SynergyGymError] = ...,
) -> int | None: ...
@overload
def check_positive(
    name: str, value: Any, *, integer: Literal[False] = ..., allow_zero: bool = ..., allow_none: Literal[False] = ...,
    unit: str | None = ..., error: type[SynergyGymError] = ...,
) -> float: ...
@overload
def check_positive(
    name: str, value: Any, *, integer: bool = ..., allow_zero: bool = ..., allow_none: bool = ...,
    unit: str | None = ..., error: type[SynergyGymError] = ...,
) -> int | float | None: ...
def check_positive(
    name: str,
    value: Any,
    *,
    integer: bool = False,
    allow_zero: bool = False,
    allow_none: bool = False,
    unit: str | None = None,
    error: type[SynergyGymError] = ConfigError,
) -> int | float | None:
    """``value`` as an ``int`` (``integer``) or ``float`` if it is a finite number > 0 (≥ 0 with ``allow_zero``).

    ``name`` is the field as the user knows it (``"num_servers"``, ``"env
    kwarg num_jobs"``); ``unit`` is added to the message (``"a positive number
    of seconds"``). ``None`` passes through when ``allow_none``. Raises
    ``error`` (a :class:`SynergyGymError` subclass, :class:`ConfigError` by
    default) with ``"<name> must be a positive integer, got <value!r>"``.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        ok = False
    elif isinstance(value, (int, np.integer)):  # (as a float it must be finite too: 10**400 is not)
        ok = bool((value >= 0 if allow_zero else value > 0) and (integer or value <= sys.float_info.max))
    else:
        ok = bool(
            math.isfinite(value) and (value >= 0 if allow_zero else value > 0) and (not integer or float(value).is_integer())
        )
    if not ok:
        sign = "non-negative" if allow_zero else "positive"
        kind = "integer" if integer else "number"
        of_unit = f" of {unit}" if unit else ""
        raise error(f"{name} must be a {sign} {kind}{of_unit}, got {value!r}")
    return int(value) if integer else float(value)


def check_text(source: str, data: bytes, error: type[SynergyGymError] = ConfigError) -> bytes:
    """``data`` without a leading UTF-8 byte-order mark, if it is UTF-8 text; else a one-line ``error``.

    The message starts with ``source`` (the file) and names the line of the
    first byte that is not UTF-8 or that is NUL (a binary or UTF-16 file)::

        w.csv: line 3: not UTF-8 text (byte 0xb2); is it a binary file?
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise error(f"{source}: line 1: UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8")
    nul = data.find(b"\x00")
    try:
        str(data, "utf-8")
    except UnicodeDecodeError as exc:
        if nul < 0 or exc.start < nul:
            line, byte = data.count(b"\n", 0, exc.start) + 1, data[exc.start]
            raise error(f"{source}: line {line}: not UTF-8 text (byte 0x{byte:02x}); is it a binary file?") from None
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise error(f"{source}: line {line}: not a text file (it holds a NUL byte; is it binary or UTF-16?)")
    return data
