"""The allocation baselines the Gymnasium environment can express, as policies.

With Stable-Baselines3's ``predict`` signature, for ``synergy_gym.evaluate``:
``fair`` (always the fair share, i.e. ``<order>+fair``), ``tune`` (always the
best-case demand, i.e. ``<order>+tune``) and ``random`` (a random valid action).
"""

from synergy_gym.action_policies import (
    ConstantPolicy,
    RandomMaskedPolicy,
    env_baselines,
    fair_share_policy,
    tune_policy,
)

__all__ = ["ConstantPolicy", "RandomMaskedPolicy", "env_baselines", "fair_share_policy", "tune_policy"]
