"""The receiver's symbol-rate counter: recovered symbols counted against its own clock.

Theory of operation
-------------------
A receiver knows time only through its reference clock, REFCLK (250 MHz, 4 ns a cycle;
SPEC.md's units). Once it has bit lock in Polling.Active (PCIe: eight consecutive
training sets received) it opens a gate at its next REFCLK edge, counts the symbols its
recovered clock delivers during :data:`GATE_CYCLES` REFCLK cycles, and records the count
beside the gate's length on its own clock. A locked CDR's recovered clock follows the
transmitter's symbol clock (its phase wanders by a fraction of a UI, which can move a
count by one at most), so the count is the number of the transmitter's symbol
boundaries that fall in the gate, and count / gate is the symbol rate the receiver saw,
whatever either end was configured to: a transmitter sending at 32 GT/s puts half as
many symbols in the gate. 1024 cycles (4.096 µs) resolve one symbol in 131 072 at
32 GBd (7.6 ppm).

REFCLK edges fall at whole cycles of the PHY clock (0 = the reset): the model's
reference clocks are nominal, with no oscillator offset (the ``clocks:`` section's
offsets are the devices' timestamp clocks, a separate model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

REFCLK_NS = 4.0
GATE_CYCLES = 1024
# Training sets a receiver sees before it has bit lock and opens the gate.
LOCK_SETS = 8
# Times along different sums agree to this (ns): a boundary on a gate edge is inside.
_EPS_NS = 1e-9


@dataclass(frozen=True)
class RateCount:
    """One receiver's count: the gate (PHY clock, and its length on REFCLK) and the
    symbols counted in it."""

    t_open_ns: float
    t_close_ns: float
    gate_ns: float
    symbols: int


def _boundaries_before(t_ns: float, first_ns: float, ui_ns: float) -> int:
    """Symbol boundaries at ``first_ns + k * ui_ns`` (k >= 0) before ``t_ns``."""
    return max(0, math.ceil((t_ns - first_ns) / ui_ns - _EPS_NS / ui_ns))


def count_symbols(first_ns: float, ui_ns: float, locked_ns: float) -> RateCount:
    """The count of a receiver that has bit lock at ``locked_ns`` on a stream whose first
    symbol boundary is at ``first_ns`` and whose symbols last ``ui_ns`` (PHY clock)."""
    t_open = math.ceil(locked_ns / REFCLK_NS - _EPS_NS) * REFCLK_NS
    gate = GATE_CYCLES * REFCLK_NS
    t_close = t_open + gate
    symbols = _boundaries_before(t_close, first_ns, ui_ns) - _boundaries_before(
        t_open, first_ns, ui_ns
    )
    return RateCount(t_open_ns=t_open, t_close_ns=t_close, gate_ns=gate, symbols=symbols)
