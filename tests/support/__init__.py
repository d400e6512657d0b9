"""What tests in several folders share: paths, golden runs, command-line and agent helpers."""

from pathlib import Path

#: The repository's root folder.
REPO = Path(__file__).resolve().parents[2]
#: The reference material beside the clone (``../shared``); tests that need it skip without it.
SHARED = REPO.parent / "shared"
