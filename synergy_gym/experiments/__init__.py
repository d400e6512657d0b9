"""Experiment plumbing, built on the simulator and the environment.

Many policies on identical workloads (:mod:`.harness`), a policy on environment episodes
(:mod:`.evaluation`, ``synergy_gym.evaluate``) and the statistics of the results
(:mod:`.statistics`).
"""
