"""MkDocs hook: the API reference reads the ``synergy_gym`` namespace as it is installed.

setuptools installs the repository's ``agents/``, ``baselines/`` and ``traces/`` folders as
``synergy_gym.agents``, ``synergy_gym.baselines`` and ``synergy_gym.traces`` (``package-dir`` in
``pyproject.toml``). griffe, the loader of mkdocstrings, finds packages by folder and cannot follow
that mapping (nor the import hook of an editable install). As ``.ci/typecheck.py`` does for mypy,
this hook lays the namespace out as installed – a temporary folder of symbolic links to the
repository's folders – and puts it first in the python handler's search paths. Nothing is copied
or imported; the links point at the working tree, so ``mkdocs serve`` shows edits.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

REPO = Path(__file__).resolve().parents[2]
#: Repository folders installed inside the ``synergy_gym`` namespace.
OUTER = ("agents", "baselines", "traces")

_made: list[Path] = []


def namespace_tree(root: Path, repo: Path = REPO) -> Path:
    """Lay ``synergy_gym`` out under ``root`` as installed: links to the core's entries and the outer folders."""
    namespace = root / "synergy_gym"
    namespace.mkdir(parents=True)
    for entry in sorted((repo / "synergy_gym").iterdir()):
        if entry.name != "__pycache__" and entry.name not in OUTER:
            (namespace / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    for name in OUTER:
        (namespace / name).symlink_to(repo / name, target_is_directory=True)
    return root


@event_priority(100)  # before mkdocstrings' own, which may create the handler
def on_config(config: Any) -> Any:
    """Point the python handler of mkdocstrings at a fresh namespace folder."""
    root = Path(tempfile.mkdtemp(prefix="synergy-gym-docs-"))
    _made.append(root)
    namespace_tree(root)
    handlers = config.plugins["mkdocstrings"].config.handlers
    python = handlers.setdefault("python", {})
    python["paths"] = [str(root)]
    return config


def on_shutdown() -> None:
    while _made:
        shutil.rmtree(_made.pop(), ignore_errors=True)
