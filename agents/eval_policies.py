"""What ``synergy-gym evaluate`` runs, and what its rows and decision logs are called.

``--baselines`` and ``--sim-policies`` pick the env heuristics and simulator
policies (:func:`parse_baselines`, :func:`parse_sim_policies`); each ``--model``
gets a row name (:func:`agent_labels`: its ``--label``, else the ``--model`` argument
as given), and each policy that acts through the environment a decision log
file (:func:`decisions_file_name`, :func:`decisions_files`). The row name is the
agent's name everywhere: the table, ``results.csv``, ``results.json``, the CDF's
legend, ``--jobs-csv`` and the decision log's file name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from synergy_gym.cli.args import list_items
from synergy_gym.errors import ConfigError, UnknownNameError

#: The name of the models' mean row (several ``--model``), which no ``--label`` may take then.
MEAN_AGENT = "agent"


def agent_labels(models: Sequence[str | Path], labels: list[str] | None) -> list[str]:
    """Each model's row name: its ``--label``, else the ``--model`` argument as given.

    ``models`` are the arguments as typed (``pretrained:small-scarce``,
    ``runs/x/best_model.zip``). A default name that repeats (one model given twice)
    gets its position (``[i]``), as does, with several models, a model called
    ``agent`` (the name of the models' mean row). Given labels must be as many as the
    models, non-empty and distinct, and with several models none may be ``agent``.
    """
    if labels:
        if not models:
            raise ConfigError(f"--label needs --model: {len(labels)} label(s) for no --model")
        if len(labels) != len(models):
            raise ConfigError(f"--label: {len(labels)} label(s) for {len(models)} --model argument(s); "
                              f"give one --label per --model, in the same order")
        for label in labels:
            if not label.strip():
                raise ConfigError("--label: a label may not be empty")
        repeated = sorted({x for x in labels if labels.count(x) > 1})
        if repeated:
            raise ConfigError(f"--label {repeated[0]!r} is given twice; each model needs its own label")
        if len(models) > 1 and MEAN_AGENT in labels:
            raise ConfigError(f"--label {MEAN_AGENT!r} is the name of the models' mean row; choose another label")
        return list(labels)
    names = [str(m) for m in models]
    return [f"{n}[{i}]" if names.count(n) > 1 or (len(names) > 1 and n == MEAN_AGENT) else n
            for i, n in enumerate(names)]


def decisions_file_name(label: str) -> str:
    """``<label>.jsonl`` with characters other than letters, digits and ``._+=-`` as ``_`` (``run/best`` → ``run_best``)."""
    stem = re.sub(r"[^A-Za-z0-9._+=-]", "_", label).lstrip(".-")
    return f"{stem or 'policy'}.jsonl"


def decisions_files(agent_names: list[str], env_names: tuple[str, ...]) -> dict[str, str]:
    """``{file name: label}`` of the decision logs; two policies whose files would coincide are an error."""
    files: dict[str, str] = {}
    for source, label in [("agent", a) for a in agent_names] + [("env", n) for n in env_names]:
        name = decisions_file_name(label)
        if name in files:
            raise ConfigError(f"--decisions: the decisions of {files[name]} and {source} {label!r} would both go "
                              f"to {name}; give the models other --label values")
        files[name] = f"{source} {label!r}"
    return files


def default_sim_policies() -> tuple[str, ...]:
    """The simulator policies ``all`` and ``sim`` include unless ``--sim-policies`` says otherwise."""
    from synergy_gym.baselines.sim_on_env import SIM_POLICIES

    return SIM_POLICIES


def parse_sim_policies(text: str) -> tuple[str, ...]:
    """``--sim-policies``: simulator policy names and bounds separated by commas (any case), or ``none``."""
    from synergy_gym.baselines.registry import parse_policy_list
    from synergy_gym.baselines.sim_on_env import BOUNDS

    if text.strip().lower() in ("", "none"):
        return ()
    names = [item.lower() for item in list_items(text, "--sim-policies")]
    bound = tuple(b for b in BOUNDS if b in names)
    rest = ",".join(n for n in names if n not in BOUNDS)
    if not rest:
        return bound
    try:
        return parse_policy_list(rest) + bound
    except UnknownNameError as exc:
        raise ConfigError(f"--sim-policies {text!r}: {exc}; or a bound: {', '.join(BOUNDS)}") from None


def parse_baselines(text: str, sim_policies: tuple[str, ...] | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``--baselines`` → (env heuristic names, simulator policy names), each de-duplicated in order.

    ``all``: every env heuristic and ``sim_policies`` (default :data:`synergy_gym.baselines.sim_on_env.SIM_POLICIES`,
    which include the bounds; a non-empty one given with neither ``all`` nor ``sim``, a one-line error: it
    would do nothing);
    ``env``, ``sim``, ``none``; ``env:NAME``, ``sim:NAME``; a bare NAME selects the env
    heuristic and/or the simulator policy of that name (or the bound: ``no-wait-bound``, ``contention-bound``).
    """
    from synergy_gym.baselines.env_heuristics import HEURISTIC_NAMES, NAMED_HEURISTICS, VARIANT_NAMES
    from synergy_gym.baselines.registry import make_policy
    from synergy_gym.baselines.sim_on_env import BOUNDS

    sims = default_sim_policies() if sim_policies is None else tuple(sim_policies)
    items = [item.lower() for item in list_items(text, "--baselines")]
    if sim_policies and not {"all", "sim"} & set(items):  # (``none`` asks for nothing: it is accepted)
        raise ConfigError(f"--sim-policies {','.join(sim_policies)}: has no effect with --baselines {text!r}, which "
                          "runs no simulator policies by that list (it applies to --baselines all or sim)")
    env: list[str] = []
    sim: list[str] = []
    for item in items:
        if item in ("all", "env", "sim", "none"):
            env += list(HEURISTIC_NAMES) if item in ("all", "env") else []
            sim += list(sims) if item in ("all", "sim") else []
            continue
        source, sep, name = item.partition(":")
        if not sep:
            source, name = "", item
        elif source not in ("env", "sim"):
            raise ConfigError(f"--baselines {text!r}: unknown source {source!r} in {item!r}; use env:NAME or sim:NAME")
        is_env = name in NAMED_HEURISTICS and source in ("", "env")
        try:
            if name not in BOUNDS:
                make_policy(name)
            is_sim = source in ("", "sim")
        except UnknownNameError:
            is_sim = False
        if not (is_env or is_sim):
            what = {"env": "env heuristic", "sim": "simulator policy"}.get(source, "baseline")
            raise ConfigError(
                f"--baselines {text!r}: unknown {what} {name!r}; valid: all, env, sim, none, the env heuristics "
                f"{', '.join(HEURISTIC_NAMES)} (and, by name only, {', '.join(VARIANT_NAMES)}), or a simulator policy "
                f"<order>+<allocation> such as "
                f"{', '.join(default_sim_policies())}"
            )
        env += [name] if is_env else []
        sim += [name] if is_sim else []
    return tuple(dict.fromkeys(env)), tuple(dict.fromkeys(sim))
