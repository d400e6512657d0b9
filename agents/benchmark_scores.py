"""The normalised score of ``synergy-gym benchmark``: 0 at env ``fifo+tune``, 100 at the best environment heuristic.

In each cell (an environment id in a mode, on the benchmark's seeds) every policy's mean JCT
``x`` (the mean over seeds of the episode's mean JCT) becomes::

    score = 100 × (JCT_fifo+tune − x) / (JCT_fifo+tune − JCT_best)

where ``JCT_fifo+tune`` is the environment heuristic ``fifo+tune``'s mean JCT and ``JCT_best`` the
lowest mean JCT among the environment heuristics in that cell (:func:`cell_reference`; ``random``
only if it is the only one, as :func:`synergy_gym.agents.baseline_scores.best_heuristic`). A score
above 100 beats every same-information heuristic; a bound's score says how far one could go.
Where ``fifo+tune`` is itself the best heuristic the score is undefined (NaN, shown as ``-``).
The score is a ratio of differences: where the gap between the two is small
(``Synergy-v0``: about 0.3 %) small differences in JCT give large ones in score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from synergy_gym.agents.baseline_scores import best_heuristic
from synergy_gym.agents.eval_summary import paired_vs_best_env, summarise
from synergy_gym.errors import ConfigError

#: The env heuristic that scores 0.
ZERO = "fifo+tune"
#: How the score is defined, in words (``results.json``'s meta).
SCORE_DEFINITION = ("100 × (JCT_fifo+tune − JCT) / (JCT_fifo+tune − JCT_best), mean JCTs over the cell's seeds; "
                    "fifo+tune and best: environment heuristics (source env), best the lowest mean JCT but random")


def normalised_score(jct_h: float, fifo_tune_h: float, best_h: float) -> float:
    """``100 × (fifo_tune_h − jct_h) / (fifo_tune_h − best_h)``: 0 at ``fifo_tune_h``, 100 at ``best_h``.

    NaN when the two references coincide (no room between them) or any value is not finite.
    """
    gap = fifo_tune_h - best_h
    if not (math.isfinite(jct_h) and math.isfinite(gap)) or gap == 0:
        return math.nan
    return 100.0 * (fifo_tune_h - jct_h) / gap


@dataclass(frozen=True)
class Reference:
    """A cell's two references: env ``fifo+tune`` (score 0) and the best env heuristic (score 100)."""

    fifo_tune_h: float  #: env fifo+tune's mean JCT over the cell's seeds (hours)
    best: str  #: the best env heuristic's name
    best_h: float  #: its mean JCT (hours)

    def score(self, jct_h: float) -> float:
        """The normalised score of a mean JCT (:func:`normalised_score`)."""
        return normalised_score(jct_h, self.fifo_tune_h, self.best_h)


def cell_reference(summary: pd.DataFrame) -> Reference:
    """A cell's references, from its summary.

    ``summary``: one row per policy and source (:func:`~synergy_gym.agents.eval_summary.summarise`).
    """
    env = summary[summary["source"] == "env"]
    means = {str(p): float(m) for p, m in zip(env["policy"], env["mean_jct_h"])}
    if ZERO not in means:
        raise ConfigError(f"the benchmark's score needs the env heuristic {ZERO}, which did not run")
    best = best_heuristic(means)
    return Reference(means[ZERO], best, means[best])


def score_summary(summary: pd.DataFrame, reference: Reference) -> pd.DataFrame:
    """The summary with a column ``score``: each row's normalised score."""
    return summary.assign(score=[reference.score(float(m)) for m in summary["mean_jct_h"]])


def paired_vs_best(summary: pd.DataFrame, reference: Reference) -> dict[str, dict[str, Any]]:
    """Each agent's paired per-seed difference to the cell's best env heuristic, with its 95 % CI and lower-on-k-of-n.

    :func:`~synergy_gym.agents.eval_summary.paired_vs_best_env` on the agents and ``reference.best`` alone.
    """
    keep = (summary["source"] == "agent") | ((summary["source"] == "env") & (summary["policy"] == reference.best))
    return paired_vs_best_env(summary[keep].reset_index(drop=True))


@dataclass(frozen=True)
class CellScore:
    """A cell's summary with scores (sorted by mean JCT), its references and each agent's paired comparison."""

    summary: pd.DataFrame
    reference: Reference
    paired: dict[str, dict[str, Any]]


def score_cell(results: pd.DataFrame) -> CellScore:
    """Summarise a cell's per-seed rows (:func:`~synergy_gym.agents.eval_summary.summarise`) and score them."""
    summary = summarise(results)
    summary = summary[summary["ci95_over"] != "models"].reset_index(drop=True)  # no mean over different models here
    reference = cell_reference(summary)
    return CellScore(score_summary(summary, reference), reference, paired_vs_best(summary, reference))
