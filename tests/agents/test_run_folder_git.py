"""``versions.json`` records the git commit of synergy-gym's own checkout, never that of a project it is installed in.

Installed from a wheel, the code lives in ``site-packages/synergy_gym``; a virtual environment inside the user's own
git project must not report that project's commit and changes as the code's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from synergy_gym.agents import run_folder
from tests.support import REPO

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

HEX40 = re.compile(r"[0-9a-f]{40}")


def git_repo(folder: Path, files: dict[str, str]) -> Path:
    """A fresh git repository in ``folder`` holding ``files`` (path → text), committed."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@example.org",
                                                  "commit", "-q", "-m", "start"]):
        subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)
    return folder


def code_at(monkeypatch, module_file: Path) -> None:
    """Make :mod:`synergy_gym.agents.run_folder` believe it was loaded from ``module_file``."""
    monkeypatch.setattr(run_folder, "__file__", str(module_file))


def test_an_install_inside_another_projects_repository_records_no_commit(tmp_path, monkeypatch):
    project = git_repo(tmp_path / "project", {"pyproject.toml": '[project]\nname = "my-research"\n', "main.py": ""})
    installed = project / ".venv/lib/python3.11/site-packages/synergy_gym/agents/run_folder.py"
    installed.parent.mkdir(parents=True)
    code_at(monkeypatch, installed)
    (project / "main.py").write_text("changed")  # the project is modified: none of the code's business either
    record = run_folder.versions()
    assert (record["git_commit"], record["git_dirty"]) == (None, None)


def test_a_folder_inside_a_repository_that_is_no_synergy_gym_checkout_records_no_commit(tmp_path, monkeypatch):
    outer = git_repo(tmp_path / "outer", {"README": "", "vendor/pyproject.toml": '[project]\nname = "synergy-gym"\n'})
    code_at(monkeypatch, outer / "vendor/agents/run_folder.py")  # a checkout's layout, but not its own repository
    assert run_folder.versions()["git_commit"] is None
    code_at(monkeypatch, outer / "agents/run_folder.py")  # its own repository, but not synergy-gym's
    assert run_folder.versions()["git_commit"] is None


def test_a_synergy_gym_checkout_records_its_commit_and_changes(tmp_path, monkeypatch):
    checkout = git_repo(tmp_path / "clone", {"pyproject.toml": '[project]\nname = "synergy-gym"\n', "agents/x.py": ""})
    code_at(monkeypatch, checkout / "agents/run_folder.py")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True).stdout.strip()
    assert (run_folder.versions()["git_commit"], run_folder.versions()["git_dirty"]) == (head, False)
    (checkout / "agents/x.py").write_text("changed")
    assert run_folder.versions()["git_dirty"] is True


def test_this_checkout_records_its_commit():
    if not (REPO / ".git").exists() or Path(run_folder.__file__).resolve().parents[1] != REPO:
        pytest.skip("not run from a git checkout of synergy-gym")
    assert HEX40.fullmatch(run_folder.versions()["git_commit"] or "")
