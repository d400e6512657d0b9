"""``synergy-gym train --resume``: the checkpoint a run continues from, checked before anything is written.

``--resume`` takes a checkpoint zip (``best_model.zip``, ``last_model.zip``, a periodic
``checkpoints/rl_model_<step>_steps.zip``, any SB3 zip of the algorithm) or a run folder, which
continues from its latest checkpoint (:func:`resume_target`; :mod:`synergy_gym.agents.checkpoints`).
:func:`check_resume` loads the checkpoint once without environments and refuses it – before the run
writes anything – when it cannot be read, does not fit the configured environment, lacks the
normalisation statistics a normalised run needs, was trained with another algorithm or network than the
config now says (:data:`KEPT_SETTINGS`: the model would go on unchanged while ``config.json`` said
otherwise), or has already reached ``timesteps``: a resumed run continues to the configured total number
of steps (Stable-Baselines3's ``reset_num_timesteps=False``), not that many more, with the config's
hyper-parameters (:func:`synergy_gym.agents.models.resume_model`, which reseeds it with ``seed`` + the
checkpoint's step). Resuming into the checkpoint's own run folder keeps its evaluations up to the checkpoint
(:func:`kept_history`), so ``best_model.zip`` is replaced only by a better one. The warm start runs only at
step 0 (a run stopped during it saves its model there): past it, warm-start settings given are notes
(:func:`resume_notes`) and the run records the checkpoint's own (:func:`kept_warm_start`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synergy_gym.agents.checkpoints import CHECKPOINT_DIR, LAST_MODEL, latest_checkpoint
from synergy_gym.agents.config import TrainConfig
from synergy_gym.agents.model_checks import check_model_spaces, check_stats_spaces, env_space_parts
from synergy_gym.agents.models import load_model
from synergy_gym.agents.normalization import find_stats, normalises_observations, read_stats, stats_candidates
from synergy_gym.agents.provenance import run_config, run_folder
from synergy_gym.agents.run_folder import check_not_locked, unfinished_evaluation
from synergy_gym.cli.files import check_input_file
from synergy_gym.errors import ConfigError, PathError


def resume_target(path: Path | str) -> Path:
    """``--resume``: a checkpoint zip as given, or a run folder's latest checkpoint (not while another training
    process holds the folder: it may prune that checkpoint); one-line errors otherwise."""
    path = Path(path)
    if path.is_dir():
        check_not_locked(path)
        latest = latest_checkpoint(path)
        if latest is None:
            raise PathError(f"--resume {str(path)!r} is a folder with no checkpoint to continue from "
                            f"({CHECKPOINT_DIR}/rl_model_<step>_steps.zip or {LAST_MODEL})")
        return latest
    return check_input_file(path, "--resume")


def saved_config_path(checkpoint: Path) -> Path | None:
    """The ``config.json`` of the checkpoint's run (None if it has none)."""
    saved = run_folder(checkpoint) / "config.json"
    return saved if saved.is_file() else None


#: The settings of the network, which :func:`model_network` reads from a model.
NETWORK_SETTINGS = ("action_head", "net_arch", "global_dim", "slot_dim", "attention_heads", "hint_policy")
#: Settings a trained model keeps: a resumed run cannot change them (its hyper-parameters it can).
KEPT_SETTINGS = ("algo", *NETWORK_SETTINGS, "normalize_obs")


#: Settings of the evaluations a run resumed in its own folder keeps (:func:`kept_history`): they cannot change there.
HISTORY_SETTINGS = ("env_id", "env_kwargs", "eval_episodes", "eval_seed_base")
#: Settings of the warm start, which a run does only at step 0 (fresh, or resumed from a checkpoint at step 0).
WARM_START_SETTINGS = ("bc_steps", "bc_policy", "bc_epochs", "bc_learning_rate", "dagger_rounds", "dagger_steps")


def check_resume(checkpoint: Path, cfg: TrainConfig, in_place: bool = False) -> int:
    """Refuse a checkpoint ``cfg`` cannot continue from (see the module); the step count it was saved at.

    ``in_place``: the run continues in the checkpoint's own folder, keeping its evaluations, so the settings
    they were made with (:data:`HISTORY_SETTINGS`) cannot change either.
    """
    trained = run_config(checkpoint)
    if trained is not None:
        check_kept_settings(checkpoint, cfg, trained, KEPT_SETTINGS + (HISTORY_SETTINGS if in_place else ()))
    model = load_model(checkpoint, cfg.algo, "cpu")  # a look only: the run loads it again on its device
    if trained is None:  # no record of its run: the network is read from the model itself
        check_kept_settings(checkpoint, cfg, model_network(model) or cfg, NETWORK_SETTINGS,
                            advice="its run's config.json is missing, so set them as the model has them (--config)")
    check_hint_weight(checkpoint, cfg, model)
    env_parts = env_space_parts(cfg.env_id, cfg.env_kwargs)
    check_model_spaces(checkpoint, model, trained, cfg.env_id, cfg.env_kwargs, env_parts, flag="--resume")
    stats = find_stats(checkpoint)
    if stats is None and (cfg.normalize_obs or cfg.normalize_reward):
        raise ConfigError(f"--resume {checkpoint}: its normalisation statistics are missing (looked for "
                          f"{', '.join(map(str, stats_candidates(checkpoint)))}); a normalised run cannot continue "
                          "without them")
    if stats is not None:
        loaded = read_stats(stats)
        if normalises_observations(loaded) != cfg.normalize_obs:  # (with no config.json, only they say)
            raise ConfigError(f"--resume {checkpoint}: a resumed run keeps its normalisation, but the config changes "
                              f"normalize_obs {str(cfg.normalize_obs).lower()} (its statistics {stats}: "
                              f"{str(not cfg.normalize_obs).lower()}); leave it as trained, or train a new run")
        check_stats_spaces(checkpoint, loaded, model, trained, cfg.env_id, cfg.env_kwargs, env_parts, flag="--resume")
    steps = int(model.num_timesteps)
    if steps >= cfg.timesteps and not evaluation_only(checkpoint, cfg, steps, in_place):
        unfinished = "" if in_place or not evaluation_only(checkpoint, cfg, steps, True) else (
            "; its final evaluation did not finish: --resume it in its own folder (no --out) to run it")
        raise ConfigError(f"--resume {checkpoint}: the checkpoint is at step {steps:,} and timesteps is {cfg.timesteps:,}, "
                          "so nothing is left to train; give a larger --timesteps (the total to reach) to train further"
                          + unfinished)
    return steps


def check_hint_weight(checkpoint: Path, cfg: TrainConfig, model: Any) -> None:
    """Refuse a ``hint_weight`` other than the one a hinted model started from: the model goes on with its learnt
    weight, and the run's ``config.json`` would name a start that never was."""
    kwargs = getattr(model, "policy_kwargs", None) or {}
    if kwargs.get("hint_policy") and float(kwargs.get("hint_weight", cfg.hint_weight)) != cfg.hint_weight:
        raise ConfigError(f"--resume {checkpoint}: a resumed run keeps its hint's learnt weight, but the config changes "
                          f"hint_weight {_shown(cfg.hint_weight)} (the checkpoint's start: "
                          f"{_shown(kwargs['hint_weight'])}); leave it as trained, or train a new run")


def check_kept_settings(checkpoint: Path, cfg: TrainConfig, trained: TrainConfig,
                        kept: tuple[str, ...] = KEPT_SETTINGS, advice: str | None = None) -> None:
    """Refuse settings of ``kept`` that ``cfg`` changes from the checkpoint's run ``trained``: the model would
    continue unchanged while the run's ``config.json`` said otherwise (:data:`KEPT_SETTINGS`), or the kept
    evaluations would be compared with ones made otherwise (:data:`HISTORY_SETTINGS`)."""
    names = [name for name in kept if getattr(cfg, name) != getattr(trained, name)]
    if not names:
        return
    changed = "; ".join(f"{name} {_shown(getattr(cfg, name))} (the checkpoint's: {_shown(getattr(trained, name))})"
                        for name in names)
    them = "it" if len(names) == 1 else "them"
    if set(names) & set(KEPT_SETTINGS):
        raise ConfigError(f"--resume {checkpoint}: a resumed run keeps its algorithm and network, but the config "
                          f"changes {changed}; {advice or f'leave {them} as trained, or train a new run'}")
    raise ConfigError(f"--resume {checkpoint}: continuing in the run's own folder keeps its evaluations, but the "
                      f"config changes {changed}; leave {them} as trained, or continue into a new folder with --out")



def model_network(model: Any) -> TrainConfig | None:
    """A config whose :data:`NETWORK_SETTINGS` are those of ``model`` as :func:`~synergy_gym.agents.models.build_model`
    builds it (None: a model with another features extractor, whose network no setting describes)."""
    from dataclasses import replace

    from synergy_gym.agents.features import SynergyExtractor

    kwargs = getattr(model, "policy_kwargs", None) or {}
    if kwargs.get("features_extractor_class") is not SynergyExtractor:
        return None
    extractor = kwargs.get("features_extractor_kwargs", {})
    net_arch = kwargs.get("net_arch") or []
    per_slot = isinstance(net_arch, dict)  # the per-slot head: its value function's layers; no policy MLP
    return replace(TrainConfig(), action_head="per_slot" if per_slot else "linear",
                   net_arch=list(net_arch["vf"] if isinstance(net_arch, dict) else net_arch),
                   global_dim=extractor.get("global_dim"), slot_dim=extractor.get("slot_dim"),
                   attention_heads=extractor.get("attention_heads", 0), hint_policy=kwargs.get("hint_policy"))


def resume_notes(checkpoint: Path, cfg: TrainConfig, steps: int, in_place: bool = False) -> list[str]:
    """``note:`` lines for a run resumed at step ``steps``: that it is a new run beside the checkpoint's (not
    ``in_place``), and for its warm start settings it is given but does not use (a run imitates only at step 0),
    or, at step 0, that it imitates first (a run stopped during its warm start saves its model at step 0). Read
    before the run's ``config.json`` is rewritten (:func:`kept_warm_start`)."""
    run = run_folder(checkpoint)
    new_run = [] if in_place or not (run / "eval.csv").is_file() else [  # a training run's, not an exported model
        f"this is a new run: the evaluations of {run} up to step {steps:,} stay there, and this run's "
        f"best_model.zip is the best of its own (--resume {run} or --out {run} continues that run in its folder)"]
    if steps == 0:
        return new_run + ([f"the checkpoint is at step 0: the warm start runs first, imitating {cfg.bc_policy} for "
                           f"{cfg.bc_steps:,} steps as in a fresh run"] if cfg.imitates else [])
    trained = run_config(checkpoint) or TrainConfig()
    changed = [name for name in WARM_START_SETTINGS if getattr(cfg, name) != getattr(trained, name)]
    return new_run + [f"{name} {_shown(getattr(cfg, name))} has no effect on a run resumed at step {steps:,}: the warm "
                      "start runs only at step 0" for name in changed]


def kept_warm_start(checkpoint: Path, cfg: TrainConfig, steps: int) -> TrainConfig:
    """``cfg`` as a run resumed at step ``steps`` records it: past step 0 with the warm-start settings of the
    checkpoint's run (the defaults when its ``config.json`` is missing), the ones its model was trained with, not
    ones given now that have no effect (:func:`resume_notes`)."""
    from dataclasses import replace

    if steps == 0:
        return cfg
    trained = run_config(checkpoint) or TrainConfig()
    return replace(cfg, **{name: getattr(trained, name) for name in WARM_START_SETTINGS})


def _shown(value: Any) -> str:
    """A setting as the config files write it (lists and tuples alike, strings quoted)."""
    return repr(list(value)) if isinstance(value, (list, tuple)) else repr(value)


def resumes_in_place(checkpoint: Path, run_dir: Path) -> bool:
    """Whether the run continues in the checkpoint's own run folder."""
    return run_folder(checkpoint).resolve() == Path(run_dir).resolve()


def evaluation_only(checkpoint: Path, cfg: TrainConfig, steps: int, in_place: bool) -> bool:
    """Whether a run resumed at ``steps`` only runs its final evaluation, which Ctrl-C cut short (or came before): in
    its own folder, with no row of ``eval.csv`` at that step and the run's ``timesteps`` as they were, at or past them
    – or ended earlier on a stall, as the record of the unfinished evaluation says
    (:func:`~synergy_gym.agents.run_folder.unfinished_evaluation`)."""
    if not in_place or steps == 0:  # at step 0 the warm start runs again, and its evaluation with it
        return False
    run = run_folder(checkpoint)
    if any(row["timesteps"] == steps for row in kept_history(run, steps)):
        return False
    trained = run_config(checkpoint)
    if trained is not None and trained.timesteps != cfg.timesteps:  # other timesteps: it trains on, or is refused
        return False
    return steps >= cfg.timesteps or unfinished_evaluation(run, steps) is True


def kept_history(run_dir: Path, steps: int) -> list[dict[str, Any]]:
    """The run's ``eval.csv`` rows up to step ``steps`` (the evaluations a run resumed in place keeps), and the row of
    the model ``best_model.zip`` holds if it came later (a run killed after a new best, before its next checkpoint):
    that model stays the best until a better one is found, and a row of ``eval.csv`` says what it is."""
    import pandas as pd

    path = Path(run_dir) / "eval.csv"
    try:
        history = pd.read_csv(path)
    except (OSError, ValueError):
        return []
    if "timesteps" not in history or "mean_jct_h" not in history:
        return []
    kept = history["timesteps"] <= steps
    if (Path(run_dir) / "best_model.zip").is_file() and len(history):
        kept.iloc[int(history["mean_jct_h"].to_numpy().argmin())] = True
    return [dict(row) for row in history[kept].to_dict("records")]
