"""Stable-Baselines3 agents for the synergy-gym environments: training, evaluation, a minimal PPO."""
