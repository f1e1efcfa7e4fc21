"""Quantities with units, as scenario files write them.

The simulator's internal units are fixed: time in nanoseconds (float), sizes in
bytes (int), signalling rates in GT/s (float), lengths in metres (float).
Scenario files must say their unit (``200us``, ``4KiB``, ``64GT/s``, ``30cm``):
a bare number for a time or a size is ambiguous, so it is rejected with a
message that lists the accepted units.
"""

from __future__ import annotations

import re

_NUMBER = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-z/µ]+)\s*$")

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


class UnitError(ValueError):
    """A quantity that cannot be read; the message says what was expected."""


def _parse(text: object, units: dict, what: str) -> float:
    if isinstance(text, bool) or not isinstance(text, str):
        raise UnitError(f"expected a {what} with a unit ({', '.join(units)}), got {text!r}")
    match = _QUANTITY.match(text)
    if match is None:
        raise UnitError(f"expected a {what} like '10{next(iter(units))}', got {text!r}")
    number, unit = match.groups()
    if unit not in units:
        raise UnitError(f"unknown {what} unit {unit!r} in {text!r}; use one of {', '.join(units)}")
    return float(number) * units[unit]


def parse_time_ns(text: object) -> float:
    """``'1.5us'`` -> 1500.0 (nanoseconds)."""
    return _parse(text, TIME_UNITS_NS, "time")


def parse_size_bytes(text: object) -> int:
    """``'4KiB'`` -> 4096 (bytes); fractional bytes are rejected."""
    value = _parse(text, SIZE_UNITS_B, "size")
    if value != int(value):
        raise UnitError(f"a size must be a whole number of bytes, got {text!r}")
    return int(value)


def parse_rate_gts(text: object) -> float:
    """``'64GT/s'`` -> 64.0 (giga-transfers per second per lane)."""
    return _parse(text, RATE_UNITS_GT, "signalling rate")


def parse_length_m(text: object) -> float:
    """``'30cm'`` -> 0.3 (metres)."""
    return _parse(text, LENGTH_UNITS_M, "length")


def format_time_ns(value_ns: float) -> str:
    """A short human reading of a time in ns (``1.5 µs``), for tables and messages."""
    magnitude = abs(value_ns)
    if magnitude >= 1e6:
        return f"{value_ns / 1e6:.4g} ms"
    if magnitude >= 1e3:
        return f"{value_ns / 1e3:.4g} µs"
    return f"{value_ns:.4g} ns"
