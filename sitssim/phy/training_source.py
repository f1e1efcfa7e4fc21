"""What a batch of transmitters sends while training: framed PRBS training sets.

Every transmitter sends one stream of training sets (``framing.py``: a marker, then a
training sequence), the sequences cut from one PRBS (order ``order``, all-ones seed),
Gray-mapped two bits per symbol. Each transmitter sends that stream from its own phase,
a random offset into it, so its sets start wherever they start relative to the
receiver's blocks. This is the ``symbol_source`` of ``equalizer.level3_eq_detail``, and
a ``received.SharedSymbolSource``: the rows are one sequence at several offsets, so the
equaliser computes the noiseless received sums once over the stream.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from sitssim.phy.channel import PAM4_LEVELS
from sitssim.phy.framing import MARKER_LEVELS, MARKER_SYMBOLS, sequence_symbols_before, set_symbols
from sitssim.phy.pam4 import BITS_PER_SYMBOL, gray_encode
from sitssim.phy.prbs import prbs

# Rows of the shared stream are this many symbols apart at most (per-direction phase).
MAX_OFFSET_SYMBOLS = 1 << 16


class PrbsTrainingSource:
    """PAM4 levels of framed PRBS training sets for a batch of transmitters, continuing
    across calls; ``sequence`` training-sequence symbols follow each marker."""

    def __init__(self, order: int, rng: np.random.Generator, batch: int, sequence: int) -> None:
        self.order = order
        self.sequence = sequence
        self.period = set_symbols(sequence)
        self.offsets = rng.integers(0, MAX_OFFSET_SYMBOLS, batch)
        self._bits = prbs(order, 0)
        self._bits0 = 0
        self._pos = 0

    def _extend_to(self, end: int) -> None:
        """Have the PRBS bits up to bit index ``end``."""
        have = self._bits0 + self._bits.size
        if end <= have:
            return
        if self._bits0 == 0 and self._bits.size == 0:
            self._bits = prbs(self.order, end)
            return
        # The register state is the last `order` bits, oldest first = most significant.
        history = self._bits[-self.order :].astype(np.int64)
        seed = int(history @ (1 << np.arange(self.order - 1, -1, -1, dtype=np.int64)))
        self._bits = np.concatenate([self._bits, prbs(self.order, end - have, seed=seed)])

    def __call__(self, shape: tuple[int, int]) -> npt.NDArray[np.float64]:
        levels, starts = self.shared_rows(shape)
        return sliding_window_view(levels, shape[1])[starts]

    def shared_rows(
        self, shape: tuple[int, int]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        """The next ``shape[1]`` symbols of every row as one stretch of the framed stream
        and each row's start in it (``received.SharedSymbolSource``)."""
        batch, n = shape
        if batch != self.offsets.size:
            raise ValueError(f"this source feeds {self.offsets.size} transmitters, not {batch}")
        first, last = int(self.offsets.min()), int(self.offsets.max())
        a, b = self._pos + first, self._pos + last + n
        q = np.arange(a, b)
        phase = q % self.period
        marker = phase < MARKER_SYMBOLS
        j = sequence_symbols_before(q, self.sequence)
        j0, j1 = int(sequence_symbols_before(a, self.sequence)), int(j[-1]) + 1
        self._extend_to(BITS_PER_SYMBOL * j1)
        bits = self._bits[BITS_PER_SYMBOL * j0 - self._bits0 : BITS_PER_SYMBOL * j1 - self._bits0]
        sequence = PAM4_LEVELS[gray_encode(bits)]
        levels = MARKER_LEVELS[np.minimum(phase, MARKER_SYMBOLS - 1)]
        if sequence.size:
            np.copyto(levels, sequence[j - j0], where=~marker)
        self._pos += n
        # Keep what later calls read, and at least the register state to continue from.
        keep = BITS_PER_SYMBOL * int(sequence_symbols_before(self._pos + first, self.sequence))
        drop = min(keep - self._bits0, self._bits.size - self.order)
        if drop > 0:
            self._bits = self._bits[drop:]
            self._bits0 += drop
        return levels, self.offsets - first
