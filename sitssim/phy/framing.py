"""Training sets on the wire: a set-boundary marker, then a training sequence; the framer.

Theory of operation
-------------------
*Layout.* Every training set a transmitter sends is :data:`MARKER` (16 symbols: eight at
-3, then eight at +3) followed by the device's training sequence (the spec's: 512
symbols of PRBS31). The marker is a low-frequency pattern in the manner of PCIe's
Electrical Idle Exit Ordered Set, which receivers use for block alignment: in PAM4 PRBS
data (Gray-mapped) it is 16 zero bits then ``1010...`` (16 bits), which a PRBS stream
produces by chance once in 2^32 positions. The sequences of consecutive sets are
consecutive stretches of one PRBS stream (the marker does not restart it), so the
stream with its markers taken out is a plain PRBS. :func:`set_symbols` is a set's length
on the wire; one LMS iteration of the receiver is one set.

*Framer.* A receiver does not know where sets begin, nor how long they are: it finds
the marker in the symbols it decided and locks on the shortest spacing it sees twice in
a row (three markers equally spaced); that spacing is the set length it *observed*, and
the training sequence it observed is the spacing less the marker. Markers it then misses (a
symbol error inside one) leave the lattice alone. A framer that never saw two equal
spacings reports no framing, and the receiver's PRBS checker then sees the raw stream.
:func:`payload` cuts the markers out of a framed row, giving back the PRBS the
transmitter sent, for the checker.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sitssim.phy.pam4 import LEVELS

MARKER_HALF = 8
MARKER: npt.NDArray[np.uint8] = np.array([0] * MARKER_HALF + [3] * MARKER_HALF, dtype=np.uint8)
MARKER.setflags(write=False)
MARKER_SYMBOLS = MARKER.size
MARKER_LEVELS: npt.NDArray[np.float64] = LEVELS[MARKER].astype(np.float64)
MARKER_LEVELS.setflags(write=False)


def set_symbols(sequence_symbols: int) -> int:
    """A training set's length on the wire: its marker and its training sequence."""
    return MARKER_SYMBOLS + sequence_symbols


def sequence_symbols_before(position: npt.ArrayLike, sequence: int) -> npt.NDArray[np.int64]:
    """How many training-sequence symbols precede each position of a framed stream that
    starts with a marker (sets of ``sequence`` symbols after their markers)."""
    q = np.asarray(position, dtype=np.int64)
    period = set_symbols(sequence)
    return (q // period) * sequence + np.maximum(q % period - MARKER_SYMBOLS, 0)


@dataclass(frozen=True)
class Framing:
    """What a receiver's framer made of one row of decided symbols.

    ``period`` is the observed set length (0: no framing), ``first`` the first marker's
    position on the locked lattice, ``markers`` the markers found on it.
    """

    period: int
    first: int
    markers: int

    @property
    def locked(self) -> bool:
        return self.period > 0

    @property
    def sequence_symbols(self) -> int:
        """The training-sequence length observed: the set less its marker (0: unframed)."""
        return self.period - MARKER_SYMBOLS if self.locked else 0


UNFRAMED = Framing(period=0, first=0, markers=0)


def marker_positions(decided: npt.NDArray[np.uint8]) -> list[npt.NDArray[np.int64]]:
    """Per row, every position where the decided symbols (level indices) spell the marker."""
    rows, n = decided.shape
    last = n - MARKER_SYMBOLS + 1
    if last <= 0:
        return [np.empty(0, dtype=np.int64) for _ in range(rows)]
    # Four symbols rule out almost every position; the few left are compared in full.
    candidate = (
        (decided[:, :last] == MARKER[0])
        & (decided[:, MARKER_HALF - 1 : MARKER_HALF - 1 + last] == MARKER[MARKER_HALF - 1])
        & (decided[:, MARKER_HALF : MARKER_HALF + last] == MARKER[MARKER_HALF])
        & (decided[:, MARKER_SYMBOLS - 1 : MARKER_SYMBOLS - 1 + last] == MARKER[-1])
    )
    out = []
    for r in range(rows):
        at = np.flatnonzero(candidate[r])
        if at.size:
            windows = decided[r, at[:, None] + np.arange(MARKER_SYMBOLS)]
            at = at[(windows == MARKER).all(axis=1)]
        out.append(at.astype(np.int64))
    return out


def lock(positions: npt.NDArray[np.int64]) -> Framing:
    """The framer's lock on one row's marker positions: the shortest spacing seen twice in a
    row, and the markers on the lattice it defines. A marker a symbol error hid makes a
    spacing of two sets, which can repeat too (two hidden markers two sets apart); the set
    is the shortest of them."""
    spacings = np.diff(positions)
    repeats = np.flatnonzero(spacings[1:] == spacings[:-1])
    if not repeats.size:
        return UNFRAMED
    shortest = repeats[np.argmin(spacings[repeats])]
    period = int(spacings[shortest])
    first = int(positions[shortest]) % period
    markers = int(np.count_nonzero(positions % period == first))
    return Framing(period=period, first=first, markers=markers)


def frame_rows(decided: npt.NDArray[np.uint8]) -> list[Framing]:
    """The framer of every row of decided symbols (level indices, rows x symbols)."""
    return [lock(p) for p in marker_positions(decided)]


def payload(row: npt.NDArray[np.uint8], framing: Framing) -> npt.NDArray[np.uint8]:
    """The row's symbols with the markers of its lattice cut out (unframed: all of them)."""
    if not framing.locked:
        return row
    phase = (np.arange(row.size) - framing.first) % framing.period
    return row[phase >= MARKER_SYMBOLS]
