"""Errors the user can act on.

``InputError`` is bad input: the CLI prints it as one line naming file, line
and field, and exits 2. ``InvariantViolation`` is the model catching itself
breaking a rule it must never break (exit 3: a bug in sitssim, not in the
scenario).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class InputError(Exception):
    """Meaningless input: what was expected, and where."""

    message: str
    file: str | None = None
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class InvariantViolation(RuntimeError):
    """The simulation broke one of its own online invariants."""
