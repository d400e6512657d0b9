"""Stable-Baselines3 models: the algorithm classes, the device, building a model from a config and loading one.

:func:`build_model` makes a new model as a :class:`~synergy_gym.agents.config.TrainConfig`
says (the :class:`~synergy_gym.agents.features.SynergyExtractor` features, SB3's linear
or the per-slot action head of :mod:`synergy_gym.agents.slot_policy`); :func:`load_model`
reads a saved model zip (a file that is not a whole model zip is one line naming it),
:func:`resume_model` one to continue training in the given environments, and :func:`load_agent`
one with its normalisation statistics (:mod:`synergy_gym.agents.normalization`) as a policy
for :func:`synergy_gym.evaluate`. Stable-Baselines3 and PyTorch are imported
only when a model is built or loaded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synergy_gym.agents.config import ALGOS, TrainConfig, check_device, first_line
from synergy_gym.agents.extras import require_extra
from synergy_gym.agents.normalization import find_stats, normalises_observations, read_stats, resolve_stats
from synergy_gym.cli.files import require_file
from synergy_gym.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv

    from synergy_gym.agents.wrappers import AgentPolicy


def algorithm_class(algo: str) -> type[BaseAlgorithm]:
    """The SB3 class of ``algo`` (one of :data:`synergy_gym.agents.config.ALGOS`)."""
    if algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    import stable_baselines3 as sb3

    classes: dict[str, type[BaseAlgorithm]] = {"ppo": sb3.PPO, "a2c": sb3.A2C, "dqn": sb3.DQN}
    return classes[algo]


def device_without_models(device: str, allowed: tuple[str, ...]) -> str:
    """``--device`` of a command given no ``--model``: only models run on a device, so anything but ``allowed`` is
    refused in one line (what would it do?)."""
    if device not in allowed:
        raise ConfigError(f"--device {device!r}: needs --model (only models run on a device; the heuristics, "
                          "simulator policies and bounds run on the CPU)")
    return device


def resolve_device(device: str, flag: str = "--device") -> str:
    """``auto`` → ``cuda`` where PyTorch sees a CUDA device, else ``cpu``; a name that is no device, or a CUDA
    device PyTorch does not see, is a one-line error (checked before any model is loaded)."""
    import torch

    check_device(device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        instead = f"{flag} auto or cpu" if flag.startswith("--") else f"{flag}='auto' or 'cpu'"
        raise ConfigError(f"{flag} {device}: PyTorch sees no CUDA device on this machine (use {instead})")
    if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        raise ConfigError(f"{flag} {device}: PyTorch sees {torch.cuda.device_count()} CUDA device(s), numbered from 0")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


@contextmanager
def torch_threads_set(threads: int | None) -> Iterator[None]:
    """PyTorch's intra-op threads set to ``threads`` while the block runs, restored after (None: unchanged, and
    PyTorch not imported)."""
    if threads is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def inference_threads(device: str | None) -> AbstractContextManager[None]:
    """One PyTorch intra-op thread while agents decide on the CPU, as ``train`` trains (restored after).

    The policies are small networks deciding a batch of at most 16 observations: more threads spend
    more time waiting on each other than computing, and far more on busy cores (one preemptive episode
    of ``pretrained:small-scarce-preemptive`` on a busy 2-core machine: 2× to 20× as long with PyTorch's
    default of 2 threads as with one; docs/speed.md). On a CUDA device, or with ``device`` None (no agent
    runs, and PyTorch is not imported), nothing changes.
    """
    return torch_threads_set(1 if device == "cpu" else None)


def policy_settings(cfg: TrainConfig) -> tuple[Any, dict[str, Any]]:
    """The policy (SB3's name or class) and its ``policy_kwargs`` as ``cfg`` says: the network, fixed once trained."""
    from synergy_gym.agents.features import SynergyExtractor

    policy_kwargs: dict[str, Any] = {
        "features_extractor_class": SynergyExtractor,
        "features_extractor_kwargs": {"global_dim": cfg.global_dim, "slot_dim": cfg.slot_dim},
        "net_arch": list(cfg.net_arch),
    }
    if cfg.attention_heads:  # (not passed otherwise: models saved before it load and compare as they were)
        policy_kwargs["features_extractor_kwargs"]["attention_heads"] = cfg.attention_heads
    if cfg.algo == "dqn":
        return "MultiInputPolicy", policy_kwargs
    policy: Any = "MultiInputPolicy"
    if cfg.action_head == "per_slot":
        from synergy_gym.agents.slot_policy import MaskableSlotPolicy, SlotPolicy

        policy = MaskableSlotPolicy if cfg.algo == "maskable_ppo" else SlotPolicy
        policy_kwargs["net_arch"] = {"pi": [], "vf": list(cfg.net_arch)}
        if cfg.hint_policy is not None:
            policy_kwargs.update(hint_policy=cfg.hint_policy, hint_weight=cfg.hint_weight)
    return policy, policy_kwargs


def algorithm_settings(cfg: TrainConfig) -> dict[str, Any]:
    """The hyper-parameters ``cfg`` gives ``cfg.algo``'s SB3 class: a new model is built with them, and a resumed one
    takes them too (:func:`resume_model`), so that a changed learning rate, say, applies to the rest of the run."""
    common = {"learning_rate": cfg.learning_rate, "gamma": cfg.gamma}
    if cfg.algo in ("maskable_ppo", "ppo"):
        return {**common, "n_steps": cfg.n_steps, "batch_size": cfg.batch_size, "n_epochs": cfg.n_epochs,
                "gae_lambda": cfg.gae_lambda, "ent_coef": cfg.ent_coef, "clip_range": cfg.clip_range,
                "vf_coef": cfg.vf_coef, "max_grad_norm": cfg.max_grad_norm, "target_kl": cfg.target_kl,
                "normalize_advantage": cfg.hint_credit != "departures"}  # zeroed advantages stay zero (DepartureCredit)
    if cfg.algo == "a2c":
        return {**common, "n_steps": cfg.n_steps, "gae_lambda": cfg.gae_lambda, "ent_coef": cfg.ent_coef,
                "vf_coef": cfg.vf_coef, "max_grad_norm": cfg.max_grad_norm}
    return {**common, "buffer_size": cfg.buffer_size, "learning_starts": cfg.learning_starts,
            "batch_size": cfg.batch_size, "exploration_fraction": cfg.exploration_fraction,
            "target_update_interval": cfg.target_update_interval, "train_freq": cfg.train_freq,
            "max_grad_norm": cfg.max_grad_norm}


def build_model(cfg: TrainConfig, env: VecEnv, device: str, tb_dir: Path | None) -> BaseAlgorithm:
    """A new model of ``cfg.algo`` on ``env``, logging to TensorBoard in ``tb_dir``."""
    policy, policy_kwargs = policy_settings(cfg)
    cls: Any = algorithm_class(cfg.algo)  # each algorithm takes its own keyword arguments
    return cls(policy, env, seed=cfg.seed, device=device, verbose=0, policy_kwargs=policy_kwargs,
               tensorboard_log=None if tb_dir is None else str(tb_dir), **algorithm_settings(cfg))


def load_model(path: Path, algo: str | None, device: str, env: VecEnv | None = None,
               settings: dict[str, Any] | None = None) -> BaseAlgorithm:
    """An SB3 model from ``path``; ``algo`` None tries each algorithm. What is wrong with the file is one line naming it.

    ``settings``: hyper-parameters (:func:`algorithm_settings`) replacing the saved ones before the model is set up.
    """
    require_extra()  # not "could not be loaded as a maskable_ppo model: No module named 'sb3_contrib'"
    path = require_file(path, "model file", ConfigError)
    check_model_zip(path)
    candidates = [algo] if algo else list(ALGOS)
    last_error: Exception | None = None
    for name in candidates:
        try:
            model = algorithm_class(name).load(str(path), env=env, device=device, **(settings or {}))
        except Exception as exc:  # a different algorithm's zip, or a damaged one
            last_error = exc
            if isinstance(exc, ModuleNotFoundError) and exc.name in ("agents", "agents.features"):
                raise ConfigError(f"{path} was saved by a synergy-gym from before its one installed namespace "
                                  "(2026-12-02): its network is pickled as module 'agents', which is "
                                  "synergy_gym.agents now; retrain it, or load it with the version that trained it "
                                  "(its run's versions.json)") from None
            if "spaces do not match" in str(exc):
                raise ConfigError(
                    f"{path} was trained on other observation/action spaces than the environment has now; train a new model"
                ) from None
            continue
        if hasattr(model.policy, "lstm_actor"):  # sb3-contrib's RecurrentPPO: it loads as PPO, its LSTM state unused
            raise ConfigError(f"{path} holds a recurrent policy ({type(model.policy).__name__}), which synergy-gym's "
                              "commands cannot run (they keep no LSTM state between decisions); score it with "
                              "synergy_gym.evaluate(RecurrentPPO.load(...), ...), which does")
        return model
    raise ConfigError(f"{path} could not be loaded as a {'/'.join(candidates)} model: "
                      f"{first_line(last_error) if last_error else 'no algorithm'}")


def check_model_zip(path: Path) -> None:
    """Refuse a file that is not a whole Stable-Baselines3 model zip: unreadable, not a zip (or truncated), damaged, or
    a zip of something else."""
    import zipfile

    truncated = f"{path} is not a Stable-Baselines3 model zip (not a zip file, or a truncated one)"
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            # A model cut short can still open as the zip stored inside it (a .pth member is a zip itself): its
            # members then start past the file's beginning.
            inner = bool(names) and min(info.header_offset for info in archive.infolist()) > 0
            damaged = archive.testzip()  # reads every member: CRC errors show here
    except OSError as exc:
        raise ConfigError(f"model file {path} cannot be read: {exc.strerror or first_line(exc)}") from None
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError):
        raise ConfigError(truncated) from None
    except Exception as exc:  # zlib errors of a damaged member
        raise ConfigError(f"model file {path} is damaged: {first_line(exc)}") from None
    if inner and "data" not in names:
        raise ConfigError(truncated)
    if "data" not in names or not any(n.endswith(".pth") for n in names):
        raise ConfigError(f"{path} is not a Stable-Baselines3 model zip (a zip of {', '.join(names[:3]) or 'nothing'}"
                          f"{', …' if len(names) > 3 else ''})")
    if damaged is not None:
        raise ConfigError(f"model file {path} is damaged: its member {damaged} fails its checksum")


def continuation_seed(seed: int, steps: int) -> int:
    """The seed a run resumed at step ``steps`` continues with: ``seed + steps`` (modulo 2**32, NumPy's limit)."""
    return (int(seed) + int(steps)) % 2**32


def resume_model(path: Path, cfg: TrainConfig, env: VecEnv, device: str, tb_dir: Path) -> BaseAlgorithm:
    """The checkpoint ``path`` to train on in ``env``, with its normalisation statistics, logging to a new
    ``tb_dir/run_N``.

    Loading reseeds Python, NumPy, PyTorch and the environments with the seed the model was built with, so the
    continuation would draw the workloads and actions of the run's first steps again; it is reseeded with
    :func:`continuation_seed` of ``cfg.seed`` and the checkpoint's step count instead (deterministic for a checkpoint
    and a seed, and ``--seed`` takes effect). Its TensorBoard events go to a folder of their own: continuing the
    latest ``run_N`` would give the steps after an earlier checkpoint two values there.
    """
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.utils import get_latest_run_id
    from stable_baselines3.common.vec_env import VecNormalize

    model = load_model(path, cfg.algo, device, env=env, settings=algorithm_settings(cfg))
    stats = find_stats(path)
    if stats is not None and isinstance(env, VecNormalize):
        loaded = read_stats(stats)
        if normalises_observations(loaded) and env.norm_obs:
            env.obs_rms = loaded.obs_rms
        env.ret_rms = loaded.ret_rms
    model.set_random_seed(continuation_seed(cfg.seed, model.num_timesteps))
    model.tensorboard_log = str(tb_dir)
    model.set_logger(configure(str(Path(tb_dir) / f"run_{get_latest_run_id(str(tb_dir), 'run') + 1}"), ["tensorboard"]))
    return model


def load_agent(model_path: Path, cfg: TrainConfig | None, device: str, name: str, stats: Path | None = None,
               normalize: bool = True) -> AgentPolicy:
    """The model at ``model_path`` with its normalisation statistics, as a policy named ``name``.

    The statistics are ``stats``, else those found beside the model (:mod:`synergy_gym.agents.normalization`);
    missing ones are an error unless the model's records say it was trained without them, or ``normalize`` is
    false (run it on unnormalised observations on purpose). ``device`` (``cpu``, ``cuda``, ``cuda:N``, ``auto``) is
    checked first (:func:`resolve_device`): a name that is no device, or one PyTorch does not see, is refused.
    """
    require_extra()
    from synergy_gym.agents.wrappers import AgentPolicy

    device = resolve_device(device, "device")
    stats_path = resolve_stats(model_path, stats, normalize, flag="load_agent(): model_path",
                               advice="pass stats=PATH (its VecNormalize pickle), or normalize=False to run it on "
                                      "unnormalised observations on purpose", given_flag="load_agent(): stats")
    model = load_model(model_path, cfg.algo if cfg else None, device)
    vec_norm = read_stats(stats_path) if stats_path is not None else None
    return AgentPolicy(model, vec_norm, name=name)
