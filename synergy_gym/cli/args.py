"""Parsers for command-line values shared by the ``synergy-gym`` subcommands."""

from __future__ import annotations

from synergy_gym.errors import SynergyGymError


def parse_seed_list(text: str, flag: str = "--seed") -> tuple[int, ...]:
    """``"42"``, ``"1,2,3"`` or ``"0..9"`` (inclusive) → seeds, de-duplicated in order."""
    seeds: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            if ".." in part:
                lo, hi = (int(x) for x in part.split(".."))
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise SynergyGymError(f"{flag} {text!r}: expected integers like 42, 1,2,3 or 0..9") from None
    if not seeds:
        raise SynergyGymError(f"{flag} {text!r}: the seed range is empty")
    if any(s < 0 for s in seeds):
        raise SynergyGymError(f"{flag} {text!r}: seeds must be non-negative")
    return tuple(dict.fromkeys(seeds))


def check_job_count(value: int | None, flag: str = "--jobs") -> int | None:
    """A job count of at least 1 and at most :data:`~synergy_gym.sim.workload.MAX_JOBS` (None passes)."""
    from synergy_gym.sim.workload import MAX_JOBS

    if value is None:
        return None
    if value < 1:
        raise SynergyGymError(f"{flag} must be a positive integer, got {value}")
    if value > MAX_JOBS:
        raise SynergyGymError(f"{flag} {value} exceeds the maximum of {MAX_JOBS:,}")
    return value


def parse_float_list(text: str, flag: str = "--load") -> tuple[float, ...]:
    """``"5,7,9"`` → positive finite numbers."""
    import math

    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SynergyGymError(f"{flag} {text!r}: expected numbers like 5,7,9") from None
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise SynergyGymError(f"{flag} {text!r}: values must be positive numbers")
    return values
