"""Experiment plumbing: many policies on identical workloads (:mod:`.harness`) and policies on environment episodes (:mod:`.evaluation`)."""
