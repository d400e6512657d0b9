"""Stable-Baselines3 agents for the synergy-gym environments: training, evaluation, a minimal PPO, pretrained policies."""

from synergy_gym.agents.pretrained_policies import load_pretrained, pretrained_names

__all__ = ["load_pretrained", "pretrained_names"]
