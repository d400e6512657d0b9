"""The env heuristics' episodes on a run's evaluation seeds, kept on disk: scored once per code, env and seed list.

Every training run starts by running every env heuristic on its evaluation seeds
(:func:`synergy_gym.agents.baseline_scores.evaluate_baselines`; on ``Synergy-small-*`` 40
episodes, several seconds of a short run). The heuristics are deterministic – ``random`` draws
from its own generator seeded with the run's seed – so the same heuristics on the same env,
env keyword arguments and seeds give the same rows every time, as long as the code is the same.
:func:`cached_scores` keeps those rows in the cache folder, under a key of

* the env id and how it is registered (entry point, kwargs), its keyword arguments, the seeds, the heuristics'
  names and ``random``'s seed, and
* a fingerprint of the code that computes them (:func:`code_fingerprint`: every Python and data
  file of the ``synergy_gym`` package, the agents' scoring code, the heuristics and the trace readers – the shipped
  pretrained policies aside – and numpy's and numba's versions),

so that a change to the simulator, the environment or a heuristic scores them afresh. Runs
that differ only in their training seed (``random``'s seed aside), length or hyper-parameters
share the rows. The rows are stored as JSON (every float exactly); a cached row's ``wall_s``
is the time of the run that scored it. Env keyword arguments other than numbers, booleans and
None (a trace or workload file may change under the same name) are never cached, nor an id registered with
another environment class (whose code the fingerprint does not cover) or with a file among its kwargs.

The cache folder is ``$SYNERGY_GYM_CACHE_DIR/baselines`` if that variable is set (empty:
no cache), else ``baselines`` in the per-user cache folder (``~/.cache/synergy-gym`` on
Linux), beside the compiled kernels (:mod:`synergy_gym.sim.compiled`). A file that cannot be
read or written there is ignored: the heuristics are then scored as without a cache.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import lru_cache
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synergy_gym.cli.files import atomic_write_text
from synergy_gym.sim.compiled import project_cache_folder

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: The packages whose code decides the heuristics' scores (their folders are fingerprinted).
SCORING_PACKAGES = ("synergy_gym", "synergy_gym.agents", "synergy_gym.baselines", "synergy_gym.traces")
#: File types fingerprinted in those folders.
CODE_SUFFIXES = (".py", ".csv", ".json", ".md")
#: Folders skipped inside those packages: the shipped policies' weights and cards score no heuristic.
SKIPPED_FOLDERS = ("pretrained",)
#: Bumped when the cached file's layout changes.
FORMAT = 1


def cache_folder() -> Path | None:
    """Where scores are cached (None: nowhere, ``SYNERGY_GYM_CACHE_DIR=""``); created if need be."""
    return project_cache_folder("baselines")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the :data:`CODE_SUFFIXES` files in the :data:`SCORING_PACKAGES`' folders, and numpy's and numba's versions."""
    import numpy

    try:
        import numba

        numba_version = numba.__version__
    except ImportError:  # the kernels then run as plain Python
        numba_version = "none"
    digest = hashlib.sha256(f"numpy {numpy.__version__} numba {numba_version}".encode())
    for package in SCORING_PACKAGES:
        for folder in map(Path, import_module(package).__path__):
            for path in sorted(p for p in folder.rglob("*") if p.suffix in CODE_SUFFIXES and p.is_file()
                               and not _in_skipped_folder(p.relative_to(folder))):
                digest.update(f"{package}/{path.relative_to(folder).as_posix()}\0".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _in_skipped_folder(relative: Path) -> bool:
    """Whether a file (relative to its package's folder) lies in one of the :data:`SKIPPED_FOLDERS`."""
    return any(part in SKIPPED_FOLDERS for part in relative.parts[:-1])


def cacheable(env_kwargs: dict[str, Any], env_id: str | None = None) -> bool:
    """Whether scores with these env keyword arguments (and ``env_id``'s registration) may be cached: the kwargs
    numbers, booleans and None only; the id registered with synergy-gym's environment and kwargs of plain values (no
    file a name could stand for: a cluster or trace file may change under the same name)."""
    if not all(value is None or isinstance(value, (bool, int, float)) for value in env_kwargs.values()):
        return False
    registered = registration(env_id) if env_id is not None else None
    return registered is None or (registered["entry_point"].startswith("synergy_gym.")
                                  and all(_plain(value) for _, value in registered["kwargs"]))


def _plain(value: Any) -> bool:
    """A registered kwarg's value that says everything it stands for: a number, a boolean, None, a name
    (``cluster="small"``) that is no file, or a list or table of such values (``cluster={"num_servers": 4}``)."""
    if isinstance(value, str):
        return not Path(value).exists()
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return value is None or isinstance(value, (bool, int, float))


def registration(env_id: str) -> dict[str, Any] | None:
    """How ``env_id`` is registered with Gymnasium (its entry point, kwargs and step limit); None if it is not.

    Part of the key: an id registered again with other kwargs (a user's scenario, an edited one) scores afresh."""
    import gymnasium as gym

    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        return None
    return {"entry_point": str(spec.entry_point), "kwargs": sorted(spec.kwargs.items()),
            "max_episode_steps": spec.max_episode_steps}


def cache_key(env_id: str, env_kwargs: dict[str, Any], seeds: list[int], names: list[str], seed: int) -> str:
    """The cache file's name for these scores (see the module)."""
    spec = {"format": FORMAT, "code": code_fingerprint(), "env_id": env_id, "registered": registration(env_id),
            "env_kwargs": sorted(env_kwargs.items()), "seeds": [int(s) for s in seeds], "heuristics": list(names),
            "random_seed": seed}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=repr).encode()).hexdigest() + ".json"


def _encode(frames: dict[str, pd.DataFrame]) -> str:
    def plain(value: Any) -> Any:
        return value.item() if hasattr(value, "item") else value

    return json.dumps({name: {"columns": list(frame.columns),
                              "data": {str(c): [plain(v) for v in frame[c].tolist()] for c in frame.columns}}
                       for name, frame in frames.items()})


def _decode(text: str, names: list[str]) -> dict[str, pd.DataFrame] | None:
    import pandas as pd

    stored = json.loads(text)
    if list(stored) != names:
        return None
    return {name: pd.DataFrame(stored[name]["data"], columns=stored[name]["columns"]) for name in names}


def cached_scores(score: Callable[[], dict[str, pd.DataFrame]], env_id: str, env_kwargs: dict[str, Any],
                  seeds: list[int], names: list[str], seed: int) -> dict[str, pd.DataFrame]:
    """The heuristics' rows from the cache if they are there, else ``score()``'s (then cached); see the module."""
    folder = cache_folder() if cacheable(env_kwargs, env_id) else None
    if folder is None:
        return score()
    path = folder / cache_key(env_id, env_kwargs, seeds, names, seed)
    try:
        found = _decode(path.read_text(encoding="utf-8"), names)
    except (OSError, ValueError, KeyError, TypeError):
        found = None
    if found is not None:
        return found
    frames = score()
    try:
        atomic_write_text(path, _encode(frames))
    except (OSError, TypeError, ValueError):  # a full disk, a read-only folder: scored, not cached
        pass
    return frames
