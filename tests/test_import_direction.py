"""Imports run one way: the core ``synergy_gym`` never imports ``traces``, ``baselines`` or ``agents``,
and ``traces`` and ``baselines`` never import ``agents``.

Every module of a package (recursively, subpackages included) is parsed with
:mod:`ast`; ``import x``, ``from x import y`` (relative ones resolved) and
``importlib.import_module("x")`` anywhere in the module – inside functions
too – count.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import baselines
import synergy_gym
import traces

#: Package → top-level packages it must not import.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "synergy_gym": ("traces", "baselines", "agents"),
    "traces": ("agents",),
    "baselines": ("agents",),
}
PACKAGE_DIRS: dict[str, Path] = {
    "synergy_gym": Path(synergy_gym.__file__).parent,
    "traces": Path(traces.__file__).parent,
    "baselines": Path(baselines.__file__).parent,
}


@dataclass(frozen=True)
class ImportSite:
    """One import in a module: where it is and the absolute module it names."""

    path: Path
    line: int
    module: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} imports {self.module}"


def module_name(package_dir: Path, path: Path) -> str:
    """Dotted name of the module in ``path`` (``synergy_gym/env/__init__.py`` → ``synergy_gym.env``)."""
    parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import …`` written in ``module``."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def imports_of(package_dir: Path, path: Path) -> list[ImportSite]:
    """Every module imported anywhere in the file ``path`` (absolute names)."""
    module = module_name(package_dir, path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[ImportSite] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [ImportSite(path, node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module if node.level == 0 else resolve_relative(module, is_package, node.level, node.module)
            found.append(ImportSite(path, node.lineno, target or ""))
            # ``from . import traces`` names a module in the imported names.
            if node.module is None:
                found += [ImportSite(path, node.lineno, f"{target}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(ImportSite(path, node.lineno, node.args[0].value))
    return sorted(found, key=lambda site: (site.line, site.module))


def forbidden_imports(package: str) -> list[ImportSite]:
    package_dir = PACKAGE_DIRS[package]
    banned = FORBIDDEN[package]
    return [
        site
        for path in sorted(package_dir.rglob("*.py"))
        for site in imports_of(package_dir, path)
        if site.module.split(".")[0] in banned
    ]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_the_layers_above_it(package):
    bad = forbidden_imports(package)
    assert not bad, f"{package} must not import {', '.join(FORBIDDEN[package])}:\n" + "\n".join(map(str, bad))


def test_the_walker_finds_imports_inside_functions_and_relative_ones(tmp_path):
    pkg = tmp_path / "synergy_gym"
    (pkg / "env").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "env" / "__init__.py").write_text("from .. import traces\nfrom .core import x\n")
    (pkg / "env" / "core.py").write_text(
        "def f():\n    from traces.replay import read\n    import agents.train\n"
        "    importlib.import_module('baselines.opt')\nfrom ..workload import Workload\n"
    )
    init = {s.module for s in imports_of(pkg, pkg / "env" / "__init__.py")}
    core = {s.module for s in imports_of(pkg, pkg / "env" / "core.py")}
    assert {"synergy_gym.traces", "synergy_gym.env.core"} <= init
    assert core == {"traces.replay", "agents.train", "baselines.opt", "synergy_gym.workload"}


def test_import_synergy_gym_registers_the_envs_and_loads_no_outer_package():
    code = (
        "import sys, gymnasium, synergy_gym\n"
        "print(sorted(i for i in ('Synergy-v0', 'Synergy-small-v0') if i in gymnasium.registry))\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'traces', 'baselines', 'agents'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["['Synergy-small-v0', 'Synergy-v0']", "[]"]
