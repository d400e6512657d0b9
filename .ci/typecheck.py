"""mypy over the whole installed namespace, from a source checkout.

The wheel installs the repository's ``agents/``, ``baselines/`` and ``traces/`` folders as
``synergy_gym.agents``, ``synergy_gym.baselines`` and ``synergy_gym.traces`` (setuptools'
``package-dir``). mypy cannot follow that mapping, so this script lays the namespace out as
installed – a temporary folder of symbolic links – and runs ``mypy -p synergy_gym`` there with
the repository's configuration. Paths in the report are the repository's.

    python .ci/typecheck.py [extra mypy arguments]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUTER = ("agents", "baselines", "traces")


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="synergy-gym-mypy-") as tmp:
        namespace = Path(tmp) / "synergy_gym"
        namespace.mkdir()
        for entry in (REPO / "synergy_gym").iterdir():
            if entry.name != "__pycache__":
                (namespace / entry.name).symlink_to(entry)
        for name in OUTER:
            (namespace / name).symlink_to(REPO / name)
        command = [
            sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
            "--cache-dir", str(REPO / ".mypy_cache"), "-p", "synergy_gym", *argv,
        ]
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True)
    outer = "|".join(OUTER)
    for stream, text in ((sys.stdout, done.stdout), (sys.stderr, done.stderr)):
        stream.write(re.sub(rf"^synergy_gym/({outer})/", r"\1/", text, flags=re.M))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
