"""Named scheduling policies built from the simulator core, and the ``compare`` command."""

from synergy_gym.baselines.registry import make_policy, parse_policy_list, policy_names

__all__ = ["make_policy", "parse_policy_list", "policy_names"]
