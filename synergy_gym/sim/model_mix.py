"""Assigning models to jobs so that the mix of tasks tracks a class split.

As in the paper's simulator, each new job gets the task (vision, language,
speech) that is furthest below its share of the split among the jobs so far
(ties in the order vision, language, speech; the first job is a vision job), and
models take turns within a task. The assignment is deterministic: it needs no random numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from synergy_gym.errors import WorkloadError
from synergy_gym.sim.profiles import TASKS, ModelZoo
from synergy_gym.sim.validation import is_number, shown

#: The paper's default split: 20% vision, 70% language, 10% speech.
DEFAULT_SPLIT: tuple[float, float, float] = (20.0, 70.0, 10.0)


def parse_split(text: str) -> tuple[float, float, float]:
    """``"20/70/10"`` → (20, 70, 10): the ``--split`` option's vision/language/speech percentages.

    On the command line the three must be percentages that sum to 100 (± 0.01);
    the programmatic API (``class_split=``) still takes any non-negative weights.
    """
    parts = text.replace(",", "/").split("/")
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise WorkloadError(f"--split {text!r} must be three numbers like 20/70/10") from None
    if len(values) != 3:
        raise WorkloadError(f"--split {text!r} must be three numbers like 20/70/10")
    if any(not np.isfinite(v) or v < 0 for v in values):
        raise WorkloadError(f"--split {text!r}: each percentage must be a number ≥ 0")
    total = sum(values)
    if abs(total - 100.0) > 0.01:
        raise WorkloadError(f"--split {text!r}: the percentages must sum to 100, got {total:g}")
    return values


def check_split(split) -> tuple[float, float, float]:
    """Validate a (vision, language, speech) split: three non-negative weights with a positive sum.

    Each weight is an ``int`` or ``float`` (numpy's included, a bool refused); they come back as Python
    numbers, so a numpy array gives the same tuple as the list it was made from.
    """
    try:
        items = None if isinstance(split, (str, bytes)) else tuple(split)
    except TypeError:  # not a sequence at all
        items = None
    if items is not None and len(items) == 3 and all(_is_weight(w) for w in items) and sum(items) > 0:
        return tuple(w.item() if isinstance(w, np.generic) else w for w in items)
    shown = tuple(items) if items is not None and not isinstance(split, tuple) else split
    raise WorkloadError(
        f"class split {shown!r} must be three non-negative weights (vision, language, speech) with a positive sum"
    )


def _is_weight(w) -> bool:
    return is_number(w) and bool(np.isfinite(w)) and w >= 0


def split_shares(split) -> list[float]:
    """Each task's share of a split, computed exactly and rounded once: proportional splits share it exactly.

    A float weight counts as the decimal it prints as (``0.2`` is 2/10, not the binary fraction nearest
    to it), so ``(0.2, 0.7, 0.1)``, ``(2, 7, 1)`` and ``(20, 70, 10)`` all give the shares 0.2, 0.7, 0.1
    (for whole-number weights this is ``w / sum`` in floating point, bit for bit).
    """
    exact = [Fraction(w) if isinstance(w, int) else Fraction(repr(float(w))) for w in check_split(split)]
    total = sum(exact)
    return [float(w / total) for w in exact]


@dataclass
class ModelAssigner:
    """Hands out model indices job by job, tracking the class split."""

    zoo: ModelZoo
    split: tuple[float, float, float] = DEFAULT_SPLIT
    _counts: list[int] = field(init=False)
    _turn: list[int] = field(init=False)
    _models: list[tuple[int, ...]] = field(init=False)
    _share: list[float] = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.zoo, ModelZoo):
            got = shown(self.zoo) if self.zoo is None or isinstance(self.zoo, (str, int, float)) else (
                f"a {type(self.zoo).__name__}")
            raise WorkloadError(f"zoo must be a ModelZoo (e.g. ModelZoo.default()), got {got}")
        self._share = split_shares(self.split)
        self._models = [self.zoo.models_of_task(task) for task in TASKS]
        for task, share, models in zip(TASKS, self._share, self._models):
            if share > 0 and not models:
                raise WorkloadError(f"class split gives {task} a share but the model zoo has no {task} model")
        self._counts = [0, 0, 0]
        self._turn = [0, 0, 0]

    def next_model(self) -> int:
        total = sum(self._counts)
        best, best_gap = -1, -np.inf
        for k in range(3):
            if self._share[k] <= 0:
                continue
            # Before the first job every task is even (the reference starts with vision).
            gap = self._share[k] - self._counts[k] / total if total else 0.0
            if gap > best_gap:
                best, best_gap = k, gap
        models = self._models[best]
        model = models[self._turn[best] % len(models)]
        self._turn[best] += 1
        self._counts[best] += 1
        return model

    def assign(self, n: int) -> np.ndarray:
        """The next ``n`` jobs' models: :meth:`next_model` ``n`` times, in one loop."""
        out: list[int] = []
        counts, turn, share, models_of = self._counts, self._turn, self._share, self._models
        tasks = [k for k in range(3) if share[k] > 0]
        total = sum(counts)
        for _ in range(n):
            best = tasks[0]  # before the first job every task is even (the reference starts with vision)
            if total:
                best_gap = -math.inf
                for k in tasks:
                    gap = share[k] - counts[k] / total
                    if gap > best_gap:
                        best, best_gap = k, gap
            models = models_of[best]
            out.append(models[turn[best] % len(models)])
            turn[best] += 1
            counts[best] += 1
            total += 1
        return np.array(out, dtype=np.int64)
