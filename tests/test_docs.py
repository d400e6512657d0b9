"""The documentation: every Python code block runs, and the reference pages match the code.

Every fenced ```` ```python ```` block of ``README.md``, ``CONTRIBUTING.md`` and ``docs/**/*.md``
runs as a test (``test_python_block_runs[FILE:LINE]``), in a fresh namespace, in a temporary working
directory. An HTML comment on the line before a block sets options for it, invisible on GitHub
and on the site::

    <!-- docs-test: slow -->                      only in the full suite (not in -m "not slow")
    <!-- docs-test: requires=ray rl_zoo3 -->      skip when one of these modules is not installed
    <!-- docs-test: cwd=repo -->                  run in the repository root (the block reads its files)
    <!-- docs-test: continue -->                  run after the previous block, in its namespace

Options combine with commas. Without a comment, a block that imports PyTorch, Stable-Baselines3,
``synergy_gym.agents``, Ray or RL Zoo is slow and skips when they are missing; so README blocks need
no comments. Shell blocks are not run, but every ``synergy-gym`` command line in any block or inline
code span may use only options its parser has. Python written in a non-Python block fails.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import REPO

DOCS = REPO / "docs"
HOOKS = DOCS / "hooks"
PYTHON_LANGS = ("python", "py")
OPTION_COMMENT = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
#: Modules whose import makes a block slow, and the modules it then needs (skipped without them).
HEAVY_IMPORTS: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "stable_baselines3": ("stable_baselines3",),
    "sb3_contrib": ("sb3_contrib",),
    "synergy_gym.agents": ("stable_baselines3", "sb3_contrib", "torch"),
    "ray": ("ray",),
    "rl_zoo3": ("rl_zoo3",),
}
#: Warnings of other packages that a documented example cannot avoid; ignored while blocks run
#: (every other warning is an error, as in the rest of the suite).
THIRD_PARTY_WARNINGS = (
    # RLlib registers its own single-agent env id with Gymnasium once per algorithm it builds
    # (tests/agents/test_rllib.py builds some before the RLlib guide's block runs).
    r".*Overriding environment rllib-single-agent-env-v0",
)


def doc_files() -> list[Path]:
    """README.md, CONTRIBUTING.md and every page of the site."""
    pages = sorted(p for p in DOCS.rglob("*.md") if HOOKS not in p.parents)
    return [p for p in (REPO / "README.md", REPO / "CONTRIBUTING.md", *pages) if p.is_file()]


def relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@dataclass
class Block:
    """One fenced code block: where it starts (1-based line of its first code line), language, code, options."""

    path: Path
    line: int
    lang: str
    code: str
    options: dict[str, list[str]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{relative(self.path)}:{self.line}"


def parse_options(text: str) -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        options[key.strip()] = value.split()
    unknown = set(options) - {"slow", "requires", "cwd", "continue"}
    if unknown:
        raise ValueError(f"unknown docs-test option(s) {sorted(unknown)} in {text!r}")
    return options


def code_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file (fences may be indented, as inside admonitions)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        lang = (opening["info"].strip().split() or [""])[0].lstrip(".{").rstrip("}").lower()
        previous = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        comment = OPTION_COMMENT.match(previous)
        end = i + 1
        while end < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[end]):
            end += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1: end]]
        blocks.append(Block(path, i + 2, lang, "\n".join(body) + "\n", parse_options(comment[1]) if comment else {}))
        i = end + 1
    return blocks


def imported_modules(code: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def heavy(code: str) -> set[str]:
    """The HEAVY_IMPORTS keys a block imports (a module or anything inside it)."""
    imported = imported_modules(code)
    return {key for key in HEAVY_IMPORTS for name in imported if name == key or name.startswith(key + ".")}


def python_groups() -> list[list[Block]]:
    """The Python blocks, a ``continue`` block joined to the one before it."""
    groups: list[list[Block]] = []
    for path in doc_files():
        for block in code_blocks(path):
            if block.lang not in PYTHON_LANGS:
                continue
            if "continue" in block.options and groups and groups[-1][0].path == path:
                groups[-1].append(block)
            else:
                groups.append([block])
    return groups


def _param(group: list[Block]):
    slow = any("slow" in b.options for b in group) or any(heavy(b.code) for b in group)
    return pytest.param(group, id=group[0].id, marks=[pytest.mark.slow] if slow else [])


def _required(group: list[Block]) -> list[str]:
    needed: list[str] = []
    for block in group:
        needed += block.options.get("requires", [])
        for key in sorted(heavy(block.code)):
            needed += HEAVY_IMPORTS[key]
    return list(dict.fromkeys(needed))


@pytest.fixture
def isolated_registries():
    """Blocks may register environment ids or scenarios: remove what they add."""
    import gymnasium

    from synergy_gym.env.scenarios import SCENARIOS

    ids, scenarios = set(gymnasium.registry), dict(SCENARIOS)
    yield
    for env_id in set(gymnasium.registry) - ids:
        del gymnasium.registry[env_id]
    SCENARIOS.clear()
    SCENARIOS.update(scenarios)


@pytest.mark.parametrize("group", [_param(g) for g in python_groups()])
def test_python_block_runs(group: list[Block], tmp_path, monkeypatch, isolated_registries):
    for module in _required(group):
        pytest.importorskip(module, reason=f"{group[0].id} needs {module}, which is not installed")
    cwd = REPO if any(b.options.get("cwd") == ["repo"] for b in group) else tmp_path
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__docs__"}
    with warnings.catch_warnings():
        for message in THIRD_PARTY_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        for block in group:
            # Padding the code with blank lines makes a traceback's line numbers the file's.
            code = compile("\n" * (block.line - 1) + block.code, str(block.path), "exec")
            exec(code, namespace)


# -- no Python outside Python blocks ---------------------------------------------------------------

_PYTHON_LINE = re.compile(r"^\s*(import [A-Za-z_][\w.]*(\s+as\s+\w+)?\s*$|from [A-Za-z_.][\w.]* import \S)")


def test_python_is_written_in_python_blocks():
    disguised = [
        f"{b.id} ({b.lang or 'no language'})"
        for path in doc_files()
        for b in code_blocks(path)
        if b.lang not in PYTHON_LANGS and any(_PYTHON_LINE.match(line) for line in b.code.splitlines())
    ]
    assert not disguised, f"Python code in blocks that do not run as tests: {disguised}"


def test_the_collector_finds_the_documented_examples():
    groups = python_groups()
    files = {relative(g[0].path) for g in groups}
    assert {"docs/getting-started.md", "docs/environment.md", "docs/howto/scheduling-policy.md"} <= files
    quick = [g for g in groups if not any(m.name == "slow" for m in _param(g).marks)]
    assert quick and len(quick) < len(groups)


# -- the pages that must match the code -------------------------------------------------------------


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    level = heading.split(" ", 1)[0]
    rest = text[start + len(heading):]
    end = re.search(rf"^{level} ", rest, re.M)
    return rest[: end.start()] if end else rest


def test_environment_page_lists_every_env_kwarg_with_its_default():
    from synergy_gym.env.config import EnvConfig

    section = _section((DOCS / "environment.md").read_text(encoding="utf-8"), "## Keyword arguments")
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \|", section, re.M)
    documented = {name: cell.strip().strip("`") for name, cell in rows}
    expected = {f.name: f.default for f in fields(EnvConfig)}
    assert sorted(documented) == sorted(expected), "the kwargs table and EnvConfig's fields differ"
    for name, default in expected.items():
        page = documented[name]
        assert ast.literal_eval(page) == default, f"{name}: the page says {page}, EnvConfig {default!r}"


def test_api_page_lists_every_top_level_name():
    import synergy_gym

    page = (DOCS / "api" / "synergy_gym.md").read_text(encoding="utf-8")
    missing = [name for name in synergy_gym.__all__ if f"[`{name}`]" not in page]
    assert not missing, f"docs/api/synergy_gym.md does not list {missing}"


def _hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", HOOKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cli_hook() -> ModuleType:
    return _hook("cli_options")


@pytest.fixture(scope="module")
def parsers(cli_hook) -> dict[str, argparse.ArgumentParser]:
    return cli_hook.subcommand_parsers()


def test_cli_page_has_a_generated_section_per_command(cli_hook, parsers):
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    placed = cli_hook.PLACEHOLDER.findall(page)
    assert sorted(placed) == sorted(parsers), "docs/cli.md needs one '<!-- cli-options: NAME -->' per subcommand"
    for name in parsers:
        assert f"## `synergy-gym {name}`" in page
        table = cli_hook.options_markdown(name, parsers[name])
        missing = [opt for opt in cli_hook.option_names(parsers[name]) if f"`{opt}`" not in table]
        assert not missing, f"{name}: the generated table lacks {missing}"


#: ``synergy-gym SUB`` and the rest of its command line (up to a quote, pipe, ``;``, ``&&``, comment or code span's end).
_COMMAND = re.compile(r"synergy-gym\s+([a-z][\w-]*)([^`\n;|&#\"']*)")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")


def _command_lines(text: str) -> list[tuple[str, str]]:
    """(subcommand, the rest of its command line) for every ``synergy-gym SUB …`` in a text."""
    text = text.replace("\\\n", " ")
    return [(m[1], m[2]) for m in _COMMAND.finditer(text)]


def test_documented_command_lines_use_only_real_options(cli_hook, parsers):
    stale = []
    for path in doc_files():
        for sub, rest in _command_lines(path.read_text(encoding="utf-8")):
            if sub not in parsers:
                continue  # prose such as "synergy-gym alone lists the commands"
            names = set(cli_hook.option_names(parsers[sub])) | {"--version"}
            stale += [f"{relative(path)}: synergy-gym {sub} {opt}" for opt in _OPTION.findall(rest) if opt not in names]
    assert not stale, f"options the commands do not have: {stale}"


def test_cli_page_prose_names_only_options_of_its_command(cli_hook, parsers):
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    stale = []
    for name, parser in parsers.items():
        # Command lines are checked against their own command above; the rest is this command's prose.
        prose = _COMMAND.sub(" ", _section(page, f"## `synergy-gym {name}`").replace("\\\n", " "))
        options = set(cli_hook.option_names(parser)) | {"--version"}
        stale += [f"{name}: {opt}" for opt in _OPTION.findall(prose) if opt not in options]
    assert not stale, f"docs/cli.md names options the command does not have: {stale}"


def test_the_api_namespace_is_laid_out_as_installed(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    root = _hook("api_namespace").namespace_tree(tmp_path)
    for package in ("agents", "baselines", "traces", "sim", "env"):
        assert (root / "synergy_gym" / package / "__init__.py").is_file()


@pytest.mark.slow
def test_the_site_builds_without_warnings(tmp_path):
    for module in ("mkdocs", "mkdocstrings", "material"):
        pytest.importorskip(module, reason="the docs extra is not installed (pip install -e '.[docs]')")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
