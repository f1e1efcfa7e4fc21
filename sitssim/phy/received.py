"""The symbols a batch of training streams has sent, and their noiseless received sums.

Theory of operation
-------------------
A link direction's received sample is its cursor ISI sum, plus its jitter draw
times its slope ISI sum, plus its noise (``channel.py``). The two ISI sums are
the noiseless part: they depend only on the symbols sent, the Tx FFE in force
and the pulse taps (the sampling phase). :class:`SymbolRows` keeps each row's
symbols as the source delivers them and computes each row's sums from its own
symbols, in row groups (any source, any per-row taps).

PRBS training is more regular than that: every transmitter sends the same
sequence, each from its own offset (:class:`SharedSymbolSource`). When the rows
also share the taps, row ``r``'s sums are the sums over the shared sequence,
shifted by the row's offset, so :class:`SharedSymbolRows` computes them once
over the shared sequence per distinct Tx FFE in force and hands each row its
slice: at a thousand links, a few rows of sums instead of two thousand. The
values are the per-row values bit for bit: every sum is the same dot product of
the same symbols with the same taps, ``fir_columns`` computes each output element
as one dot product over its own window whichever row or piece it sits in, and the
samples a row keeps never reach the zero padding at the ends of a span
(``tests/phy/test_received.py`` compares the two classes, and a whole Level-3 EQ
run either way). :func:`symbol_rows` picks the class when the stream is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from sitssim.phy.channel import FloatArray, apply_tx_ffe, fir_columns

SymbolSource = Callable[[tuple[int, int]], FloatArray]
# (cursor sums, slope sums) of a row group's samples a..b-1 of a span, each (rows, b - a).
GroupSums = Callable[[slice, int, int], tuple[FloatArray, FloatArray]]


@runtime_checkable
class SharedSymbolSource(Protocol):
    """A symbol source whose rows all send one level sequence, each from its own offset."""

    def __call__(self, shape: tuple[int, int]) -> FloatArray: ...

    def shared_rows(self, shape: tuple[int, int]) -> tuple[FloatArray, npt.NDArray[np.int64]]:
        """``(levels, starts)``: the next ``n`` symbols of row ``r`` are
        ``levels[starts[r] : starts[r] + n]``; ``starts`` (smallest 0) is the same on
        every call, and each call's ``levels`` begins where the last call's rows ended."""
        ...


class SymbolRows:
    """Every row's symbols as the source delivers them; ISI sums computed row by row."""

    def __init__(
        self, source: SymbolSource, batch: int, taps: FloatArray, n_pre: int, n_post: int
    ) -> None:
        self.batch = batch
        self._source = source
        self._taps = taps
        self._pre, self._post = n_pre, n_post
        self._x0 = 0
        self._x = np.zeros((batch, 0))

    @property
    def end(self) -> int:
        """The position after the last symbol the rows have."""
        return self._x0 + self._x.shape[1]

    def extend(self, end: int) -> None:
        """Have every row's symbols up to position ``end``."""
        if end > self.end:
            fresh = self._source((self.batch, end - self.end))
            self._x = np.concatenate([self._x, fresh], axis=1)

    def trim(self, keep: int) -> None:
        """Forget the symbols before position ``keep``."""
        if keep > self._x0:
            self._x = self._x[:, keep - self._x0 :]
            self._x0 = keep

    def rows(self, a: int, b: int) -> FloatArray:
        """Every row's symbols at positions ``a..b-1``, (batch, b - a); not to be written."""
        return self._x[:, a - self._x0 : b - self._x0]

    def sums(self, lo: int, hi: int, tx_ffe: FloatArray) -> GroupSums:
        """Sums of the span of samples whose symbol windows lie in positions ``lo..hi-1``.

        Sample ``k`` of the span is position ``lo + n_post + 1 + k``, up to position
        ``hi - n_pre - 2``; ``tx_ffe`` is every row's Tx FFE, (3,) or (batch, 3). The
        span's symbols are kept for the returned function, whatever is trimmed later.
        """
        x = self.rows(lo, hi)
        span = self._pre + self._post + 2

        def group(rows: slice, a: int, b: int) -> tuple[FloatArray, FloatArray]:
            xs = apply_tx_ffe(x[rows, a : b + span], tx_ffe[rows] if tx_ffe.ndim == 2 else tx_ffe)
            both = fir_columns(xs, self._taps[rows], self._pre)[:, self._post + 1 : -self._pre - 1]
            return both[..., 0], both[..., 1]

        return group


class SharedSymbolRows(SymbolRows):
    """Rows that send one shared sequence with the same taps: sums once per Tx FFE.

    Only the shared sequence is kept, from the first position any row still needs:
    row ``r``'s position ``p`` is shared symbol ``p + starts[r]``.
    """

    def __init__(
        self, source: SharedSymbolSource, batch: int, taps: FloatArray, n_pre: int, n_post: int
    ) -> None:
        super().__init__(source, batch, taps, n_pre, n_post)
        self._shared_source = source
        self._offsets: npt.NDArray[np.int64] | None = None
        self._span = 0
        self._end = 0
        self._s0 = 0
        self._s = np.zeros(0)

    @property
    def end(self) -> int:
        return self._end

    def extend(self, end: int) -> None:
        n = end - self._end
        if n <= 0:
            return
        levels, starts = self._shared_source.shared_rows((self.batch, n))
        if self._offsets is None:
            self._offsets = np.asarray(starts, dtype=np.int64).copy()
            self._span = int(self._offsets.max())
        elif not np.array_equal(starts, self._offsets):
            raise ValueError("a shared symbol source changed its rows' offsets")
        # `levels` starts at shared symbol `end`, overlapping the kept tail by `span`.
        self._s = np.concatenate([self._s[: self._end - self._s0], levels])
        self._end = end

    def trim(self, keep: int) -> None:
        if keep > self._s0:
            self._s = self._s[keep - self._s0 :]
            self._s0 = keep

    def rows(self, a: int, b: int) -> FloatArray:
        assert self._offsets is not None, "rows before any symbols"
        return sliding_window_view(self._s, b - a)[self._offsets + (a - self._s0)]

    def sums(self, lo: int, hi: int, tx_ffe: FloatArray) -> GroupSums:
        assert self._offsets is not None, "sums before any symbols"
        shared = self._s[lo - self._s0 : hi + self._span - self._s0]
        rows_ffe = np.broadcast_to(tx_ffe, (self.batch, 3))
        presets, which = np.unique(rows_ffe, axis=0, return_inverse=True)
        # table[0 | 1, preset, k]: cursor | slope sum of the sample at shared symbol
        # lo + n_post + 1 + k, sent with that preset's Tx FFE.
        length = shared.size - self._pre - self._post - 2
        table = np.empty((2, len(presets), length))
        for i, coefficients in enumerate(presets):
            xs = apply_tx_ffe(shared[None, :], coefficients[None, :])[0]
            table[:, i] = _sums_along(xs, self._taps[0], self._pre, self._post).T
        first = which.reshape(-1) * length + self._offsets
        cursor, slope = table[0].reshape(-1), table[1].reshape(-1)
        # Every row group of a block reads windows of one width: build those views once.
        windows: dict[int, tuple[FloatArray, FloatArray]] = {}

        def group(rows: slice, a: int, b: int) -> tuple[FloatArray, FloatArray]:
            if b - a not in windows:
                windows[b - a] = (
                    sliding_window_view(cursor, b - a),
                    sliding_window_view(slope, b - a),
                )
            cursor_windows, slope_windows = windows[b - a]
            starts = first[rows] + a
            return cursor_windows[starts], slope_windows[starts]

        return group


# Samples per piece of a shared sequence in ``_sums_along``: a matmul of much more than
# that hands OpenBLAS enough rows to start its threads, several times slower here.
_PIECE = 4096


def _sums_along(xs: FloatArray, taps: FloatArray, n_pre: int, n_post: int) -> FloatArray:
    """(cursor, slope) sums of the Tx output ``xs`` at ``n_post + 1 .. xs.size - n_pre - 2``.

    Shape (samples, 2). Those are the samples whose windows skip both ends of ``xs``
    (where the Tx FFE saw padding), as ``SymbolRows.sums`` keeps them; the sequence goes
    through ``fir_columns`` in overlapping pieces, none of whose padding reaches a kept sum.
    """
    count = xs.size - n_pre - n_post - 2
    pieces = -(-count // _PIECE)
    span = _PIECE + n_post + n_pre
    padded = np.zeros(1 + (pieces - 1) * _PIECE + span)
    padded[: xs.size - 1] = xs[1:]
    windows = sliding_window_view(padded, span)[::_PIECE]
    both = fir_columns(windows, taps[None], n_pre)[:, n_post : n_post + _PIECE]
    return both.reshape(-1, 2)[:count]


def symbol_rows(
    source: SymbolSource, batch: int, taps: FloatArray, n_pre: int, n_post: int
) -> SymbolRows:
    """The symbol store for ``source``: shared sums when its rows share a sequence and taps.

    ``taps`` is (batch, n_pre + 1 + n_post, 2): each row's cursor and slope taps.
    """
    if isinstance(source, SharedSymbolSource) and bool(np.all(taps == taps[:1])):
        return SharedSymbolRows(source, batch, taps, n_pre, n_post)
    return SymbolRows(source, batch, taps, n_pre, n_post)
