"""Pseudo-random binary sequences (ITU-T O.150) and a PRBS checker.

Theory of operation
-------------------
A PRBS of order ``p`` with generator polynomial ``x^p + x^q + 1`` is the output of a
Fibonacci LFSR: every new bit is the XOR of the bits ``p`` and ``q`` positions back,

    b[n] = b[n - p] XOR b[n - q],

and that new feedback bit is also the output. The register is seeded with ``p`` bits of
history (all ones by default). With the O.150 polynomials the sequences are maximal
length (m-sequences), period ``2^p - 1``. ``invert=True`` complements the output, which
is how O.150 specifies its inverted patterns; the register itself runs unchanged.

Vectorised generation. Over GF(2), squaring the characteristic polynomial only spreads
its taps: ``(1 + D^q + D^p)^(2^k) = 1 + D^(q·2^k) + D^(p·2^k)``. Hence every PRBS also
obeys ``b[n] = b[n - p·2^k] XOR b[n - q·2^k]`` for any ``k >= 0``. Once ``p·2^k`` bits are
known, the next ``q·2^k`` bits follow from one XOR of two slices that are already
computed, so the known prefix grows geometrically and ``n`` bits need only
``O(log n)`` numpy operations (one byte per bit, memory-bandwidth bound).

Checking. :class:`PrbsChecker` acquires lock the self-synchronising way: it seeds its
register from ``p`` received bits and accepts that seed only when the following
``sync_bits`` received bits all obey the recurrence. Otherwise it slides forward one
bit and tries again, so the very first ``p`` bits of a clean stream are the seed. After
lock it stops feeding received bits back into the register; it keeps running its own
LFSR from the locked state and compares every received bit with that local reference.
A self-synchronising comparison would count one channel error up to three times (once
directly and once per feedback tap it passes through); against the free-running
reference each channel error counts exactly once. Losing lock (a bit slip, a stream
that stopped being this PRBS) shows up as an error density near one half: if more than
``loss_errors`` errors fall in one ``loss_window_bits`` block of checked bits (blocks
aligned to the lock point), that block's errors are withdrawn and the checker
re-acquires from the block's first bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "POLYNOMIALS",
    "PrbsChecker",
    "PrbsPolynomial",
    "prbs",
    "prbs31",
]


@dataclass(frozen=True, slots=True)
class PrbsPolynomial:
    """Generator polynomial ``x^order + x^tap + 1`` (ITU-T O.150)."""

    order: int
    tap: int

    @property
    def period(self) -> int:
        """Sequence period in bits (maximal length: ``2^order - 1``)."""
        return (1 << self.order) - 1


POLYNOMIALS: MappingProxyType[int, PrbsPolynomial] = MappingProxyType(
    {
        7: PrbsPolynomial(7, 6),
        15: PrbsPolynomial(15, 14),
        23: PrbsPolynomial(23, 18),
        31: PrbsPolynomial(31, 28),
    }
)


def _polynomial(order: int) -> PrbsPolynomial:
    try:
        return POLYNOMIALS[order]
    except KeyError:
        raise ValueError(
            f"PRBS order {order!r} is not supported; choose one of {sorted(POLYNOMIALS)}"
        ) from None


def _seed_history(seed: int, order: int) -> NDArray[np.uint8]:
    if not 0 < seed < (1 << order):
        raise ValueError(
            f"PRBS{order} seed must be a non-zero {order}-bit integer, got {seed!r} "
            "(the all-zero register never leaves zero)"
        )
    shifts = np.arange(order - 1, -1, -1, dtype=np.int64)
    return ((seed >> shifts) & 1).astype(np.uint8)


def _extend(history: NDArray[np.uint8], n_bits: int, poly: PrbsPolynomial) -> NDArray[np.uint8]:
    """The ``n_bits`` that follow ``history`` (the last ``order`` bits, oldest first)."""
    p, q = poly.order, poly.tap
    buf = np.empty(p + n_bits, dtype=np.uint8)
    buf[:p] = history
    known, total = p, p + n_bits
    k = 0
    while known < total:
        while (p << (k + 1)) <= known:
            k += 1
        step = min(q << k, total - known)
        far, near = known - (p << k), known - (q << k)
        np.bitwise_xor(
            buf[far : far + step], buf[near : near + step], out=buf[known : known + step]
        )
        known += step
    return buf[p:]


def prbs(
    order: int, n_bits: int, seed: int | None = None, invert: bool = False
) -> NDArray[np.uint8]:
    """Generate ``n_bits`` of PRBS ``order`` (7, 15, 23 or 31) as an array of 0/1 ``uint8``.

    ``seed`` is the initial register, an ``order``-bit non-zero integer read MSB first as
    the history oldest first: bit ``j`` holds ``b[-1 - j]``. ``None`` means all ones.
    The first output bit is the first new feedback bit. ``invert`` complements the
    output (the O.150 inverted pattern).
    """
    poly = _polynomial(order)
    if n_bits < 0:
        raise ValueError(f"n_bits must be >= 0, got {n_bits}")
    history = _seed_history(poly.period if seed is None else seed, order)
    bits = _extend(history, int(n_bits), poly)
    if invert:
        np.bitwise_xor(bits, 1, out=bits)
    return bits


def prbs31(n_bits: int, seed: int | None = None, invert: bool = False) -> NDArray[np.uint8]:
    """PRBS31 (x^31 + x^28 + 1); see :func:`prbs`."""
    return prbs(31, n_bits, seed=seed, invert=invert)


def _last(head: NDArray[np.uint8], tail: NDArray[np.uint8], count: int) -> NDArray[np.uint8]:
    """The last ``count`` bits of ``head`` followed by ``tail``, without copying the whole."""
    if count == 0:
        return tail[:0].copy()
    if count <= tail.size:
        return tail[-count:].copy()
    return np.concatenate((head[tail.size - count :], tail))


class PrbsChecker:
    """Streaming PRBS checker: acquires lock on received bits, then counts bit errors.

    Feed received bits in chunks of any size with :meth:`feed`; the result does not
    depend on how the stream is chunked. Bits before lock (the ``order`` seed bits, the
    ``sync_bits`` verification bits and anything before a clean seed) are not checked.
    Defaults: ``sync_bits = 2 * order``; lock is lost when more than 64 errors (25 %)
    fall in a 256-bit block, far above any BER a link trains at and far below the 50 %
    a wrong reference gives.
    """

    def __init__(
        self,
        order: int = 31,
        *,
        invert: bool = False,
        sync_bits: int | None = None,
        loss_window_bits: int = 256,
        loss_errors: int = 64,
    ) -> None:
        self._poly = _polynomial(order)
        self.invert = invert
        self.sync_bits = 2 * order if sync_bits is None else sync_bits
        if self.sync_bits < order:
            # A single error in the seed shows up in the verification window only at the
            # far tap, `order` bits later; a shorter window could lock on a corrupted seed.
            raise ValueError(f"sync_bits must be >= order ({order}), got {self.sync_bits}")
        if loss_window_bits < 1 or not 0 <= loss_errors < loss_window_bits:
            raise ValueError(
                "need loss_window_bits >= 1 and 0 <= loss_errors < loss_window_bits, got "
                f"{loss_window_bits} and {loss_errors}"
            )
        self.loss_window_bits = loss_window_bits
        self.loss_errors = loss_errors

        self._locked = False
        self._acq_tail = np.empty(0, dtype=np.uint8)
        self._ref = np.empty(0, dtype=np.uint8)
        self._block_rx = np.empty(0, dtype=np.uint8)
        self._block_errors = 0
        self._bits_received = 0
        self._bits_checked = 0
        self._errors = 0
        self._lock_positions: list[int] = []

    @property
    def order(self) -> int:
        return self._poly.order

    @property
    def locked(self) -> bool:
        return self._locked

    @property
    def bits_received(self) -> int:
        return self._bits_received

    @property
    def bits_checked(self) -> int:
        """Bits compared with the reference while locked."""
        return self._bits_checked

    @property
    def errors(self) -> int:
        """Bit errors among the checked bits."""
        return self._errors

    @property
    def ber(self) -> float:
        """errors / bits_checked; NaN before any bit was checked."""
        return self._errors / self._bits_checked if self._bits_checked else float("nan")

    @property
    def lock_positions(self) -> tuple[int, ...]:
        """Stream index (bits since the first received) of the first checked bit of each lock."""
        return tuple(self._lock_positions)

    def feed(self, bits: ArrayLike) -> int:
        """Consume received bits (0/1); return the errors counted from them."""
        data = np.asarray(bits)
        if data.ndim != 1:
            raise ValueError(f"bits must be one-dimensional, got shape {data.shape}")
        if data.size and (data.min() < 0 or data.max() > 1):
            raise ValueError("bits must be 0 or 1")
        data = data.astype(np.uint8)
        if self.invert:
            np.bitwise_xor(data, 1, out=data)
        errors_before = self._errors
        work, base = data, self._bits_received
        self._bits_received += data.size
        while work.size:
            if self._locked:
                work, base = self._track(work, base)
            else:
                used = self._acquire(work, base)
                work, base = work[used:], base + used
        return self._errors - errors_before

    def _acquire(self, work: NDArray[np.uint8], base: int) -> int:
        """Search for a clean seed; return how many bits of ``work`` were used."""
        p, q, s = self._poly.order, self._poly.tap, self.sync_bits
        acq = np.concatenate((self._acq_tail, work))
        tail = self._acq_tail.size
        if acq.size >= p + s:
            n = acq.size
            mismatch = acq[p:] ^ acq[: n - p] ^ acq[p - q : n - q]
            edges = np.concatenate(([-1], np.flatnonzero(mismatch), [mismatch.size]))
            runs = np.flatnonzero(np.diff(edges) - 1 >= s)
            if runs.size:
                start = int(edges[runs[0]]) + 1
                lock_at = start + p + s
                self._ref = acq[lock_at - p : lock_at].copy()
                self._acq_tail = np.empty(0, dtype=np.uint8)
                self._locked = True
                self._block_rx = np.empty(0, dtype=np.uint8)
                self._block_errors = 0
                self._lock_positions.append(base - tail + lock_at)
                return lock_at - tail
        self._acq_tail = acq[-(p + s - 1) :].copy()
        return work.size

    def _track(self, work: NDArray[np.uint8], base: int) -> tuple[NDArray[np.uint8], int]:
        """Check ``work`` against the reference; return the bits left to re-acquire on."""
        p, w = self._poly.order, self.loss_window_bits
        n = work.size
        filled = self._block_rx.size
        ref = _extend(self._ref, n, self._poly)
        err = work ^ ref
        starts = np.concatenate(([0], np.arange(w - filled, n, w)))
        per_block = np.add.reduceat(err, starts, dtype=np.int64)
        per_block[0] += self._block_errors
        bad = np.flatnonzero(per_block > self.loss_errors)
        if bad.size:
            self._locked = False
            first = int(bad[0])
            if first == 0:
                # The bad block began in an earlier chunk: withdraw what it already counted
                # and re-acquire from its first bit, which _block_rx still holds.
                self._errors -= self._block_errors
                self._bits_checked -= filled
                rest, rest_base = np.concatenate((self._block_rx, work)), base - filled
            else:
                cut = int(starts[first])
                self._errors += int(per_block[:first].sum()) - self._block_errors
                self._bits_checked += cut
                rest, rest_base = work[cut:], base + cut
            self._block_rx = np.empty(0, dtype=np.uint8)
            self._block_errors = 0
            return rest, rest_base
        self._errors += int(err.sum())
        self._bits_checked += n
        self._ref = _last(self._ref, ref, p)
        left = (filled + n) % w
        self._block_rx = _last(self._block_rx, work, left)
        self._block_errors = int(per_block[-1]) if left else 0
        return work[n:], base + n
