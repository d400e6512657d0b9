"""What the agent tests share: tiny environments and training settings, one torch thread, TensorBoard reading."""

from __future__ import annotations

#: 20 jobs; max_rounds well above the heuristics' longest episode (about 1,600 rounds) but short enough that an
#: untrained agent that keeps stopping with an idle cluster (each stop then moves one round) ends soon.
SMALL_ENV = {"num_jobs": 20, "max_rounds": 2500}
FAST = ["--env-kwargs", "num_jobs=20", "max_rounds=2500", "--eval-episodes", "2", "--no-progress", "--device", "cpu"]
#: A tiny PPO: one rollout of 64 steps per update.
TINY = "n_steps = 64\nbatch_size = 64\nn_epochs = 2\nnet_arch = [32]\nglobal_dim = 32\nslot_dim = 8\n"


def tiny_train_config(env_id: str, **extra):
    """A :class:`synergy_gym.agents.config.TrainConfig` for a few hundred steps on a 20-job env, one CPU env.

    ``extra`` overrides the settings.
    """
    from synergy_gym.agents.config import TrainConfig

    values = {"env_id": env_id, "env_kwargs": dict(SMALL_ENV), "n_envs": 1, "device": "cpu", "timesteps": 128,
              "eval_freq": 64, "eval_episodes": 1, "n_steps": 64, "batch_size": 64, "n_epochs": 2, "net_arch": [32],
              "global_dim": 32, "slot_dim": 8, "progress_bar": False}
    values.update(extra)
    return TrainConfig(**values)


def tensorboard_scalars(run_dir, with_steps: bool = False) -> dict[str, list]:
    """Every scalar tag of a run's TensorBoard file: its values, or (step, value) pairs."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = list((run_dir / "tb").rglob("events.out.tfevents.*"))[:1]
    acc = EventAccumulator(str(events))
    acc.Reload()
    return {tag: [(e.step, e.value) if with_steps else e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
