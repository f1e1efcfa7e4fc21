"""What a receiver makes of the training sets it decided: its framer, then its PRBS checker.

The framer (``framing.py``) finds the set boundaries in the decided symbols and so
observes the set length; the PRBS31 checker (``prbs.py``) then runs over the training
sequences with the markers cut out. When the PRBS31 checker cannot verify a row,
checkers of the other O.150 orders identify what was sent (-1: none of them). Nothing
here knows what the transmitter was configured to send: every figure is read off the
symbols.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sitssim.config.phy_profile import SPEC_TRAINING_PRBS
from sitssim.phy.framing import frame_rows, payload
from sitssim.phy.pam4 import gray_decode, slice_symbols
from sitssim.phy.prbs import POLYNOMIALS, PrbsChecker


@dataclass(frozen=True)
class SequenceCheck:
    """What one receiver's framer and checkers made of the training sets it received.

    ``framed``: the framer locked; ``sets``: markers it found on its lattice;
    ``symbols_per_set``: the training-sequence length it observed (0 unframed).
    """

    framed: bool
    sets: int
    symbols_per_set: int
    locked: bool
    locks: int
    bits_checked: int
    errors: int
    detected_order: int


def _check(bits: npt.NDArray[np.uint8], order: int) -> PrbsChecker:
    checker = PrbsChecker(order)
    checker.feed(bits)
    return checker


def _detected_order(bits: npt.NDArray[np.uint8], spec: PrbsChecker) -> int:
    """The O.150 order the bits follow: the spec's if its checker verified them, else the
    order whose checker sees the fewest errors below 1 % (-1: none)."""
    if spec.locked and spec.errors * 100 < spec.bits_checked:
        return SPEC_TRAINING_PRBS
    best, detected = math.inf, -1
    for order in POLYNOMIALS:
        other = spec if order == SPEC_TRAINING_PRBS else _check(bits, order)
        if other.bits_checked and other.errors * 100 < other.bits_checked:
            ratio = other.errors / other.bits_checked
            if ratio < best:
                best, detected = ratio, order
    return detected


def check_sequences(equalised: npt.NDArray[np.float64]) -> list[SequenceCheck]:
    """Decide each row's equalised samples, frame them and check their training sequences."""
    return check_decisions(slice_symbols(equalised))


def check_decisions(decided: npt.NDArray[np.uint8]) -> list[SequenceCheck]:
    """:func:`check_sequences` of each row's decided symbols (level indices 0..3)."""
    out = []
    for row, framing in zip(decided, frame_rows(decided), strict=True):
        bits = gray_decode(payload(row, framing))
        checker = _check(bits, SPEC_TRAINING_PRBS)
        out.append(
            SequenceCheck(
                framed=framing.locked,
                sets=framing.markers,
                symbols_per_set=framing.sequence_symbols,
                locked=checker.locked,
                locks=len(checker.lock_positions),
                bits_checked=checker.bits_checked,
                errors=checker.errors,
                detected_order=_detected_order(bits, checker),
            )
        )
    return out
