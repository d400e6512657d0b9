"""A package of the namespace that cannot be imported is one line, not a traceback; other import errors are not hidden.

After ``pip install .`` (not editable), ``python -m synergy_gym`` run in the source checkout imports its
``./synergy_gym``, which holds the core alone: ``synergy_gym.agents`` (and ``baselines``, ``traces``) are not found.
That is simulated here by a finder for which the package does not exist, once its already loaded modules are put
aside.
"""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint

import pytest

from synergy_gym.cli import command, main
from tests.support import REPO


class NotFound:
    """A finder, first on ``sys.meta_path``, for which ``package`` and its modules do not exist."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, name, path=None, target=None):
        if name == self.package or name.startswith(self.package + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)  # as the import system says it
        return None


def unimportable(monkeypatch, package: str) -> None:
    """``import PACKAGE`` (and of any module in it) fails as when it is not installed (undone after the test)."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [NotFound(package), *sys.meta_path])


def hidden_line(package: str) -> str:
    return (f"cannot import {package}: the folder ./synergy_gym (a source checkout) hides the installed package; "
            "run from another folder, or install with pip install -e .")


@pytest.mark.parametrize("package", ["synergy_gym.agents", "synergy_gym.baselines", "synergy_gym.traces"])
def test_a_package_hidden_by_the_checkout_is_one_line(package, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    unimportable(monkeypatch, package)
    assert main(["--version"]) == 2  # every command line builds the parser, which loads every command's register
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"synergy-gym: error: {hidden_line(package)}\n")


def test_a_command_module_that_cannot_be_imported_is_one_line(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    parser = command.build_parser()  # the register functions load; the command's own package then goes missing
    monkeypatch.setattr(command, "build_parser", lambda: parser)
    unimportable(monkeypatch, "synergy_gym.traces")
    assert main(["trace-stats", "x.csv"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"synergy-gym trace-stats: error: {hidden_line('synergy_gym.traces')}\n")


def test_outside_the_checkout_the_line_names_the_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    unimportable(monkeypatch, "synergy_gym.agents")
    assert main(["--version"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"synergy-gym: error: cannot import synergy_gym.agents: the folder {REPO / 'synergy_gym'} ")
    assert err.count("\n") == 1


@pytest.mark.parametrize("missing", ["synergy_gym.agents.no_such_module", "torch", "synergy_gym"])
def test_other_missing_modules_are_not_hidden(missing, monkeypatch):
    def load(self):
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    monkeypatch.setattr(command, "entry_points", lambda group: [EntryPoint("x", "pkg:register", group)])
    monkeypatch.setattr(EntryPoint, "load", load)
    with pytest.raises(ModuleNotFoundError) as raised:
        main(["--version"])
    assert raised.value.name == missing
