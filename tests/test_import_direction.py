"""Imports run one way, and no two modules import each other.

The installed namespace is ``synergy_gym``; the repository's ``agents/``, ``baselines/`` and
``traces/`` folders install as ``synergy_gym.agents``, ``synergy_gym.baselines`` and
``synergy_gym.traces``. The rules:

* the core (everything else under ``synergy_gym``) never imports those three packages;
* ``traces`` and ``baselines`` never import ``agents``;
* inside the core, layers run one way: ``sim`` imports none of ``env``, ``experiments`` and
  ``cli``; ``env`` none of ``experiments`` and ``cli``; ``experiments`` not ``cli``;
* no module anywhere (the packages, the tests, the benchmarks) imports the old top-level names
  ``agents``, ``baselines`` or ``traces``;
* there is no import circle between modules of the namespace.

Every module is parsed with :mod:`ast`; ``import x``, ``from x import y`` (relative ones
resolved, ``y`` counted as a module where it is one) and ``importlib.import_module("x")``
anywhere in a module – inside functions and under ``TYPE_CHECKING`` too – count.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import synergy_gym
import synergy_gym.agents
import synergy_gym.baselines
import synergy_gym.traces
from tests.support import REPO

OUTER = ("synergy_gym.agents", "synergy_gym.baselines", "synergy_gym.traces")
#: Package (or layer) → packages it must not import.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "synergy_gym": OUTER,  # the core: every module not under OUTER
    "synergy_gym.traces": ("synergy_gym.agents",),
    "synergy_gym.baselines": ("synergy_gym.agents",),
    "synergy_gym.sim": ("synergy_gym.env", "synergy_gym.experiments", "synergy_gym.cli"),
    "synergy_gym.env": ("synergy_gym.experiments", "synergy_gym.cli"),
    "synergy_gym.experiments": ("synergy_gym.cli",),
}
OLD_TOP_LEVEL = ("agents", "baselines", "traces")


@dataclass(frozen=True)
class ImportSite:
    """One import in a module: where it is, the module it is in and the absolute module it names."""

    path: Path
    line: int
    importer: str
    module: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} imports {self.module}"


def package_dirs() -> dict[str, Path]:
    """Folder of each package whose modules are walked: the core and the three outer packages."""
    return {
        "synergy_gym": Path(synergy_gym.__file__).parent,
        **{name: Path(sys.modules[name].__file__).parent for name in OUTER},
    }


def module_name(package: str, package_dir: Path, path: Path) -> str:
    """Dotted name of the module in ``path`` (``synergy_gym/env/__init__.py`` → ``synergy_gym.env``)."""
    parts = [*package.split("."), *path.relative_to(package_dir).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import …`` written in ``module``."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


@functools.cache
def imports_of(module: str, path: Path) -> list[ImportSite]:
    """Every module imported anywhere in the file ``path`` of ``module`` (absolute names).

    ``from x import y`` names ``x`` and also ``x.y`` (which :func:`module_graph` keeps only
    where ``x.y`` is a module).
    """
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[ImportSite] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [ImportSite(path, node.lineno, module, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module if node.level == 0 else resolve_relative(module, is_package, node.level, node.module)
            found.append(ImportSite(path, node.lineno, module, target or ""))
            found += [ImportSite(path, node.lineno, module, f"{target}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(ImportSite(path, node.lineno, module, node.args[0].value))
    return sorted(found, key=lambda site: (site.line, site.module))


@functools.cache
def all_modules() -> dict[str, Path]:
    """Every module of the namespace → its file."""
    modules: dict[str, Path] = {}
    for package, folder in package_dirs().items():
        for path in sorted(folder.rglob("*.py")):
            name = module_name(package, folder, path)
            if package == "synergy_gym" and name.startswith(OUTER):
                continue  # only where the folder is inside synergy_gym (an installed wheel)
            modules[name] = path
    return modules


def module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of the namespace it imports (names that are not modules are dropped)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {site.module for site in imports_of(name, path) if site.module in modules} - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def python_outside(folder: Path, code: str) -> list[str]:
    """The lines ``code`` prints when run by this Python in ``folder`` (outside the repository), without
    ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=folder, env=env)
    return done.stdout.splitlines()


def in_package(module: str, packages: str | tuple[str, ...]) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one."""
    names = (packages,) if isinstance(packages, str) else packages
    return any(module == p or module.startswith(p + ".") for p in names)


def forbidden_imports(package: str) -> list[ImportSite]:
    banned = FORBIDDEN[package]
    bad = []
    for name, path in all_modules().items():
        if not in_package(name, package) or (package == "synergy_gym" and in_package(name, OUTER)):
            continue
        bad += [site for site in imports_of(name, path) if in_package(site.module, banned)]
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_the_layers_above_it(package):
    bad = forbidden_imports(package)
    assert not bad, f"{package} must not import {', '.join(FORBIDDEN[package])}:\n" + "\n".join(map(str, bad))


def test_no_import_circles():
    modules = all_modules()
    assert {"synergy_gym.sim.simulator", "synergy_gym.agents.train", "synergy_gym.traces.replay"} <= set(modules)
    found = cycles(module_graph(modules))
    assert not found, "import circles:\n" + "\n".join(" ⇄ ".join(c) for c in found)


def test_nothing_imports_the_old_top_level_names():
    files = [*all_modules().values(), *(REPO / "tests").rglob("*.py"), *(REPO / "benchmarks").rglob("*.py")]
    bad = [
        site for path in files for site in imports_of("x", path) if site.module.split(".")[0] in OLD_TOP_LEVEL
    ]
    assert not bad, "import these as synergy_gym.agents, synergy_gym.baselines, synergy_gym.traces:\n" + "\n".join(
        map(str, bad)
    )


def test_the_walker_finds_imports_inside_functions_and_relative_ones(tmp_path):
    pkg = tmp_path / "synergy_gym"
    (pkg / "env").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "env" / "__init__.py").write_text("from .. import traces\nfrom .core import x\n")
    (pkg / "env" / "core.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from synergy_gym.cli import files\n"
        "def f():\n    from synergy_gym.traces.replay import read\n    import synergy_gym.agents.train\n"
        "    importlib.import_module('synergy_gym.baselines.opt')\nfrom ..sim.workload import Workload\n"
    )
    init = {s.module for s in imports_of("synergy_gym.env", pkg / "env" / "__init__.py")}
    core = {s.module for s in imports_of("synergy_gym.env.core", pkg / "env" / "core.py")}
    assert {"synergy_gym.traces", "synergy_gym.env.core"} <= init
    assert {
        "synergy_gym.cli.files", "synergy_gym.traces.replay", "synergy_gym.agents.train", "synergy_gym.baselines.opt",
        "synergy_gym.sim.workload",
    } <= core


def test_the_circle_finder_finds_circles_of_two_and_three_and_ignores_chains():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(cycles(graph)) == [["a", "b"], ["c", "d", "e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_import_synergy_gym_registers_the_envs_and_loads_no_outer_package(tmp_path):
    code = (
        "import sys, gymnasium, synergy_gym\n"
        "print(sorted(i for i in ('Synergy-v0', 'Synergy-small-v0') if i in gymnasium.registry))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'traces', 'baselines', 'agents'}"
        " or m.startswith(('synergy_gym.traces', 'synergy_gym.baselines', 'synergy_gym.agents'))))\n"
    )
    out = python_outside(tmp_path, code)
    assert out == ["['Synergy-small-v0', 'Synergy-v0']", "[]"]


def test_the_outer_packages_live_only_under_synergy_gym(tmp_path):
    """From a folder outside the repository the old top-level names do not import; the new ones do."""
    code = (
        "import importlib\n"
        "for name in ('synergy_gym.agents', 'synergy_gym.baselines', 'synergy_gym.traces'):\n"
        "    importlib.import_module(name)\n"
        "for name in ('agents', 'baselines', 'traces'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        print('absent', name)\n"
        "    else:\n"
        "        print('present', name, importlib.import_module(name).__file__)\n"
    )
    out = python_outside(tmp_path, code)
    assert out == ["absent agents", "absent baselines", "absent traces"]
