"""Staged outputs: everything moves into place at the end, or nothing does; SIGTERM counts as Ctrl-C.

A new output folder gets the mode mkdir would give it, not the temporary folder's private 0o700.
"""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pytest

from synergy_gym.cli.staging import sigterm_as_interrupt, staged_outputs


def _write(staging, relative: str, text: str = "x") -> None:
    path = staging.file(staging.target / relative)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_new_folder_appears_whole_and_a_file_outside_it_too(tmp_path):
    out, extra = tmp_path / "out", tmp_path / "elsewhere" / "results.json"
    with staged_outputs(out) as staging:
        _write(staging, "a.csv")
        _write(staging, "sub/b.csv")
        staging.file(extra).write_text("{}")
        assert not out.exists() and not extra.exists()  # nothing in place while the command runs
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == ["a.csv", "sub/b.csv"]
    assert extra.read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "out"]  # no staging left
    assert [p.name for p in extra.parent.iterdir()] == ["results.json"]


def test_into_an_existing_folder_the_files_join_what_is_there(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with staged_outputs(out) as staging:
        _write(staging, "a.csv", "new")
    assert (out / "keep.txt").read_text() == "mine" and (out / "a.csv").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_an_error_or_ctrl_c_leaves_nothing(tmp_path, error):
    out, extra = tmp_path / "out", tmp_path / "results.json"
    with pytest.raises(type(error)):
        with staged_outputs(out) as staging:
            _write(staging, "a.csv")
            staging.file(extra).write_text("{}")
            raise error
    assert list(tmp_path.iterdir()) == []


def test_sigterm_is_ctrl_c_inside_the_block_and_restored_after(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_interrupt(), staged_outputs(out) as staging:
            _write(staging, "a.csv")
            os.kill(os.getpid(), signal.SIGTERM)
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_new_output_folder_gets_the_mode_mkdir_would_give_not_a_private_one(tmp_path, umask):
    previous = os.umask(umask)
    try:
        with staged_outputs(tmp_path / "out") as staging:
            _write(staging, "a.csv")
        (tmp_path / "made").mkdir()
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == stat.S_IMODE((tmp_path / "made").stat().st_mode) \
        == 0o777 & ~umask


def test_a_new_folder_another_command_made_meanwhile_is_not_mixed_into(tmp_path, monkeypatch):
    # Two commands with the same default folder, finishing together: the one that lost the rename race failed with
    # a traceback and left its .partial folder.
    from synergy_gym.errors import PathError

    target = tmp_path / "runs" / "compare-20261206-090000"
    with pytest.raises(PathError, match=r"was made by another command while this one ran; this one's outputs are in "
                                        r".*compare-20261206-090000-2$"):
        with staged_outputs(target) as staging:
            staging.file(target / "results.csv").write_text("mine\n")
            real_exists = Path.exists

            def made_just_after_the_check(path):  # the other command renames its folder into place just then
                found = real_exists(path)
                if path == target and not found:
                    target.mkdir(parents=True)
                    (target / "results.csv").write_text("theirs\n")
                return found

            monkeypatch.setattr(Path, "exists", made_just_after_the_check)
    monkeypatch.undo()
    assert (target / "results.csv").read_text() == "theirs\n"
    assert (tmp_path / "runs" / "compare-20261206-090000-2" / "results.csv").read_text() == "mine\n"
    assert not list((tmp_path / "runs").glob(".*.partial"))


@pytest.mark.parametrize("default_name", [True, False])
def test_a_new_folder_another_command_made_while_this_one_ran_is_not_written_into(tmp_path, default_name):
    # Two commands that chose one default name in the same second: the one finishing later merged its files into the
    # other's folder (results.csv overwritten) and removed the other's files it took for its own stale ones.
    from synergy_gym.errors import PathError

    target, extra = tmp_path / "runs" / "compare-20261206-090000", tmp_path / "results.json"
    alt = target.parent / f"{target.name}-2"

    def run() -> object:
        with staged_outputs(target, default_name=default_name) as staging:
            _write(staging, "results.csv", "mine\n")
            staging.file(extra).write_text("{}")
            target.mkdir()  # the other command's folder appears with its files
            (target / "results.csv").write_text("theirs\n")
            (target / "old.png").write_text("theirs\n")
            staging.remove(target / "old.png")
        return staging

    if default_name:
        assert run().final == alt  # quietly a folder of its own, and the file outside it written
        assert extra.read_text() == "{}"
    else:
        with pytest.raises(PathError, match=r"was made by another command while this one ran; this one's outputs are "
                                            r"in .*compare-20261206-090000-2 \(its files outside the folder were not"):
            run()
        assert not extra.exists()
    assert (target / "results.csv").read_text() == (target / "old.png").read_text() == "theirs\n"
    assert (alt / "results.csv").read_text() == "mine\n"
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name, alt.name]
