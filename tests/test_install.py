"""Install hygiene: the built wheel installs one package, running it writes nothing inside it, and
uninstalling it leaves nothing behind.

The wheel is built from a copy of the source tree (a build writes ``build/`` and ``*.egg-info`` beside
the sources) and installed without dependencies into a fresh virtual environment that borrows this
environment's packages through a ``.pth`` line. A small ``synergy-gym compare`` compiles the kernels
there (into a per-user cache folder pointed at a temporary home), and the installed tree must be
exactly as pip wrote it.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.slow

#: What the source copy leaves out: version control, environments, outputs, caches.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", ".ci-venv", "build", "dist", "site", "runs", "*.egg-info", "__pycache__", ".mypy_cache",
    ".ruff_cache", ".pytest_cache", ".hypothesis",
)


def _run(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: (size, modification time)."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def test_the_wheel_installs_runs_and_uninstalls_without_a_trace(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCES)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", source, "-w", tmp_path / "wheel")
    (wheel,) = (tmp_path / "wheel").glob("synergy_gym-*.whl")

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    # This environment's packages (numpy, numba, …) for the fresh one, after its own site-packages.
    borrowed = [p for p in (*site.getsitepackages(), sysconfig.get_paths()["purelib"]) if Path(p).is_dir()]
    (purelib / "borrowed.pth").write_text("\n".join(dict.fromkeys(borrowed)) + "\n")
    _run(python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel)

    installed = purelib / "synergy_gym"
    assert sorted(p.name for p in purelib.iterdir() if p.name.startswith("synergy")) == [
        "synergy_gym", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"
    ]
    top_level = (purelib / f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info" / "top_level.txt")
    assert top_level.read_text().split() == ["synergy_gym"]
    # The reference training configs, which the docs' commands name (--config small_scarce in an installed package).
    assert sorted(p.name for p in (installed / "agents" / "configs").iterdir()) == sorted(
        p.name for p in (REPO / "agents" / "configs").iterdir() if p.suffix in (".toml", ".yml"))
    before = _tree(installed)

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR", "SYNERGY_GYM_CACHE_DIR")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), LOCALAPPDATA=str(home / "AppData"))
    out = _run(
        python, "-m", "synergy_gym", "compare", "--jobs", "30", "--policies", "fifo+tune", "--quiet", "--out",
        tmp_path / "out", env=env, cwd=tmp_path,
    )
    assert "fifo+tune" in out and (tmp_path / "out" / "results.csv").is_file()
    imported = _run(python, "-c", "import synergy_gym; print(synergy_gym.__file__)", env=env, cwd=tmp_path).strip()
    assert Path(imported).parent == installed  # the installed copy ran, not the repository's

    assert _tree(installed) == before, "running the package wrote inside the installed tree"
    assert any(home.rglob("*.nbi")), "the compiled kernels were not cached in the per-user folder"

    _run(python, "-m", "pip", "uninstall", "-y", "-q", "synergy-gym")
    assert not installed.exists(), f"uninstalling left {sorted(map(str, installed.rglob('*')))[:5]}"


def _numpy_major_saved(model: Path) -> int:
    import zipfile

    with zipfile.ZipFile(model) as archive:
        info = archive.read("system_info.txt").decode()
    return int(info.split("- Numpy: ", 1)[1].split(".", 1)[0])


@pytest.mark.parametrize("extra", ["rl", "test"])
def test_the_extras_that_load_the_shipped_policies_require_the_numpy_they_were_saved_with(extra):
    """A pickle written by numpy 2 does not load under numpy 1 ("No module named 'numpy._core'")."""
    import re

    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith(f"{extra} = [")) if extra == "rl" else \
        text.split("test = [", 1)[1].split("]", 1)[0]
    floor = re.search(r'"numpy>=(\d+)', line)
    assert floor, f"the {extra} extra sets no numpy floor"
    saved = {_numpy_major_saved(m) for m in (REPO / "agents" / "pretrained").glob("*/model.zip")}
    assert saved and int(floor[1]) >= max(saved), (extra, floor[0], saved)


def test_the_source_distribution_holds_every_tracked_file(tmp_path):
    """The sdist once held 7 test files that could not import their support module, and no training configs."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout: the sdist is compared with the files git tracks")
    tracked = set(_run("git", "-C", REPO, "ls-files").split())
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCES)
    script = "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))"
    name = _run(sys.executable, "-c", script, tmp_path / "dist", cwd=source).split()[-1]
    import tarfile

    with tarfile.open(tmp_path / "dist" / name) as sdist:
        top = name.removesuffix(".tar.gz")
        held = {m.name.removeprefix(top + "/") for m in sdist.getmembers() if m.isfile()}
    assert not tracked - held, sorted(tracked - held)
