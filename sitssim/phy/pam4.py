"""PAM4 symbol mapping, slicing and 1/(1+D) precoding at the SITS2026 rate.

Theory of operation
-------------------
PAM4 carries two bits per symbol on four amplitude levels. Bits are taken in pairs, the
first of each pair the more significant, and Gray-mapped (:data:`GRAY_MAP`) so that
neighbouring levels differ in one bit: the common slicer error, to an adjacent level,
then costs one bit error rather than two. Symbols are handled as level indices 0..3
(``uint8``); :func:`to_levels` turns them into the nominal amplitudes −3, −1, +1, +3,
and :func:`slice_symbols` decides received analogue samples against the mid-points
−2, 0, +2.

Optional precoding, as in IEEE 802.3 and PCIe 6.x, applies ``1/(1+D)`` modulo 4 to the
Gray-coded indices before level mapping, ``y[n] = (x[n] − y[n−1]) mod 4``, and the
receiver undoes it with ``x[n] = (y[n] + y[n−1]) mod 4``. A DFE that decides one symbol
wrong tends to feed back an error of alternating sign into the following decisions;
the ``1 + D`` decoder cancels such a run except at its two ends, so a burst of any
length costs at most two decoded symbol errors. The precoder's recursion is unrolled
into an alternating cumulative sum so that whole sequences are coded with numpy.

Rates: a link's rate in GT/s counts bits; PAM4 sends half as many symbols, so 64 GT/s is
32 GBd and one unit interval (UI, one symbol) lasts 31.25 ps.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BITS_PER_SYMBOL",
    "DATA_RATE_GTPS",
    "GRAY_MAP",
    "LEVELS",
    "SYMBOL_RATE_GBD",
    "THRESHOLDS",
    "UI_PS",
    "decode_precoded",
    "demodulate",
    "gray_decode",
    "gray_encode",
    "modulate",
    "precode",
    "slice_symbols",
    "symbol_rate_gbd",
    "to_levels",
    "ui_ps",
]

BITS_PER_SYMBOL = 2


def symbol_rate_gbd(rate_gtps: float) -> float:
    """PAM4 symbol rate in GBd for a link rate in GT/s."""
    if not rate_gtps > 0:
        raise ValueError(f"link rate must be > 0 GT/s, got {rate_gtps!r}")
    return rate_gtps / BITS_PER_SYMBOL


def ui_ps(rate_gtps: float) -> float:
    """Unit interval (one PAM4 symbol) in ps for a link rate in GT/s."""
    return 1e3 / symbol_rate_gbd(rate_gtps)


DATA_RATE_GTPS = 64.0
SYMBOL_RATE_GBD = symbol_rate_gbd(DATA_RATE_GTPS)
UI_PS = ui_ps(DATA_RATE_GTPS)

GRAY_MAP: MappingProxyType[tuple[int, int], int] = MappingProxyType(
    {(0, 0): 0, (0, 1): 1, (1, 1): 2, (1, 0): 3}
)
"""Bit pair (first, second) -> level index; indices 0..3 are levels −3, −1, +1, +3."""

LEVELS: NDArray[np.int8] = np.array([-3, -1, 1, 3], dtype=np.int8)
LEVELS.flags.writeable = False

THRESHOLDS: NDArray[np.float64] = np.array([-2.0, 0.0, 2.0])
THRESHOLDS.flags.writeable = False

_PAIR_TO_SYMBOL = np.array([GRAY_MAP[(pair >> 1, pair & 1)] for pair in range(4)], dtype=np.uint8)
_SYMBOL_TO_PAIR = np.argsort(_PAIR_TO_SYMBOL).astype(np.uint8)


def _as_bits(bits: ArrayLike) -> NDArray[np.uint8]:
    arr = np.asarray(bits)
    if arr.ndim != 1 or arr.size % BITS_PER_SYMBOL:
        raise ValueError(f"need a 1-D bit array of even length, got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        raise ValueError("bits must be 0 or 1")
    return arr.astype(np.uint8, copy=False)


def _as_symbols(symbols: ArrayLike) -> NDArray[np.uint8]:
    arr = np.asarray(symbols)
    if arr.ndim != 1:
        raise ValueError(f"symbols must be one-dimensional, got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() > 3):
        raise ValueError("symbols must be level indices 0..3")
    return arr.astype(np.uint8, copy=False)


def _check_state(state: int) -> int:
    if state not in range(4):
        raise ValueError(f"precoder state must be a level index 0..3, got {state!r}")
    return int(state)


def gray_encode(bits: ArrayLike) -> NDArray[np.uint8]:
    """Bits (even count, first of each pair most significant) -> level indices 0..3."""
    b = _as_bits(bits)
    return _PAIR_TO_SYMBOL[2 * b[0::2] + b[1::2]]


def gray_decode(symbols: ArrayLike) -> NDArray[np.uint8]:
    """Level indices 0..3 -> bits, two per symbol."""
    pairs = _SYMBOL_TO_PAIR[_as_symbols(symbols)]
    bits = np.empty(2 * pairs.size, dtype=np.uint8)
    bits[0::2] = pairs >> 1
    bits[1::2] = pairs & 1
    return bits


def precode(symbols: ArrayLike, state: int = 0) -> NDArray[np.uint8]:
    """1/(1+D) mod 4 precoder: ``y[n] = (x[n] − y[n−1]) mod 4`` with ``y[−1] = state``.

    To continue a stream in a later call, pass the last output symbol as ``state``.
    """
    x = _as_symbols(symbols).astype(np.int64)
    y_prev = _check_state(state)
    # Unrolled: y[n] = (−1)^n · (Σ_{j≤n} (−1)^j x[j] − y[−1]) mod 4.
    signs = 1 - 2 * (np.arange(x.size, dtype=np.int64) & 1)
    return (signs * (np.cumsum(signs * x) - y_prev) % 4).astype(np.uint8)


def decode_precoded(symbols: ArrayLike, state: int = 0) -> NDArray[np.uint8]:
    """Inverse of :func:`precode`: ``x[n] = (y[n] + y[n−1]) mod 4`` with ``y[−1] = state``."""
    y = _as_symbols(symbols)
    prev = np.empty_like(y)
    prev[:1] = _check_state(state)
    prev[1:] = y[:-1]
    return (y + prev) % 4


def to_levels(symbols: ArrayLike) -> NDArray[np.int8]:
    """Level indices 0..3 -> nominal amplitudes −3, −1, +1, +3."""
    return LEVELS[_as_symbols(symbols)]


def slice_symbols(samples: ArrayLike) -> NDArray[np.uint8]:
    """Decide received analogue samples against −2, 0, +2; a sample on a threshold goes up.

    A sample's level is the number of thresholds it is not below (a NaN is below none:
    level 3, where a binary search of the thresholds puts it too). Three comparisons
    over the samples cost a fraction of ``np.searchsorted``'s search per sample.
    """
    x = np.asarray(samples, dtype=np.float64)
    levels = np.zeros(x.shape, dtype=np.uint8)
    not_below = np.empty(x.shape, dtype=np.bool_)
    for threshold in THRESHOLDS:
        np.less(x, threshold, out=not_below)
        np.logical_not(not_below, out=not_below)
        levels += not_below.view(np.uint8)
    return levels if levels.ndim else levels[()]


def modulate(bits: ArrayLike, precoding: bool = False) -> NDArray[np.int8]:
    """Bits -> PAM4 amplitudes (−3, −1, +1, +3), one per UI, optionally precoded."""
    symbols = gray_encode(bits)
    return to_levels(precode(symbols) if precoding else symbols)


def demodulate(samples: ArrayLike, precoding: bool = False) -> NDArray[np.uint8]:
    """Received amplitudes (one per UI) -> bits; inverse of :func:`modulate`."""
    symbols = slice_symbols(samples)
    return gray_decode(decode_precoded(symbols) if precoding else symbols)
