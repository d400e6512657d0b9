"""PPO with action masking on Synergy-small-v0, with RLlib (``pip install 'synergy-gym[ray]'``).

The environment is registered through ``ray.tune.registry.register_env`` and
built from RLlib's config dict (``SynergyEnv`` takes one). RLlib's action
masking module expects observations ``{"action_mask", "observations"}``, so
:class:`MaskedObservations` flattens every other key into ``observations``.
Run::

    python -m agents.rllib_ppo --iterations 20 --num-env-runners 2

and it prints each iteration's mean episode return (−Σ JCT in hours).
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENV_NAME = "SynergyMasked-v0"
_FEATURES = ("job", "job_sensitivity", "cluster", "queue", "queue_mask", "time")


class MaskedObservations(gym.ObservationWrapper):
    """``{"action_mask": …, "observations": all other keys, flattened}`` for RLlib's masking module."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        size = sum(int(np.prod(env.observation_space[k].shape)) for k in _FEATURES)
        self.observation_space = spaces.Dict(
            {
                "action_mask": env.observation_space["action_mask"],
                "observations": spaces.Box(0.0, 1.0, (size,), np.float32),
            }
        )

    def observation(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        flat = np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(-1) for k in _FEATURES])
        return {"action_mask": obs["action_mask"], "observations": flat}


def make_env(config: dict[str, Any] | None = None) -> gym.Env:
    """RLlib's env creator: ``config`` holds ``SynergyEnv`` kwargs (``cluster``, ``num_jobs``, …)."""
    from synergy_gym.env import SynergyEnv

    settings = {"cluster": "small", "jobs_per_hour": 2.25, "num_jobs": 300, "max_rounds": 4000}
    settings.update(dict(config or {}))
    return MaskedObservations(SynergyEnv(settings))


def build_algorithm(
    num_env_runners: int = 0,
    env_config: dict[str, Any] | None = None,
    seed: int = 0,
    train_batch_size: int = 2000,
    minibatch_size: int = 250,
    num_epochs: int = 5,
):
    """An RLlib PPO algorithm with the action-masking RL module."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
    from ray.tune.registry import register_env

    register_env(ENV_NAME, make_env)
    config = (
        PPOConfig()
        .environment(ENV_NAME, env_config=dict(env_config or {}))
        .env_runners(num_env_runners=num_env_runners)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=ActionMaskingTorchRLModule,
                                               model_config={"head_fcnet_hiddens": [128, 128]}))
        .training(train_batch_size_per_learner=train_batch_size, minibatch_size=minibatch_size, num_epochs=num_epochs)
        .debugging(seed=seed)
    )
    return config.build_algo()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--num-env-runners", type=int, default=2)
    p.add_argument("--num-jobs", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    import ray

    ray.init(ignore_reinit_error=True, include_dashboard=False)
    algo = build_algorithm(args.num_env_runners, {"num_jobs": args.num_jobs}, seed=args.seed)
    try:
        for i in range(1, args.iterations + 1):
            result = algo.train()
            ret = result.get("env_runners", {}).get("episode_return_mean", float("nan"))
            print(f"iteration {i}: mean episode return {ret:.1f} (−Σ JCT h)", flush=True)
    finally:
        algo.stop()


if __name__ == "__main__":
    main()
