"""Quantities with units, as scenario files write them.

The simulator's internal units are fixed: time in nanoseconds (float), sizes in
bytes (int), signalling rates in GT/s (float), lengths in metres (float).
Scenario files must say their unit (``200us``, ``4KiB``, ``64GT/s``, ``30cm``):
a bare number for a time or a size is ambiguous, so it is rejected with a
message that lists the accepted units.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from sitssim.errors import shown

# ASCII digits only: Python reads '٥' as 5, and a scenario that means five should say 5.
NUMBER = r"([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
_QUANTITY = re.compile(rf"^\s*{NUMBER}\s*([A-Za-z/µ]+)\s*$", re.ASCII)
# Longer than any quantity a person writes; keeps Decimal's work and the echo small.
MAX_QUANTITY_CHARS = 64
# A float ends near 1e308; past that no unit can bring a quantity back into range, and
# a bounded exponent keeps Decimal's arithmetic clear of its Overflow trap.
_MAX_EXPONENT = 330

TIME_UNITS_NS: dict[str, float] = {
    "ps": 1e-3,
    "ns": 1.0,
    "us": 1e3,
    "µs": 1e3,
    "ms": 1e6,
    "s": 1e9,
}
SIZE_UNITS_B: dict[str, int] = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
}
RATE_UNITS_GT: dict[str, float] = {"GT/s": 1.0, "MT/s": 1e-3}
LENGTH_UNITS_M: dict[str, float] = {"mm": 1e-3, "cm": 1e-2, "m": 1.0}


_FAMILIES: dict[str, dict] = {
    "time": TIME_UNITS_NS,
    "size": SIZE_UNITS_B,
    "signalling rate": RATE_UNITS_GT,
    "length": LENGTH_UNITS_M,
}


class UnitError(ValueError):
    """A quantity that cannot be read; the message says what was expected."""


def _family_of(unit: str) -> str | None:
    for what, units in _FAMILIES.items():
        if unit in units:
            return what
    return None


def _parse(text: object, units: dict, what: str, example: str) -> Decimal:
    """The exact value in the family's base unit (decimal, so '2.01KB' is 2010 bytes)."""
    names = ", ".join(units)
    if isinstance(text, bool) or not isinstance(text, str):
        # A bare number is the common mistake: say which units would make it meaningful.
        raise UnitError(
            f"expected a {what} with a unit, e.g. {example!r} ({names}), got {shown(text)}"
        )
    if len(text) > MAX_QUANTITY_CHARS:
        raise UnitError(
            f"expected a {what} like {example!r} in at most {MAX_QUANTITY_CHARS} characters, "
            f"got {shown(text)}"
        )
    match = _QUANTITY.match(text)
    if match is None:
        raise UnitError(f"expected a {what} like {example!r} ({names}), got {shown(text)}")
    number, unit = match.groups()
    if unit not in units:
        other = _family_of(unit)
        kind = f"{unit!r} is a {other} unit" if other else f"unknown unit {shown(unit)}"
        raise UnitError(f"{kind} in {shown(text)}; expected a {what} in {names}")
    exact = Decimal(number)
    if exact and abs(exact.adjusted()) > _MAX_EXPONENT:
        raise UnitError(
            f"expected a finite {what} with an exponent within ±{_MAX_EXPONENT}, got {shown(text)}"
        )
    value = exact * Decimal(str(units[unit]))
    if not math.isfinite(float(value)):
        raise UnitError(f"expected a finite {what}, got {shown(text)}")
    return value


def parse_time_ns(text: object) -> float:
    """``'1.5us'`` -> 1500.0 (nanoseconds)."""
    return float(_parse(text, TIME_UNITS_NS, "time", "200ns"))


def parse_size_bytes(text: object) -> int:
    """``'4KiB'`` -> 4096 (bytes); fractional bytes are rejected."""
    value = _parse(text, SIZE_UNITS_B, "size", "4KiB")
    if value != int(value):
        raise UnitError(f"a size must be a whole number of bytes, got {shown(text)}")
    return int(value)


def parse_rate_gts(text: object) -> float:
    """``'64GT/s'`` -> 64.0 (giga-transfers per second per lane)."""
    return float(_parse(text, RATE_UNITS_GT, "signalling rate", "64GT/s"))


def parse_length_m(text: object) -> float:
    """``'30cm'`` -> 0.3 (metres)."""
    return float(_parse(text, LENGTH_UNITS_M, "length", "30cm"))


def format_time_ns(value_ns: float) -> str:
    """A short human reading of a time in ns (``1.5 µs``), for tables and messages."""
    magnitude = abs(value_ns)
    if magnitude >= 1e6:
        return f"{value_ns / 1e6:.4g} ms"
    if magnitude >= 1e3:
        return f"{value_ns / 1e3:.4g} µs"
    return f"{value_ns:.4g} ns"
