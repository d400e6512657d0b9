"""Errors raised for bad user input.

Every error a user can cause (a malformed file, an unknown name, an impossible
value) is a :class:`SynergyGymError`. Its message is one line that names the
field and the offending value; the command-line tool prints it without a
traceback and exits with status 2.
"""

from __future__ import annotations


class SynergyGymError(ValueError):
    """Bad input: the message names the field and the value."""


class ConfigError(SynergyGymError):
    """An invalid cluster or simulator setting."""


class WorkloadError(SynergyGymError):
    """An invalid workload, workload file or trace."""


class PathError(SynergyGymError):
    """A file or folder argument that cannot be read, or written to, as asked."""


class UnknownNameError(SynergyGymError):
    """A name (policy, model, preset) that is not one of the valid ones."""

    def __init__(self, kind: str, name: object, valid: list[str] | tuple[str, ...]) -> None:
        """``name`` as given: text shows quoted (``'fifo+magic'``), anything else as itself (``None``, ``5``)."""
        self.kind = kind
        self.name = name
        self.valid = tuple(valid)
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(self.valid)}")

    def __reduce__(self) -> tuple[type[UnknownNameError], tuple[str, object, tuple[str, ...]]]:
        """Pickle by the constructor's arguments, so the error survives a worker process (a plain ``ValueError``
        would be rebuilt from its message alone, which this ``__init__`` does not take)."""
        return type(self), (self.kind, self.name, self.valid)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with a one-line message saying what was kept (the command-line tool exits with 130)."""

