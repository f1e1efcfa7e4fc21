"""The receiver's rate counter against a count of the transmitter's symbol boundaries."""

from __future__ import annotations

import numpy as np
import pytest

from sitssim.phy.rate_counter import GATE_CYCLES, REFCLK_NS, count_symbols


def boundaries_in(first_ns: float, ui_ns: float, t_open: float, t_close: float) -> int:
    """Symbol boundaries ``first + k ui`` (k >= 0) in [t_open, t_close), enumerated."""
    k = np.arange(int((t_close - first_ns) / ui_ns) + 2)
    t = first_ns + k * ui_ns
    return int(np.count_nonzero((t >= t_open - 1e-9) & (t < t_close - 1e-9)))


@pytest.mark.parametrize(
    ("ui_ns", "first_ns", "locked_ns"),
    [
        (2 / 64, 2000.0, 2132.0),
        (2 / 32, 2000.0, 2264.1),
        (1 / 64, 3000.5, 3001.0),
        (2 / 63.99, 1999.9, 2010.3),  # 156 ppm slow
        (2 / 60, 0.0, 1.0),
    ],
)
def test_the_count_is_the_transmitters_boundaries_in_a_gate_of_the_receivers_clock(
    ui_ns: float, first_ns: float, locked_ns: float
) -> None:
    count = count_symbols(first_ns, ui_ns, locked_ns)
    # The gate opens at the receiver's first REFCLK edge after lock and lasts its cycles.
    assert count.t_open_ns % REFCLK_NS == 0 and locked_ns <= count.t_open_ns < locked_ns + 4
    assert count.gate_ns == count.t_close_ns - count.t_open_ns == GATE_CYCLES * REFCLK_NS
    assert count.symbols == boundaries_in(first_ns, ui_ns, count.t_open_ns, count.t_close_ns)
    # Which is the transmitter's rate, to one symbol in the gate.
    assert abs(count.symbols / count.gate_ns - 1 / ui_ns) <= 1 / count.gate_ns
