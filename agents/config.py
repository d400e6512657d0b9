"""Training configuration: every hyper-parameter of a run, in one dataclass, and the files and options that set it.

A config file (``--config FILE``, TOML or YAML) sets any of the fields of
:class:`TrainConfig`; command-line options override it (``--env-kwargs key=value``:
:func:`~synergy_gym.agents.env_kwargs.parse_env_kwargs`); the resolved config is saved in the run folder as
``config.json``, from which ``--resume`` and ``evaluate`` read it
(:func:`load_run_config`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from synergy_gym.agents.config_values import layer_sizes, plain
from synergy_gym.agents.hyperparameters import check_hyperparameters
from synergy_gym.cli.files import require_file
from synergy_gym.errors import ConfigError, SynergyGymError, UnknownNameError
from synergy_gym.sim.validation import check_positive

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ALGOS: tuple[str, ...] = ("maskable_ppo", "ppo", "a2c", "dqn")
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
#: A further CUDA device by number (PyTorch's ``cuda:1``); the device must exist.
CUDA_INDEX = re.compile(r"cuda:\d+")
#: ``reward`` settings: the environment's own, or relative to an env heuristic on the same workload.
REWARDS: tuple[str, ...] = ("absolute", "heuristic_relative")
#: ``action_head`` settings: SB3's linear layer over the latent vector, or one shared scorer per slot (slot_policy).
ACTION_HEADS: tuple[str, ...] = ("linear", "per_slot")
#: ``vec_env`` settings (the comment on ``TrainConfig.vec_env``).
VEC_ENVS: tuple[str, ...] = ("auto", "subproc", "dummy")
#: ``relative_to`` (and the comparisons of the evaluations): the env heuristic with the lowest mean JCT on the
#: evaluation seeds, scored at the start of the run (``random`` excluded; a variant if ``reference_baselines`` names it).
BEST = "best"
#: Held-out workload seeds (1,000,000 on): results are reported on these only (``synergy-gym evaluate``); training
#: envs use ``seed + rank``, far below, so evaluation workloads are never training workloads.
HELD_OUT_SEED_BASE = 1_000_000
EVAL_SEED_BASE = HELD_OUT_SEED_BASE
#: Held-out seeds ``synergy-gym evaluate`` runs when neither ``--episodes`` nor the run's config says.
DEFAULT_EPISODES = 5
#: Validation workload seeds (2,000,000 on): training's periodic evaluations select checkpoints on these.
VALIDATION_SEED_BASE = 2_000_000
#: The env heuristics a run is compared with by default.
REFERENCE_BASELINES: tuple[str, ...] = ("fifo+tune", "srtf+tune")
#: The most PyTorch threads a run may ask for.
MAX_TORCH_THREADS = 1024


@dataclass
class TrainConfig:
    """All settings of a training run (defaults: the reference run on ``Synergy-small-v0``)."""

    algo: str = "maskable_ppo"
    env_id: str = "Synergy-small-v0"
    env_kwargs: dict = field(default_factory=dict)
    timesteps: int = 200_000
    n_envs: int = 4
    seed: int = 0
    device: str = "auto"
    # Optimisation (PPO, A2C; DQN uses learning_rate, batch_size, gamma).
    learning_rate: float = 3e-4
    n_steps: int = 512
    batch_size: int = 256
    n_epochs: int = 5
    gamma: float = 0.995
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    # Entropy schedule: ent_coef to ent_coef_final, linear over the run's timesteps from step 0 (a resume raising
    # timesteps stretches it), set before every policy update (TensorBoard train/ent_coef); None: constant.
    ent_coef_final: float | None = None
    clip_range: float = 0.2
    # PPO: stop an update's epochs early once the approximate KL divergence to the rollout's
    # policy exceeds 1.5 · target_kl (SB3's rule); None: no limit.
    target_kl: float | None = None
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    # DQN.
    buffer_size: int = 100_000
    learning_starts: int = 1_000
    exploration_fraction: float = 0.2
    target_update_interval: int = 1_000
    train_freq: int = 4
    # Network (synergy_gym.agents.features.SynergyExtractor): one MLP over each slot (slot_dim), pooled and in
    # slot order, joined with an MLP over the cluster, running jobs, demand, rest of the queue and
    # time (global_dim); net_arch: the policy's and value function's MLP over those features.
    net_arch: list = field(default_factory=lambda: [128, 128])
    global_dim: int = 128
    slot_dim: int = 32
    # Heads of one self-attention layer over the slot (and running-row) embeddings; 0: none.
    attention_heads: int = 0
    # The policy's action head: "linear" (SB3's: one linear layer from the net_arch MLP to every
    # slot · level and stop logit) or "per_slot" (synergy_gym.agents.slot_policy: one MLP scores each slot's
    # levels from its embedding and the context, one gives stop; net_arch is then the value
    # function's only). PPO-family algorithms only.
    action_head: str = "linear"
    # Start at an env heuristic (synergy_gym.agents.heuristic_hint; per_slot only): its next action joins the observation
    # and, × a learnt weight from hint_weight, the logits; None/"none": no hint. hint_credit "departures": PPO's policy
    # loss counts only the steps that departed from the hint, advantages unnormalised (the value loss every step).
    hint_policy: str | None = None
    hint_weight: float = 8.0
    hint_credit: str = "all"
    # Where the n_envs training envs run: "subproc" (a worker process each, SB3's SubprocVecEnv) or
    # "dummy" (in this process: no inter-process traffic, and with shared workloads the relative
    # reward's heuristic runs once per workload for all – faster on a few cores: benchmarks/bench_train.py);
    # "auto": "subproc" when this process may run on more cores than n_envs, else here with float64
    # rewards as workers return them (synergy_gym.agents.vec_envs.runs_in_process).
    vec_env: str = "auto"
    normalize_obs: bool = True
    normalize_reward: bool = True
    # Variance reduction against the workload (synergy_gym.agents.relative_reward, synergy_gym.agents.shared_workload).
    # reward "absolute": the env's reward, −∫N dt / reward_scale (N: jobs in the system), so the
    # return is −ΣJCT / scale; "heuristic_relative": −∫(N_agent − N_heuristic) dt / scale, with the
    # env heuristic relative_to run on the same workload at every reset (return −(ΣJCT −
    # ΣJCT_heuristic) / scale; about one heuristic episode of extra work per training episode).
    reward: str = "absolute"
    # An env heuristic name, or "best": the one with the lowest mean JCT on the evaluation seeds.
    relative_to: str = BEST
    # true: the k-th episode of every training env runs the workload of seed
    # 10,000,000 + 1,000,000 · seed + k (the same jobs across the envs of a rollout).
    shared_workload: bool = False
    # PyTorch's intra-op threads on the CPU (None: 1 on the CPU, PyTorch's default on CUDA).
    # The policy is a few small MLPs: with more threads each forward/backward pass spends
    # more time synchronising threads than computing, so training is slower, and much slower
    # on shared or busy cores (SubprocVecEnv workers compete for the same cores).
    torch_threads: int | None = None
    # Warm start (actor-critic algorithms): imitate the env heuristic bc_policy
    # (synergy_gym.baselines.env_heuristics) on bc_steps env steps before reinforcement
    # learning; bc_steps 0 or bc_policy None/"none": start from scratch.
    bc_steps: int = 0
    bc_policy: str | None = "fifo+tune"
    bc_epochs: int = 10
    # The imitation's learning rate (None: learning_rate).
    bc_learning_rate: float | None = None
    # DAgger (Ross et al., 2011) after the warm start: dagger_rounds rounds, each running the policy itself for
    # dagger_steps env steps (None: bc_steps), labelling the states it visits with bc_policy's actions, and fitting
    # the policy again on all the states so far (bc_epochs passes); 0: plain imitation of the heuristic's own states.
    dagger_rounds: int = 0
    dagger_steps: int | None = None
    # Env heuristics evaluated once on the validation seeds (below) at the start, for reference
    # (TensorBoard baseline/<name>/mean_jct_h, eval/jct_vs_<name>).
    reference_baselines: list = field(default_factory=lambda: list(REFERENCE_BASELINES))
    # Periodic evaluation (checkpoint selection) on validation workload seeds eval_seed_base, eval_seed_base + 1, …
    # (from 2,000,000: disjoint from the held-out seeds 1,000,000 on that results are reported on).
    eval_freq: int = 20_000
    eval_episodes: int = 5
    eval_seed_base: int = VALIDATION_SEED_BASE
    # Stop when the validation JCT stalls: from this many steps on, training ends at an
    # evaluation whose step count is at least 1.5 × the step of the best evaluation so far
    # (no improvement over the last third of the run); None: run all timesteps.
    stop_on_stall_after: int | None = None
    progress_bar: bool = True
    # Fault tolerance: every checkpoint_freq steps the model and its normalisation statistics are
    # saved to checkpoints/ in the run folder (atomically, the latest kept: synergy_gym.agents.checkpoints),
    # so that a run killed outright (SIGKILL, a power cut) resumes with --resume RUN_DIR losing at most
    # that many steps; 0: no periodic checkpoints.
    checkpoint_freq: int = 20_000

    def __post_init__(self) -> None:
        self.validate()

    @property
    def imitates(self) -> bool:
        """Whether the run starts with behaviour cloning of ``bc_policy``."""
        return bool(self.bc_steps) and self.bc_policy is not None

    @property
    def eval_seeds(self) -> list[int]:
        return [self.eval_seed_base + i for i in range(self.eval_episodes)]

    def validate(self) -> None:
        for setting in fields(self):  # NumPy's numbers, bools and arrays as Python's, as config.json will hold them
            setattr(self, setting.name, plain(getattr(self, setting.name)))
        if self.algo not in ALGOS:
            raise UnknownNameError("algorithm", self.algo, ALGOS)
        check_device(self.device)
        if not isinstance(self.env_kwargs, dict):
            raise ConfigError(f"env_kwargs must be a table of env keyword arguments, got {self.env_kwargs!r}")
        for key in self.env_kwargs:
            if not isinstance(key, str):
                raise ConfigError(f"env_kwargs: a keyword argument's name must be text, got {key!r}")
        for name in ("timesteps", "n_envs", "n_steps", "batch_size", "n_epochs", "buffer_size", "target_update_interval",
                     "train_freq", "global_dim", "slot_dim", "eval_freq", "eval_episodes", "bc_epochs"):
            setattr(self, name, check_positive(name, getattr(self, name), integer=True))
        heuristics = heuristic_names()
        if isinstance(self.bc_policy, str) and self.bc_policy.lower() == "none":
            self.bc_policy = None
        if self.bc_policy is not None and self.bc_policy not in heuristics:
            raise UnknownNameError("bc_policy", self.bc_policy, (*heuristics, "none"))
        if isinstance(self.reference_baselines, tuple):
            self.reference_baselines = list(self.reference_baselines)
        if not isinstance(self.reference_baselines, list):
            raise ConfigError(f"reference_baselines must be a list of env heuristic names, got {self.reference_baselines!r}")
        for name in self.reference_baselines:
            if name not in heuristics:
                raise UnknownNameError("reference baseline", name, heuristics)
        if self.reward not in REWARDS:
            raise UnknownNameError("reward", self.reward, REWARDS)
        if self.relative_to != BEST and self.relative_to not in heuristics:
            raise UnknownNameError("relative_to heuristic", self.relative_to, (BEST, *heuristics))
        if not isinstance(self.shared_workload, bool):
            raise ConfigError(f"shared_workload must be true or false, got {self.shared_workload!r}")
        if self.vec_env not in VEC_ENVS:
            raise UnknownNameError("vec_env", self.vec_env, VEC_ENVS)
        if self.action_head not in ACTION_HEADS:
            raise UnknownNameError("action_head", self.action_head, ACTION_HEADS)
        if self.action_head == "per_slot" and self.algo == "dqn":
            raise ConfigError('action_head "per_slot" needs an actor-critic algorithm (maskable_ppo, ppo, a2c), not dqn')
        if self.bc_learning_rate is not None:
            check_positive("bc_learning_rate", self.bc_learning_rate)
        if self.torch_threads is not None:
            self.torch_threads = check_positive("torch_threads", self.torch_threads, integer=True)
            if self.torch_threads > MAX_TORCH_THREADS:  # (a billion made OpenMP fail after the run folder was made)
                raise ConfigError(f"torch_threads must be at most {MAX_TORCH_THREADS:,}, got {self.torch_threads:,}")
        if self.stop_on_stall_after is not None:
            self.stop_on_stall_after = check_positive("stop_on_stall_after", self.stop_on_stall_after, integer=True)
        if self.target_kl is not None:
            check_positive("target_kl", self.target_kl)
        if self.ent_coef_final is not None:
            check_positive("ent_coef_final", self.ent_coef_final, allow_zero=True)
            if self.algo == "dqn":
                raise ConfigError("ent_coef_final (entropy schedule) needs an actor-critic algorithm, not dqn")
        for name in ("seed", "learning_starts", "bc_steps", "eval_seed_base", "checkpoint_freq", "dagger_rounds",
                     "attention_heads"):
            setattr(self, name, check_positive(name, getattr(self, name), integer=True, allow_zero=True))
        if self.seed >= 2**32:
            raise ConfigError(f"seed must be below 2**32 = {2**32:,} (NumPy's and PyTorch's seeds), got {self.seed!r}")
        if self.attention_heads and self.slot_dim % self.attention_heads:
            raise ConfigError(f"attention_heads {self.attention_heads} must divide slot_dim {self.slot_dim}")
        if self.dagger_steps is not None:
            self.dagger_steps = check_positive("dagger_steps", self.dagger_steps, integer=True)
        if self.imitates and self.algo == "dqn":
            raise ConfigError("bc_steps (imitation warm start) needs an actor-critic algorithm, not dqn")
        for name in ("learning_rate", "gamma", "gae_lambda", "clip_range", "vf_coef", "max_grad_norm", "exploration_fraction"):
            check_positive(name, getattr(self, name))
        for name in ("gamma", "gae_lambda", "exploration_fraction"):  # discounts and fractions
            if getattr(self, name) > 1:
                raise ConfigError(f"{name} must be in (0, 1], got {getattr(self, name)!r}")
        check_positive("ent_coef", self.ent_coef, allow_zero=True)
        if (sizes := layer_sizes(self.net_arch)) is None:
            raise ConfigError(f"net_arch must be a list of positive layer sizes, got {self.net_arch!r}")
        self.net_arch = sizes
        for name in ("normalize_obs", "normalize_reward", "progress_bar"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if not isinstance(self.env_id, str):
            raise ConfigError(f"env_id must be an environment id such as Synergy-small-v0, got {self.env_id!r}")
        check_hyperparameters(self)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str = "config") -> TrainConfig:
        if not isinstance(values, Mapping):
            raise ConfigError(f"{source}: settings must be a mapping of setting names to values, got {values!r}")
        valid = {f.name for f in fields(cls)}
        unknown = [k for k in values if k not in valid]
        if unknown:
            raise ConfigError(f"{source}: unknown setting {unknown[0]!r}; valid: {', '.join(sorted(valid))}")
        return cls(**dict(values))


def check_device(device: object) -> str:
    """``device`` if it is one of :data:`DEVICES` or ``cuda:N``; else an error naming the valid ones."""
    if not (isinstance(device, str) and (device in DEVICES or CUDA_INDEX.fullmatch(device))):
        raise UnknownNameError("device", device, (*DEVICES, "cuda:N"))
    return device


def heuristic_names() -> tuple[str, ...]:
    """The env heuristics and their named variants (:data:`synergy_gym.baselines.env_heuristics.NAMED_HEURISTICS`)."""
    from synergy_gym.baselines.env_heuristics import NAMED_HEURISTICS

    return NAMED_HEURISTICS


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The settings in a TOML (``.toml``) or YAML (``.yaml``/``.yml``) file, or a saved ``config.json``.

    In a YAML file a number setting may be written ``3e-4`` or ``1e5``, which YAML 1.1 reads as text
    (:func:`yaml_numbers`).

    Whatever is wrong with the file (unreadable, not UTF-8 text, malformed, not a table) is one
    :class:`ConfigError` naming it.
    """
    path = require_file(path, "config file", ConfigError)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise ConfigError(f"config file {path}: use .toml, .yaml/.yml or .json")
    text = read_text_file(path, "config file")
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # the parsers raise their own error types
        raise ConfigError(f"config file {path} is malformed: {first_line(exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a table of settings")
    return yaml_numbers(data) if suffix in (".yaml", ".yml") else data


#: A number written as text: what YAML 1.1 (PyYAML) reads ``3e-4`` and ``1e5`` as (its floats need ``3.0e-4``).
NUMBER_TEXT = re.compile(r"[-+]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def yaml_numbers(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the YAML text of a number (``3e-4``, ``1e5``) as that number, for the settings that are numbers,
    those of its ``env_kwargs`` table among them."""
    from synergy_gym.env import EnvConfig

    out = _numbers_of(data, _number_fields(TrainConfig))
    if isinstance(out.get("env_kwargs"), dict):
        out["env_kwargs"] = _numbers_of(out["env_kwargs"], _number_fields(EnvConfig))
    return out


def _number_fields(cls: type) -> dict[str, str]:
    """``{field: "int" or "float"}`` of the dataclass ``cls``'s number fields."""
    kinds = {f.name: str(f.type).removesuffix(" | None") for f in fields(cls)}
    return {name: kind for name, kind in kinds.items() if kind in ("int", "float")}


def _numbers_of(data: dict[str, Any], numbers: dict[str, str]) -> dict[str, Any]:
    """``data`` with each number field's text of a number as the number (an int field's whole number an int)."""
    out = dict(data)
    for key, value in data.items():
        if key in numbers and isinstance(value, str) and NUMBER_TEXT.fullmatch(value):
            text = value.replace("_", "")
            if numbers[key] == "int" and text.lstrip("+-").isdigit():  # exact, also past float's 2**53
                out[key] = int(text)
                continue
            number = float(text)
            out[key] = int(number) if numbers[key] == "int" and number.is_integer() else number
    return out


def read_text_file(path: Path, kind: str) -> str:
    """The UTF-8 text of ``path``; a file that cannot be read or is not UTF-8 text is a :class:`ConfigError` naming it."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{kind} {path} cannot be read: {exc.strerror or type(exc).__name__}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{kind} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                          "is it the right file?") from None


def first_line(exc: BaseException) -> str:
    """An exception's message, first line only (its type when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_run_config(path: str | Path) -> TrainConfig:
    """A run's saved ``config.json`` (or any config file) as a :class:`TrainConfig`; every error names the file."""
    values = load_config_file(path)
    try:
        return TrainConfig.from_mapping(values, source=str(path))
    except ConfigError as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith(str(path)) else f"{path}: {message}") from None
    except SynergyGymError as exc:
        raise ConfigError(f"{path}: {exc}") from None
