"""Errors the user can act on.

``InputError`` is bad input: the CLI prints it as one line naming file, line
and field, and exits 2. ``InvariantViolation`` is the model catching itself
breaking a rule it must never break (exit 3: a bug in sitssim, not in the
scenario).

Messages echo what the user wrote, and what the user wrote can be 4,000
characters of one scalar or hold newlines. ``shown`` clips an echoed value
where it is echoed; ``InputError.__str__`` is the last guard, so that whatever
a validator put into a message, the user still gets one short line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

SHOWN_CHARS = 60
MESSAGE_CHARS = 240
FIELD_CHARS = 80
# Past this, an int has more digits than anyone reads, and past Python's 4300-digit
# limit repr() itself raises.
_SHOWN_INT_BITS = 200


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (control characters escaped as ``\\n``), at most ``limit`` chars."""
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit + 1])
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for a message, clipped: ``'aaaa…' (5000 chars)``."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > _SHOWN_INT_BITS:
            digits = round(value.bit_length() * math.log10(2))
            sign = "a negative" if value < 0 else "an"
            return f"{sign} integer of about {digits} digits"
        return repr(value)
    if isinstance(value, str):
        text = repr(value[:limit])
        if len(value) <= limit and len(text) <= limit + 2:
            return text
        return f"{text[: limit + 1]}…{text[-1]} ({len(value)} chars)"
    return one_line(repr(value), limit)


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
        field = f" {one_line(self.field, FIELD_CHARS)}:" if self.field else ""
        return f"{where}:{field} {one_line(self.message, MESSAGE_CHARS)}"


class LocatedValueError(ValueError):
    """A config model's validation failure that knows which field it is about.

    Raised inside a pydantic validator; ``loc`` is relative to the model that raises it,
    so a nested model points at its own field and the loader prefixes where it sits.
    """

    def __init__(self, loc: tuple, message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


def reject_repeats(items: Iterable[Hashable], field: str, noun: str = "") -> None:
    """Raise a :class:`LocatedValueError` at the second appearance of any of ``items``, the
    entries of list ``field``: "<noun> 'x' is listed twice", located at that entry."""
    seen: set[Hashable] = set()
    for k, item in enumerate(items):
        if item in seen:
            what = f"{noun} {item!r}" if noun else repr(item)
            raise LocatedValueError((field, k), f"{what} is listed twice")
        seen.add(item)


@dataclass(frozen=True)
class Locator:
    """Where a config section sits in the scenario, for a model handed only that section.

    A model that reads one section must still name the file, line and field of the whole
    input when it refuses a value; the locator carries the scenario's error factory (its
    ``error(loc, message)``) and the section's place in it, so the model's locs stay
    relative to what it was given and the messages stay those of the whole scenario.
    """

    at_root: Callable[[tuple, str], InputError]
    prefix: tuple = ()

    def error(self, loc: tuple, message: str) -> InputError:
        """An ``InputError`` at ``loc``, relative to this locator's place."""
        return self.at_root((*self.prefix, *loc), message)

    def within(self, *loc: str | int) -> Locator:
        """The locator of the part at ``loc`` under this one (a workload, a fault)."""
        return Locator(self.at_root, (*self.prefix, *loc))


class InvariantViolation(RuntimeError):
    """The simulation broke one of its own online invariants."""
