"""``python -m synergy_gym.agents.export_pretrained RUN/best_model.zip NAME --command "..."``: ship a run's checkpoint.

Writes ``agents/pretrained/NAME/`` (:mod:`synergy_gym.agents.pretrained_policies`): the model without its
optimiser state, its normalisation statistics (none for a run without observation normalisation), the run's
``config.json`` and a ``card.json`` with the training command, the checkpoint's step (the step count saved in
it) and validation JCT (its step's row of the run's ``eval.csv``; null when no evaluation ran at that step),
and the JCT it gives on held-out seed 1,000,000 (which ``tests/agents/test_pretrained.py`` reproduces after
loading). Missing files, and a folder ``--dest`` that is not a policy's, are refused before the held-out
evaluation runs; every refusal is one line on stderr (exit status 2), and a refused export writes nothing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synergy_gym.agents.pretrained_policies import check_export_dest, export_pretrained, export_sources, pretrained_root
from synergy_gym.agents.run_folder import code_root
from synergy_gym.errors import PathError, SynergyGymError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PROG = "python -m synergy_gym.agents.export_pretrained"


def card_for(model_zip: Path, name: str, command: str) -> dict[str, Any]:
    """The ``card.json`` of a checkpoint: provenance, its step and validation JCT, and its JCT on held-out seed 1,000,000.

    The step is the one saved in the model; its validation JCT is the ``eval.csv`` row of that step (for
    ``best*.zip`` the lowest of them, else the latest), None if no evaluation ran at that step (a model saved
    on Ctrl-C, a checkpoint between evaluations). The held-out figure is what
    :func:`synergy_gym.agents.load_pretrained` must reproduce on a fresh install (a test checks it).
    """
    from synergy_gym.agents.config import HELD_OUT_SEED_BASE
    from synergy_gym.agents.model_checks import check_agent_fits, env_space_parts
    from synergy_gym.agents.models import load_agent
    from synergy_gym.experiments.evaluation import evaluate

    model_zip = Path(model_zip)
    run, _, cfg = export_sources(model_zip)  # what is missing, refused before any work
    agent = load_agent(model_zip, cfg, "cpu", name)
    # A model whose spaces the run's environment no longer has (an older synergy-gym's) is one line, not a traceback.
    check_agent_fits(model_zip, agent, cfg, cfg.env_id, cfg.env_kwargs, env_space_parts(cfg.env_id, cfg.env_kwargs),
                     flag="export:")
    step = int(agent.model.num_timesteps)
    chosen = evaluation_of(run, step, best=model_zip.name.startswith("best"))
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
        "checkpoint_step": step,
        "validation_seeds": cfg.eval_seeds,
        "validation_mean_jct_h": None if chosen is None else float(chosen["mean_jct_h"]),
        "check_seed": HELD_OUT_SEED_BASE,
        "check_mean_jct_h": float(check["mean_jct_h"].iloc[0]),
    }


def evaluation_of(run: Path, step: int, best: bool = False) -> pd.Series | None:
    """The run's ``eval.csv`` row of a model saved at ``step``: the lowest of that step's rows for the best model
    (the one ``best_model.zip`` holds), else the latest; None if the run has no evaluation at that step."""
    import pandas as pd

    try:
        history = pd.read_csv(run / "eval.csv")
    except (OSError, ValueError):  # no evaluation yet (a run stopped before its first), or no rows
        return None
    if "timesteps" not in history or "mean_jct_h" not in history:
        return None
    rows = history[history["timesteps"] == step]
    if rows.empty:
        return None
    return rows.loc[rows["mean_jct_h"].idxmin()] if best else rows.iloc[-1]


def default_dest(name: str) -> Path:
    """``agents/pretrained/NAME`` of the source checkout the package runs from; outside one (an installed package, whose
    shipped policies it would replace and whose folder it would outlive an uninstall in) :class:`PathError`."""
    if code_root() is None:  # an installed package: site-packages/synergy_gym/agents/pretrained
        raise PathError(f"export: without --dest it would write into the installed package ({pretrained_root() / name}); "
                        "give --dest DIR, a folder of your own")
    return pretrained_root() / name


def main(argv: list[str] | None = None) -> int:
    """``python -m synergy_gym.agents.export_pretrained RUN/best_model.zip NAME --command "..."``: ship a checkpoint."""
    import argparse

    parser = argparse.ArgumentParser(prog=PROG, description=main.__doc__)
    parser.add_argument("model", type=Path, help="a run's best_model.zip, last_model.zip or periodic checkpoint")
    parser.add_argument("name", help="the policy's name (agents/pretrained/NAME)")
    parser.add_argument("--command", required=True, help="the training command, recorded in card.json")
    parser.add_argument("--dest", type=Path, default=None,
                        help="folder to write, replaced whole (default: agents/pretrained/NAME in a source checkout, "
                             "which pretrained:NAME then loads; an installed package needs --dest)")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", args.name):  # what pretrained:NAME can load: one folder name
        parser.error(f"name {args.name!r}: must be one folder name of letters, digits and ._+- "
                     "(pretrained:NAME loads agents/pretrained/NAME)")
    try:
        dest = check_export_dest(args.dest or default_dest(args.name), args.model)  # before the held-out evaluation
        card = card_for(args.model, args.name, args.command)
        export_pretrained(args.model, dest, card)
    except SynergyGymError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in dest.iterdir())
    print(f"wrote {dest} ({size:,} bytes); held-out seed {card['check_seed']}: mean JCT {card['check_mean_jct_h']:.3f} h")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
