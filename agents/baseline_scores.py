"""The env heuristics scored on a training run's evaluation seeds: the yardstick of its evaluations.

At the start of a run every env heuristic (:mod:`synergy_gym.baselines.env_heuristics`)
runs on the run's evaluation seeds (:func:`evaluate_baselines`); their mean JCTs
(:func:`heuristic_means`) go to ``baselines.json`` and TensorBoard, the best of them
(:func:`best_heuristic`) is what each evaluation of the agent is compared with and,
with ``relative_to = "best"``, the heuristic of the relative reward.
"""

from __future__ import annotations

import pandas as pd

from synergy_gym.agents.baseline_cache import cached_scores
from synergy_gym.agents.config import TrainConfig
from synergy_gym.baselines.env_heuristics import VARIANT_NAMES, env_heuristic, env_heuristics
from synergy_gym.experiments.evaluation import evaluate


def evaluate_baselines(cfg: TrainConfig) -> dict[str, pd.DataFrame]:
    """Every env heuristic (:func:`synergy_gym.baselines.env_heuristics.env_heuristics`) on the evaluation seeds,
    and a named variant (:func:`~synergy_gym.baselines.env_heuristics.heuristic_variants`) where ``reference_baselines``
    or ``relative_to`` names one.

    ``random`` included: every heuristic takes about as long as one evaluation of the
    agent (0.1 s an episode on ``Synergy-small-*``, 0.7 s on the 128-GPU ids). The rows are
    kept on disk and reused by later runs on the same code, env and seeds
    (:mod:`synergy_gym.agents.baseline_cache`).
    """
    named = [*cfg.reference_baselines, cfg.relative_to]
    names = list(env_heuristics()) + [n for n in VARIANT_NAMES if n in named]

    def score() -> dict[str, pd.DataFrame]:
        return {name: evaluate(env_heuristic(name, seed=cfg.seed), cfg.env_id, cfg.eval_seeds, name=name,
                               **cfg.env_kwargs) for name in names}

    return cached_scores(score, cfg.env_id, cfg.env_kwargs, cfg.eval_seeds, names, cfg.seed)


def heuristic_means(baselines: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Each heuristic's mean JCT (hours) over the evaluation seeds."""
    return {name: float(frame["mean_jct_h"].mean()) for name, frame in baselines.items()}


def best_heuristic(means: dict[str, float]) -> str:
    """The heuristic with the lowest mean JCT (``random`` only if it is the only one)."""
    candidates = {n: m for n, m in means.items() if n != "random"} or means
    return min(candidates, key=lambda n: (candidates[n], n))


def describe_baselines(means: dict[str, float], n_seeds: int) -> str:
    """The console line of the heuristics' scores, lowest mean JCT first, the best marked."""
    best = best_heuristic(means)
    ranked = sorted(means, key=lambda n: means[n])
    return (f"env heuristics on {n_seeds} evaluation seed{'s' if n_seeds != 1 else ''} (mean JCT, h): "
            + ", ".join(f"{n} {means[n]:.3f}" + (" (best)" if n == best else "") for n in ranked))
