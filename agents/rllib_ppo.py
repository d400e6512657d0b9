"""PPO with action masking on any ``Synergy-*`` scenario, with RLlib (``pip install 'synergy-gym[ray]'``).

The environment is registered through ``ray.tune.registry.register_env`` and
built from RLlib's config dict (``SynergyEnv`` takes one): ``env_id`` picks the
scenario (``synergy_gym.SCENARIOS``, default ``Synergy-small-v0``) and every
other key is a ``SynergyEnv`` kwarg overriding it. RLlib's action masking
module expects observations ``{"action_mask", "observations"}``, so
:class:`MaskedObservations` flattens every other key (slots, their levels,
slot mask, cluster, running jobs, demand, rest of the queue, time) into
``observations``. Run::

    python -m synergy_gym.agents.rllib_ppo --env-id Synergy-small-scarce-v0 --iterations 20 --num-env-runners 2

and it prints each iteration's mean episode return (−Σ JCT in hours).
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENV_NAME = "SynergyMasked-v0"
DEFAULT_ENV_ID = "Synergy-small-v0"


class MaskedObservations(gym.ObservationWrapper):
    """``{"action_mask": …, "observations": all other keys, flattened}`` for RLlib's masking module.

    ``observations`` joins the keys in the observation space's order; its bounds are theirs.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        inner = env.observation_space
        if not isinstance(inner, spaces.Dict):
            raise TypeError(f"MaskedObservations needs a Dict observation space, got {inner}")
        self.keys = tuple(k for k in inner.spaces if k != "action_mask")
        boxes: list[spaces.Box] = []
        for key in self.keys:
            part = inner[key]
            if not isinstance(part, spaces.Box):
                raise TypeError(f"MaskedObservations flattens Box observation parts; {key!r} is {part}")
            boxes.append(part)
        low = np.concatenate([np.asarray(box.low, dtype=np.float32).reshape(-1) for box in boxes])
        high = np.concatenate([np.asarray(box.high, dtype=np.float32).reshape(-1) for box in boxes])
        self.observation_space = spaces.Dict(
            {"action_mask": inner["action_mask"], "observations": spaces.Box(low, high, dtype=np.float32)}
        )

    def observation(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        flat = np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(-1) for k in self.keys])
        return {"action_mask": obs["action_mask"], "observations": flat}


def make_env(config: dict[str, Any] | None = None) -> gym.Env:
    """RLlib's env creator: ``config["env_id"]`` picks the scenario; other keys are ``SynergyEnv`` kwargs."""
    from synergy_gym.env import SynergyEnv
    from synergy_gym.env.scenarios import SCENARIOS
    from synergy_gym.errors import UnknownNameError

    settings = dict(config or {})
    env_id = settings.pop("env_id", DEFAULT_ENV_ID)
    if env_id not in SCENARIOS:
        raise UnknownNameError("env", env_id, tuple(SCENARIOS))
    return MaskedObservations(SynergyEnv({**SCENARIOS[env_id].kwargs, **settings}))


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
    p.add_argument("--env-id", default=DEFAULT_ENV_ID, help="a Synergy-* id (synergy_gym.SCENARIOS)")
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--num-env-runners", type=int, default=2)
    p.add_argument("--num-jobs", type=int, default=None, help="jobs per episode (default: the scenario's)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from synergy_gym.env.scenarios import SCENARIOS
    from synergy_gym.errors import SynergyGymError

    # Bad options: one line naming the option and its value (exit 2), before Ray starts.
    for option, value in (("--iterations", args.iterations), ("--num-jobs", args.num_jobs)):
        if value is not None and value < 1:
            p.error(f"{option} must be a positive integer, got {value}")
    if args.num_env_runners < 0:
        p.error(f"--num-env-runners must be 0 (sample in this process) or more, got {args.num_env_runners}")
    if args.env_id not in SCENARIOS:
        p.error(f"--env-id: unknown env {args.env_id!r}; valid: {', '.join(SCENARIOS)}")
    env_config = {"env_id": args.env_id} | ({} if args.num_jobs is None else {"num_jobs": args.num_jobs})
    try:  # one throw-away env: a setting the env refuses is one line too
        make_env(env_config).close()
    except SynergyGymError as exc:
        p.error(f"--num-jobs {args.num_jobs} on {args.env_id}: {exc}")  # the only env setting an option gives
    from synergy_gym.agents.extras import exit_if_missing

    exit_if_missing(p.prog, "ray", ("ray",))
    exit_if_missing(p.prog, "rl", ("torch",))  # RLlib's action-masking module is a PyTorch one
    import ray

    ray.init(ignore_reinit_error=True, include_dashboard=False)
    algo = build_algorithm(args.num_env_runners, env_config, seed=args.seed)
    try:
        for i in range(1, args.iterations + 1):
            result = algo.train()
            ret = result.get("env_runners", {}).get("episode_return_mean", float("nan"))
            print(f"iteration {i}: mean episode return {ret:.1f} (−Σ JCT h)", flush=True)
    finally:
        algo.stop()


if __name__ == "__main__":
    main()
