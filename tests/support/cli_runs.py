"""What the command-line tests share: running ``synergy-gym`` in-process and snapshotting output folders."""

from __future__ import annotations

import stat
from pathlib import Path

from synergy_gym.cli import main


def run_cli(argv, capsys):
    """``synergy-gym ARGV`` in-process: (exit code, stdout, stderr)."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``: its kind and (for files) content."""
    return {str(p.relative_to(root)): (stat.S_IFMT(p.lstat().st_mode), p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}
