"""Scenario field types that carry their range, shared by every config model.

Every number a scenario gives has a lower and an upper bound, so no value the
schema accepts can overflow a conversion, exhaust memory or hang the model
before it starts. The ranges come from physics (no datacentre link is longer
than 10 km, no link signals at 1000 GT/s) or from what the implementation can
hold (float64 nanoseconds, int64 table columns, a fabric graph that builds in
seconds). They are never the spec's limits: a scenario that asks for what the
spec forbids (12 GPUs in a fat tree, 16 VCs per port) is valid input whose
clause fails. Whether a run of in-range values fits the machine is the resource
estimate's question, not the schema's.

docs/scenario.md gives every field's range and the reason for it. This is a
leaf module: config modules in phy/, link/, fabric/ and workloads/ import it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from sitssim.units import (
    UnitError,
    parse_length_m,
    parse_rate_gts,
    parse_size_bytes,
    parse_time_ns,
)

# One picosecond: the resolution the engine keeps times to (a UI is 31.25 ps); an interval
# below it would ask for more events per nanosecond than the model can resolve.
MIN_INTERVAL_NS = 1e-3
# 100 s of simulated time. At 1e11 ns a float64 still resolves 0.015 ps, and 100 s is 1e5
# BER training cycles: longer than anything an interconnect run has to show.
MAX_TIME_NS = 1e11
# 10 km, the reach of single-mode datacentre optics; flight time at 5 ns/m.
MAX_LENGTH_M = 1e4
MAX_PROPAGATION_NS = MAX_LENGTH_M * 5.0
# 1 TiB: more than any GPU's memory holds, and bytes · 8 stays an exact float64 integer.
MAX_BYTES = 2**40
# Signalling rates: 1 MT/s is the smallest unit read; 1000 GT/s is 4× the fastest SerDes.
MIN_RATE_GTS = 1e-3
MAX_RATE_GTS = 1000.0
# PCIe's widest link width.
MAX_LANES = 32
# Offered load as a multiple of the injection bandwidth: above 1 is overload, which is
# valid input; 16× fills every queue within its first messages, so more shows nothing new.
MAX_LOAD = 16.0
# GPUs in one fabric: a 100,000-GPU direct RC takes 5.5 s and 350 MB to build before
# anything runs, so 65,536 keeps validation to seconds.
MAX_GPUS = 2**16
# Links (graph edges) in one fabric: an NVSwitch fabric of 2^20 GPU-plane links took 45 s
# and 1.4 GB to build; 2^17 builds in a few seconds and holds a radix-2 tree of MAX_GPUS.
MAX_FABRIC_LINKS = 2**17
# Switch levels: with a radix of at least 2, 16 levels hold MAX_GPUS GPUs; more levels
# only stack single-switch levels on top.
MAX_LEVELS = 16
# Ports: twice the largest switch ASIC's SerDes count (512 lanes).
MAX_PORTS = 1024
# Seeds go into int64 report columns.
MAX_SEED = 2**63 - 1
# Decibels: a channel 100 dB down carries no signal, and 100 dB SNR is noise-free.
MAX_DB = 100.0
# Tokens per request: above the longest context window of any released model (10 M).
MAX_TOKENS = 2**24
# A generic count of things the model keeps one Python object or array row for.
MAX_ITEMS = 2**20
# BF16's largest finite value: no activation or scale a GPU holds is larger.
MAX_BF16 = 3.3895313892515355e38


def _scaled(value: float, units: tuple[tuple[str, float], ...]) -> str:
    """``value`` in the largest unit it reaches (1e-3 ns -> ``1ps``), as scenarios write it."""
    for name, size in units:
        if abs(value) >= size:
            return f"{value / size:g}{name}"
    return "0" if value == 0 else f"{value / units[-1][1]:g}{units[-1][0]}"


_TIME = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0), ("ps", 1e-3))
_SIZE = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))
_RATE = (("GT/s", 1.0), ("MT/s", 1e-3))
_LENGTH = (("m", 1.0), ("cm", 1e-2), ("mm", 1e-3))


def _ranged(
    parse: Callable[[object], Any],
    what: str,
    units: tuple[tuple[str, float], ...],
    lo: float,
    hi: float,
    open_low: bool,
) -> BeforeValidator:
    """Parse, then say the range in the field's own units.

    The ``Field`` bounds beside it declare the same range for the schema; this check
    runs first only so the message reads ``from 1ps to 100s``, not bare nanoseconds.
    """

    @functools.wraps(parse)
    def check(text: object) -> Any:
        value = parse(text)
        if value < lo or value > hi or (open_low and value == lo):
            if open_low and lo == 0:
                wanted = f"a positive {what} of at most {_scaled(hi, units)}"
            elif open_low:
                wanted = f"a {what} above {_scaled(lo, units)}, at most {_scaled(hi, units)}"
            else:
                sign = "positive " if lo > 0 else ""
                wanted = f"a {sign}{what} from {_scaled(lo, units)} to {_scaled(hi, units)}"
            raise UnitError(f"expected {wanted}, got {text!r}")
        return value

    return BeforeValidator(check)


def count(lo: int, hi: int) -> type[int]:
    """An integer field in ``[lo, hi]``; strict, so ``1e400`` (a YAML float) is refused."""
    # gt=0 for a count from 1: the same range, and the message says "a positive value".
    low = {"gt": 0} if lo == 1 else {"ge": lo}
    return Annotated[int, Field(le=hi, strict=True, **low)]  # type: ignore[return-value]


def _not_a_truth_value(value: object) -> object:
    # Pydantic reads true as 1.0 where a float is expected; a YAML `yes` is never a number.
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    return value


def number(lo: float, hi: float, *, open_low: bool = False, open_high: bool = False) -> type:
    """A finite float field in ``[lo, hi]`` (either end open on request); not a bool."""
    low = {"gt": lo} if open_low else {"ge": lo}
    high = {"lt": hi} if open_high else {"le": hi}
    return Annotated[  # type: ignore[return-value]
        float, BeforeValidator(_not_a_truth_value), Field(allow_inf_nan=False, **low, **high)
    ]


def time_ns(lo: float, hi: float = MAX_TIME_NS, *, open_low: bool = False) -> type:
    """A time written with a unit (``200ns``), in ``[lo, hi]`` nanoseconds."""
    low = {"gt": lo} if open_low else {"ge": lo}
    return Annotated[  # type: ignore[return-value]
        float,
        _ranged(parse_time_ns, "time", _TIME, lo, hi, open_low),
        Field(allow_inf_nan=False, le=hi, **low),
    ]


# Times: a moment or a delay (>= 0), something that must last (> 0), a repeat interval.
Time = time_ns(0.0)
PositiveTime = time_ns(0.0, open_low=True)
Interval = time_ns(MIN_INTERVAL_NS)
Propagation = time_ns(0.0, MAX_PROPAGATION_NS)

Size = Annotated[
    int,
    _ranged(parse_size_bytes, "size", _SIZE, 0, MAX_BYTES, open_low=True),
    Field(ge=1, le=MAX_BYTES),
]
Rate = Annotated[
    float,
    _ranged(parse_rate_gts, "signalling rate", _RATE, MIN_RATE_GTS, MAX_RATE_GTS, open_low=False),
    Field(ge=MIN_RATE_GTS, le=MAX_RATE_GTS, allow_inf_nan=False),
]
Length = Annotated[
    float,
    _ranged(parse_length_m, "length", _LENGTH, 0.0, MAX_LENGTH_M, open_low=False),
    Field(ge=0, le=MAX_LENGTH_M, allow_inf_nan=False),
]

Fraction = number(0.0, 1.0)
Probability = Fraction
Load = number(0.0, MAX_LOAD, open_low=True)

GpuCount = count(1, MAX_GPUS)
Levels = count(1, MAX_LEVELS)
Ports = count(1, MAX_PORTS)
Seed = count(0, MAX_SEED)
Tokens = count(1, MAX_TOKENS)
Items = count(1, MAX_ITEMS)
