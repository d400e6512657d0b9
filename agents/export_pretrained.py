"""``python -m synergy_gym.agents.export_pretrained RUN/best_model.zip NAME --command "..."``: ship a run's checkpoint.

Writes ``agents/pretrained/NAME/`` (:mod:`synergy_gym.agents.pretrained_policies`): the model without its
optimiser state, its normalisation statistics, the run's ``config.json`` and a ``card.json``
with the training command, the checkpoint's step and validation JCT, and the JCT it gives on
held-out seed 1,000,000 (which ``tests/agents/test_pretrained.py`` reproduces after loading).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synergy_gym.agents.pretrained_policies import FILES, export_pretrained, pretrained_root


def card_for(model_zip: Path, name: str, command: str) -> dict[str, Any]:
    """The ``card.json`` of a checkpoint: provenance, its validation JCT, and its JCT on held-out seed 1,000,000.

    The held-out figure is what :func:`synergy_gym.agents.load_pretrained` must reproduce on a fresh install (a test
    checks it).
    """
    import pandas as pd

    from synergy_gym.agents.config import HELD_OUT_SEED_BASE, load_run_config
    from synergy_gym.agents.models import load_agent
    from synergy_gym.agents.provenance import run_folder
    from synergy_gym.experiments.evaluation import evaluate

    model_zip = Path(model_zip)
    run = run_folder(model_zip)
    cfg = load_run_config(run / "config.json")
    history = pd.read_csv(run / "eval.csv")
    chosen = history.iloc[history["mean_jct_h"].argmin()] if model_zip.name.startswith("best") else history.iloc[-1]
    agent = load_agent(model_zip, cfg, "cpu", name)
    check = evaluate(agent, cfg.env_id, [HELD_OUT_SEED_BASE], name=name, **cfg.env_kwargs)
    return {
        "name": name,
        "env_id": cfg.env_id,
        "env_kwargs": cfg.env_kwargs,
        "algo": cfg.algo,
        "training_seed": cfg.seed,
        "trained_with": command,
        "run_folder": run.name,
        "checkpoint": model_zip.name,
        "checkpoint_step": int(chosen["timesteps"]),
        "validation_seeds": cfg.eval_seeds,
        "validation_mean_jct_h": float(chosen["mean_jct_h"]),
        "check_seed": HELD_OUT_SEED_BASE,
        "check_mean_jct_h": float(check["mean_jct_h"].iloc[0]),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m synergy_gym.agents.export_pretrained RUN/best_model.zip NAME --command "..."``: ship a checkpoint."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m synergy_gym.agents.export_pretrained", description=main.__doc__)
    parser.add_argument("model", type=Path, help="a run's best_model.zip or last_model.zip")
    parser.add_argument("name", help="the policy's name (agents/pretrained/NAME)")
    parser.add_argument("--command", required=True, help="the training command, recorded in card.json")
    parser.add_argument("--dest", type=Path, default=None, help="folder to write (default: agents/pretrained/NAME)")
    args = parser.parse_args(argv)
    card = card_for(args.model, args.name, args.command)
    dest = export_pretrained(args.model, args.dest or pretrained_root() / args.name, card)
    size = sum((dest / f).stat().st_size for f in FILES)
    print(f"wrote {dest} ({size:,} bytes); held-out seed {card['check_seed']}: mean JCT {card['check_mean_jct_h']:.3f} h")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
