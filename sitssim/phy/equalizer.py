"""Tx presets, adaptive Rx FFE/DFE, BER estimation and the Level-3 EQ procedure.

Theory of operation
-------------------
*Tx presets.* The transmitter is a 3-tap FFE [c-1, c0, c+1] normalised to full
swing (|c-1| + c0 + |c+1| = 1), so pre-shoot and de-emphasis lower the
low-frequency amplitude while the channel's noise stays put (see ``channel.py``).
Presets Q0..Q10 are the table of :mod:`sitssim.config.presets`, as coefficient
arrays here (:data:`TX_PRESETS`).

*Rx equaliser.* A linear FFE over the received samples (``ffe_pre`` taps ahead of
the cursor, ``ffe_post`` behind) plus a DFE that subtracts ``n_dfe`` past symbols.
During training the past symbols are the known training symbols (the receiver's
PRBS checker is locked), so DFE error propagation is not modelled. Weights adapt
by normalised LMS: each training block (one training set) is cut into
``updates_per_block`` sub-blocks, and after each sub-block the weights move along
the sub-block's averaged error-times-regressor gradient divided by the regressor
energy. The FFE starts as a pass-through with an AGC gain that brings the
received power to the symbol power. One *iteration* is one training block. How
many iterations LMS needs follows from the eigenvalue spread of the received
signal, i.e. from the channel: a lossier channel is worse conditioned and takes
longer, and nothing in this module knows the channel's loss.

*BER.* Errors are counted on the sliced output against the known symbols
(Gray mapping: adjacent levels differ in one bit). When fewer than
``min_errors`` bit errors occur the count says little, and the BER is estimated
from the eye instead: with RMS error sigma of the equalised output around the
levels -3, -1, +1, +3 (decision distance 1) and Gray coding,
BER = (3/4) * Q(1 / sigma). Each estimate records which method produced it.

*Level-3 EQ* (:func:`level3_eq`) runs both directions of each link as one batch:

* phase 0: preset exchange; both transmitters start at ``initial_preset``.
* phase 1: both receivers adapt (LMS) on training blocks until the per-block BER
  estimate is below ``ber_target`` for ``confirm_blocks`` blocks in a row.
  Every phase's reported BER is then measured with frozen weights over
  ``final_eval_blocks`` blocks, and a phase counts as converged only if that
  measurement is below target too.
* phase 2: the upstream port's receiver searches the downstream port's Tx presets:
  steepest-ascent hill climbing on the preset grid (:data:`PRESET_NEIGHBOURS`,
  presets sharing a pre-shoot or de-emphasis value and adjacent in the other).
  Every candidate is sent and the receiver re-adapts to it from the best weights so
  far until it has re-acquired by phase 1's criterion (the per-block BER below
  target for ``confirm_blocks`` blocks in a row, at most ``max_settle_blocks``
  blocks); it then stops adapting until it is scored by its eye SNR over
  ``eval_blocks`` more. How long a candidate takes is the channel's: a preset change
  disturbs a receiver on a lossy, ill-conditioned channel for longer. The search
  moves while a neighbour beats the best by ``preset_margin_db``.
* phase 3: the same for the upstream port's transmitter, evaluated by the
  downstream port's receiver. A device profile with ``skip_phase3`` (a faulty
  device) leaves it out, and the record says phase 3 did not run.

Preset changes are applied to the transmitted symbols; the sampling phase stays
where the CDR locked on the channel (the FFE absorbs the small shift). Each link
direction's noise and jitter draws are its own, but the links of one call share
one batched computation, so per-link results depend on the batch they ran in
(the same call with the same generator state always gives the same results).
The noiseless part of the received samples comes from ``received.py``: when every
transmitter sends one PRBS from its own phase it is computed once over that
sequence per Tx preset in force, not once per link direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view
from scipy.special import erfc

from sitssim.config.presets import PRESET_NAMES, PRESET_NEIGHBOURS, PRESET_ROWS
from sitssim.phy.channel import (
    PAM4_LEVELS,
    PAM4_SYMBOL_POWER,
    ChannelProfile,
    FloatArray,
    noise_rms,
    pulse_response,
)
from sitssim.phy.pam4 import gray_decode, slice_symbols
from sitssim.phy.received import GroupSums, SymbolSource, symbol_rows

PRESET_TABLE: FloatArray = np.array(
    [[c_pre, 1.0 - abs(c_pre) - abs(c_post), c_post] for _, _, _, c_pre, c_post in PRESET_ROWS]
)
PRESET_TABLE.setflags(write=False)
TX_PRESETS = MappingProxyType(
    {name: tuple(float(c) for c in PRESET_TABLE[i]) for i, name in enumerate(PRESET_NAMES)}
)


def preset_coefficients(name: str) -> FloatArray:
    """[c-1, c0, c+1] of a Tx preset; ValueError for an unknown name."""
    if name not in TX_PRESETS:
        raise ValueError(f"unknown Tx preset {name!r}; known: {', '.join(PRESET_NAMES)}")
    return np.array(TX_PRESETS[name])


def preset_db(coefficients: npt.ArrayLike) -> tuple[float, float]:
    """(pre-shoot dB, de-emphasis dB) of a full-swing 3-tap Tx FFE."""
    c_pre, c0, c_post = (abs(float(c)) for c in np.asarray(coefficients, dtype=float))
    va = c0 - c_post - c_pre
    return (
        20 * math.log10((c0 - c_post + c_pre) / va),
        20 * math.log10(va / (c0 + c_post - c_pre)),
    )


# Bit distance between level indices under pam4's Gray mapping.
_BITS_OF_LEVEL = gray_decode(np.arange(4)).reshape(4, 2)
_BIT_DISTANCE = (_BITS_OF_LEVEL[:, None, :] != _BITS_OF_LEVEL[None, :, :]).sum(axis=2)


def slice_pam4(samples: npt.ArrayLike) -> FloatArray:
    """Nearest PAM4 level (thresholds -2, 0, +2; a sample on a threshold goes up)."""
    return PAM4_LEVELS[slice_symbols(samples)]


def _level_index(levels: npt.ArrayLike) -> npt.NDArray[np.int64]:
    return np.rint((np.asarray(levels, dtype=float) + 3.0) / 2.0).astype(np.int64)


def count_bit_errors(decided: npt.ArrayLike, sent: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Bit errors between decided and sent levels (Gray mapping), summed on the last axis."""
    return _BIT_DISTANCE[_level_index(decided), _level_index(sent)].sum(axis=-1)


def ber_q_function(sigma: npt.ArrayLike) -> FloatArray:
    """Gray-coded PAM4 BER for Gaussian error of RMS ``sigma`` (decision distance 1)."""
    s = np.asarray(sigma, dtype=float)
    with np.errstate(divide="ignore"):
        return 0.75 * 0.5 * erfc(1.0 / (s * math.sqrt(2.0)))


def _errors_and_mse(z: FloatArray, d: FloatArray) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """Bit errors of the decided ``z`` against the sent levels ``d``, and the mean squared
    error, along the last axis of same-shape arrays."""
    lead, n = z.shape[:-1], z.shape[-1]
    z2, d2 = z.reshape(-1, n), d.reshape(-1, n)
    errors, mse = _grouped_errors_and_mse(lambda rows: (z2[rows], d2[rows]), z2.shape[0], n)
    return errors.reshape(lead), mse.reshape(lead)


def _grouped_errors_and_mse(
    rows_of: Callable[[slice], tuple[FloatArray, FloatArray]], count: int, n: int
) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """Bit errors and mean squared error of ``count`` rows of ``n`` samples, handed out
    by ``rows_of(rows)`` as (equalised, sent) arrays of those rows.

    Rows go through in groups whose temporaries stay in cache (a thousand links' blocks
    are hundreds of MB per temporary); each row's figures are computed as on the whole.
    The decision's level index serves directly as the index into the bit distances.
    """
    errors = np.empty(count, dtype=np.int64)
    mse = np.empty(count)
    step = max(1, _ESTIMATE_ELEMENTS // max(n, 1))
    for lo in range(0, count, step):
        zc, dc = rows_of(slice(lo, lo + step))
        errors[lo : lo + step] = _BIT_DISTANCE[slice_symbols(zc), _level_index(dc)].sum(axis=-1)
        mse[lo : lo + step] = np.mean((zc - dc) ** 2, axis=-1)
    return errors, mse


# Samples per row group in ``_errors_and_mse``.
_ESTIMATE_ELEMENTS = 1 << 16


@dataclass(frozen=True)
class BerEstimate:
    """BER of one or more links (arrays over the batch), with the method used per link.

    ``mse`` is the mean squared error of the equalised samples, the eye SNR's basis.
    """

    ber: FloatArray
    method: npt.NDArray[np.str_]
    bit_errors: npt.NDArray[np.int64]
    bits: int
    eye_snr_db: FloatArray
    mse: FloatArray


def estimate_ber(
    equalized: npt.ArrayLike, sent: npt.ArrayLike, min_errors: int = 20
) -> BerEstimate:
    """BER of equalised samples against the sent levels, along the last axis.

    Counted when at least ``min_errors`` bit errors occurred, otherwise from the
    eye SNR with the PAM4 Q-function formula.
    """
    z, d = np.broadcast_arrays(np.asarray(equalized, dtype=float), np.asarray(sent, dtype=float))
    errors, mse = _errors_and_mse(z, d)
    return _estimate(errors, mse, 2 * z.shape[-1], min_errors)


def estimate_ber_of_blocks(
    equalized: list[FloatArray], sent: list[FloatArray], min_errors: int = 20
) -> BerEstimate:
    """:func:`estimate_ber` of 2-D blocks joined along the last axis, without joining them
    (at a thousand links the joined blocks are tens of MB)."""
    n = sum(b.shape[1] for b in equalized)

    def rows_of(rows: slice) -> tuple[FloatArray, FloatArray]:
        if len(equalized) == 1:
            return equalized[0][rows], sent[0][rows]
        return (
            np.concatenate([b[rows] for b in equalized], axis=1),
            np.concatenate([b[rows] for b in sent], axis=1),
        )

    errors, mse = _grouped_errors_and_mse(rows_of, equalized[0].shape[0], n)
    return _estimate(errors, mse, 2 * n, min_errors)


def _estimate(
    errors: npt.NDArray[np.int64], mse: FloatArray, bits: int, min_errors: int
) -> BerEstimate:
    counted = errors >= min_errors
    ber = np.where(counted, errors / bits, ber_q_function(np.sqrt(mse)))
    with np.errstate(divide="ignore"):
        snr = 10 * np.log10(PAM4_SYMBOL_POWER / mse)
    return BerEstimate(
        ber=np.asarray(ber, dtype=float),
        method=np.where(counted, "counted", "q_function"),
        bit_errors=errors,
        bits=bits,
        eye_snr_db=np.asarray(snr, dtype=float),
        mse=mse,
    )


def random_pam4(rng: np.random.Generator, shape: tuple[int, ...]) -> FloatArray:
    """Uniform random PAM4 levels (statistically what a PRBS31 training stream is)."""
    return PAM4_LEVELS[rng.integers(0, 4, shape)]


@dataclass(frozen=True)
class EqProfile:
    """Equalisation parameters a device implements (defaults follow the spec).

    Attributes:
        ber_target: receiver BER every EQ phase must reach.
        block_symbols: symbols per training block = per LMS iteration.
        initial_preset: Tx preset both ports start from (phase 0).
        ffe_pre, ffe_post: Rx FFE taps ahead of / behind the cursor.
        n_dfe: Rx DFE taps.
        mu: normalised LMS step size (0 < mu < 2).
        updates_per_block: LMS weight updates per training block.
        max_phase1_blocks: phase 1 gives up after this many blocks.
        confirm_blocks: consecutive blocks below target that end phase 1.
        max_settle_blocks: per preset candidate, the most blocks the receiver
            re-adapts before it is scored, re-acquired or not (PCIe gives a request
            under 2 ms; 64 blocks at the default costs is about 130 µs).
        eval_blocks: per preset candidate, blocks to score the eye on.
        final_eval_blocks: blocks (weights frozen) for each phase's final BER.
        preset_margin_db: eye-SNR gain a candidate needs to replace the best.
        min_errors: bit errors needed for a counted BER.
        skip_phase3: faulty device that never runs phase 3.
    """

    ber_target: float = 1e-4
    block_symbols: int = 512
    initial_preset: str = "Q4"
    ffe_pre: int = 2
    ffe_post: int = 4
    n_dfe: int = 8
    mu: float = 1.0
    updates_per_block: int = 16
    max_phase1_blocks: int = 512
    confirm_blocks: int = 2
    max_settle_blocks: int = 64
    eval_blocks: int = 2
    final_eval_blocks: int = 8
    preset_margin_db: float = 0.2
    min_errors: int = 20
    skip_phase3: bool = False

    def __post_init__(self) -> None:
        preset_coefficients(self.initial_preset)
        if not 0 < self.ber_target < 1:
            raise ValueError(f"ber_target must be in (0, 1), got {self.ber_target}")
        if not 0 < self.mu < 2:
            raise ValueError(f"mu must be in (0, 2), got {self.mu}")
        if self.block_symbols % self.updates_per_block:
            raise ValueError("block_symbols must be a multiple of updates_per_block")
        counts = (
            self.block_symbols,
            self.updates_per_block,
            self.max_phase1_blocks,
            self.confirm_blocks,
            self.max_settle_blocks,
            self.eval_blocks,
            self.final_eval_blocks,
            self.min_errors,
        )
        if min(counts) < 1 or min(self.ffe_pre, self.ffe_post, self.n_dfe) < 0:
            raise ValueError("EqProfile counts must be >= 1 and tap counts >= 0")


# Link directions per group in ``_TrainingStream.prefetch`` (a few MB of intermediates).
_ROWS_PER_GROUP = 32


class _TrainingStream:
    """Continuous training signal of a batch of link directions, block by block.

    ``prefetch`` draws the jitter and noise of the samples ahead of the receiver in
    chunks, with the Tx FFE in force; a preset change discards the drawn samples the
    receiver has not seen yet, so each sample the receiver uses is drawn once. A
    sample's value is computed from its draws when a block reads it: samples drawn
    and then discarded cost their draws only, and no chunk-sized array of samples is
    built (at a thousand links that is tens of MB, mostly page faults, per chunk).
    """

    def __init__(
        self,
        profile: ChannelProfile,
        phase_ui: FloatArray,
        rng: np.random.Generator,
        eq: EqProfile,
        source: SymbolSource,
    ) -> None:
        pulse = pulse_response(profile)
        self.batch = phase_ui.size
        self._taps = np.stack([pulse.cursors(phase_ui), pulse.slope_cursors(phase_ui)], axis=-1)
        self._pre, self._post = profile.n_pre, profile.n_post
        self._rj = profile.rj_rms_ui
        self._sigma = noise_rms(profile)
        self._rng = rng
        self._symbols = symbol_rows(source, self.batch, self._taps, self._pre, self._post)
        self._ahead, self._behind, self._n_dfe = eq.ffe_pre, eq.ffe_post, eq.n_dfe
        self.pos = self._behind + self._post + 1 + self._n_dfe
        # Samples before the chunk that a block may still read, computed: positions
        # _tail0.. _lo; the drawn chunk: positions _lo.. _hi, from its draws and sums.
        self._tail0 = self._lo = self._hi = self.pos - self._behind
        self._tail = np.zeros((self.batch, 0))
        self._sums: GroupSums | None = None
        self._jitter: FloatArray | None = None
        self._noise: FloatArray | None = None
        self._draws = [np.empty(0), np.empty(0)]

    def prefetch(self, n: int, tx_ffe: FloatArray) -> None:
        """Draw the received samples for the next ``n`` symbols."""
        end = self.pos + n + self._ahead
        start = self._hi
        if end <= start:
            return
        # What a block may still read of the old chunk is computed before its draws go.
        keep = self.pos - self._behind
        self._tail = self._samples(keep, start)
        self._tail0 = keep
        self._symbols.extend(end + self._pre + 1)
        self._sums = self._symbols.sums(start - self._post - 1, end + self._pre + 1, tx_ffe)
        width = end - start
        # Jitter, then noise: standard normals in the order Generator.normal(0, s) would
        # draw them, scaled as it scales them (s * z), into buffers kept between calls:
        # at a thousand links a fresh array per draw costs more in page faults than the draw.
        self._jitter = self._standard_normals(0, width) if self._rj > 0 else None
        self._noise = self._standard_normals(1, width) if self._sigma > 0 else None
        self._lo, self._hi = start, end

    def _samples(self, a: int, b: int) -> FloatArray:
        """Received samples at positions ``a..b-1`` (from the tail and the chunk)."""
        out = np.empty((self.batch, b - a))
        split = min(max(self._lo, a), b)
        if split > a:
            out[:, : split - a] = self._tail[:, a - self._tail0 : split - self._tail0]
        if b > split:
            self._chunk_samples(split, b, out[:, split - a :])
        return out

    def _chunk_samples(self, a: int, b: int, out: FloatArray) -> None:
        """Samples at positions ``a..b-1`` of the drawn chunk into ``out``."""
        assert self._sums is not None
        lo, hi = a - self._lo, b - self._lo
        # Rows in groups small enough for their intermediates to stay in cache: the same
        # element-wise arithmetic as on the whole batch at once, several times faster.
        for r in range(0, self.batch, _ROWS_PER_GROUP):
            rows = slice(r, r + _ROWS_PER_GROUP)
            cursor, slope = self._sums(rows, lo, hi)
            # cursor + (rj * jitter) * slope + sigma * noise, in place where it can be.
            part = cursor
            if self._jitter is not None:
                part = self._rj * self._jitter[rows, lo:hi]
                part *= slope
                part += cursor
            if self._noise is not None:
                np.add(part, self._sigma * self._noise[rows, lo:hi], out=out[rows])
            else:
                out[rows] = part

    def _standard_normals(self, slot: int, width: int) -> FloatArray:
        """``(batch, width)`` fresh standard normal draws in the reused buffer ``slot``."""
        size = self.batch * width
        if self._draws[slot].size < size:
            self._draws[slot] = np.empty(size)
        out = self._draws[slot][:size].reshape(self.batch, width)
        self._rng.standard_normal(out=out)
        return out

    def discard_ahead(self) -> None:
        """Forget received samples the receiver has not used (the Tx FFE changes)."""
        last = self.pos + self._ahead
        if last < self._lo:
            self._tail = self._tail[:, : last - self._tail0]
            self._lo = last
        self._hi = min(self._hi, last)

    def block(self, n: int, tx_ffe: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Next ``n`` symbols: (received window, sent symbols, past symbols).

        The received window has ``n + ffe_pre + ffe_post`` samples, the past
        symbols ``n + n_dfe - 1`` (oldest first).
        """
        s = self.pos
        self.prefetch(n, tx_ffe)
        y = self._samples(s - self._behind, s + n + self._ahead)
        # The past symbols are the sent ones shifted by the DFE's span: one read for both.
        symbols = self._symbols.rows(s - self._n_dfe, s + n)
        past, sent = symbols[:, : n + self._n_dfe - 1], symbols[:, self._n_dfe :]
        self.pos = s + n
        self._trim()
        return y, sent, past

    def _trim(self) -> None:
        self._symbols.trim(self.pos - self._post - 1 - self._n_dfe - self._behind)
        keep = self.pos - self._behind
        if keep > self._tail0:
            self._tail = self._tail[:, max(0, min(keep, self._lo) - self._tail0) :]
            self._tail0 = min(keep, self._lo)


class _AdaptiveReceiver:
    """Batched FFE + DFE with block-normalised LMS.

    The weights are one vector per link: FFE taps (oldest sample first) followed
    by the negated DFE taps (most recent symbol first), so that the output is a
    single dot product with the regressor [received window, past symbols].
    """

    def __init__(self, batch: int, eq: EqProfile) -> None:
        self.eq = eq
        self.n_ffe = eq.ffe_pre + 1 + eq.ffe_post
        self.weights = np.zeros((batch, self.n_ffe + eq.n_dfe))
        self._started = False

    def snapshot(self) -> FloatArray:
        return self.weights.copy()

    def ffe_taps(self) -> FloatArray:
        """FFE as c[-ffe_pre..ffe_post] of z[n] = sum_k c[k] y[n - k] (``with_ffe`` order)."""
        return self.weights[:, self.n_ffe - 1 :: -1].copy()

    def dfe_taps(self) -> FloatArray:
        """DFE taps b[1..n_dfe]: the output subtracts sum_j b[j] d[n - j]."""
        return -self.weights[:, self.n_ffe :]

    def restore(self, weights: FloatArray, mask: npt.NDArray[np.bool_]) -> None:
        self.weights[mask] = weights[mask]

    def run(
        self,
        y: FloatArray,
        sent: FloatArray,
        past: FloatArray,
        adapt: npt.NDArray[np.bool_] | None,
    ) -> FloatArray:
        """Equalise one block; adapt the weights of the links in ``adapt`` (None = freeze).

        Returns the equaliser output for each symbol, computed with the weights
        in force before that symbol's sub-block update (a-priori output).
        """
        if not self._started:
            # AGC: scale the received power to the symbol power before LMS starts.
            self.weights[:, self.eq.ffe_post] = np.sqrt(PAM4_SYMBOL_POWER / np.mean(y**2, axis=1))
            self._started = True
        # The regressor [received window, past symbols] is never built: the FFE and DFE
        # parts are strided views, so each sub-block reads only what it needs.
        parts_views = [(sliding_window_view(y, self.n_ffe, axis=1), self.weights[:, : self.n_ffe])]
        if self.eq.n_dfe:
            parts_views.append(
                (
                    sliding_window_view(past, self.eq.n_dfe, axis=1)[..., ::-1],
                    self.weights[:, self.n_ffe :],
                )
            )

        def output(lo: int, hi: int) -> FloatArray:
            return sum(np.matmul(u[:, lo:hi], w[:, :, None])[..., 0] for u, w in parts_views)

        batch, n = sent.shape
        if adapt is None:
            return output(0, n)
        parts = self.eq.updates_per_block
        step = n // parts
        energy = _window_energy(y, self.n_ffe) + (
            _window_energy(past, self.eq.n_dfe) if self.eq.n_dfe else 0.0
        )
        gain = self.eq.mu * adapt[:, None] / energy.reshape(batch, parts, step).sum(axis=2)
        out = np.empty_like(sent)
        for k in range(parts):
            lo, hi = k * step, (k + 1) * step
            z = output(lo, hi)
            out[:, lo:hi] = z
            e = (sent[:, lo:hi] - z)[:, None, :]
            for u, w in parts_views:
                w += gain[:, k, None] * np.matmul(e, u[:, lo:hi])[:, 0]
        return out


def _window_energy(x: FloatArray, width: int) -> FloatArray:
    """Sum of squares over each ``width``-sample window along the last axis.

    A window's sum is the running sum at its end less the one before its start (the
    first window: the running sum itself), computed in place on the squares.
    """
    csum = np.square(x)
    np.cumsum(csum, axis=-1, out=csum)
    out = np.empty((*x.shape[:-1], x.shape[-1] - width + 1))
    out[..., 0] = csum[..., width - 1]
    np.subtract(csum[..., width:], csum[..., :-width], out=out[..., 1:])
    return out


@dataclass(frozen=True)
class LmsTraining:
    """Outcome of LMS training (arrays over the batch of link directions).

    ``iterations`` counts training blocks (sets) until the per-block BER
    estimate stayed below target for ``confirm_blocks`` blocks (the cap if never).
    ``rx_ffe`` (``ffe_pre`` taps ahead of the cursor, ``PulseResponse.with_ffe``
    order) and ``rx_dfe`` are the adapted weights.
    """

    iterations: npt.NDArray[np.int64]
    converged: npt.NDArray[np.bool_]
    ber: BerEstimate
    mse_per_block: FloatArray
    rx_ffe: FloatArray
    rx_dfe: FloatArray


_PREFETCH_BLOCKS = 8


class _Session:
    """Signal-level state of one Level-3 EQ run: stream, receiver, Tx presets."""

    def __init__(
        self,
        profile: ChannelProfile,
        phase_ui: FloatArray,
        rng: np.random.Generator,
        eq: EqProfile,
        source: SymbolSource,
    ) -> None:
        self.eq = eq
        self.stream = _TrainingStream(profile, phase_ui, rng, eq, source)
        self.rx = _AdaptiveReceiver(self.stream.batch, eq)
        self._preset = np.full(self.stream.batch, PRESET_NAMES.index(eq.initial_preset))

    @property
    def preset(self) -> npt.NDArray[np.int64]:
        """Index into PRESET_NAMES of each direction's Tx preset."""
        return self._preset

    @preset.setter
    def preset(self, value: npt.ArrayLike) -> None:
        value = np.asarray(value, dtype=np.int64)
        if not np.array_equal(value, self._preset):
            self.stream.discard_ahead()
        self._preset = value.copy()

    def blocks(
        self, count: int, adapt: npt.NDArray[np.bool_] | None
    ) -> tuple[FloatArray, FloatArray]:
        """Run ``count`` blocks; return (equalised output, sent symbols), concatenated."""
        outs, sents = self._run_blocks(count, adapt)
        if count == 1:
            # No copy of a lone block (tens of MB at a thousand links, once per LMS block).
            return outs[0], sents[0]
        return np.concatenate(outs, axis=1), np.concatenate(sents, axis=1)

    def estimate(self, count: int, adapt: npt.NDArray[np.bool_] | None) -> BerEstimate:
        """Run ``count`` blocks; the BER estimate of their output (as of ``blocks``)."""
        return estimate_ber_of_blocks(*self._run_blocks(count, adapt), self.eq.min_errors)

    def _run_blocks(
        self, count: int, adapt: npt.NDArray[np.bool_] | None
    ) -> tuple[list[FloatArray], list[FloatArray]]:
        outs, sents = [], []
        tx = PRESET_TABLE[self._preset]
        self.stream.prefetch(count * self.eq.block_symbols, tx)
        for _ in range(count):
            y, sent, past = self.stream.block(self.eq.block_symbols, tx)
            outs.append(self.rx.run(y, sent, past, adapt))
            sents.append(sent)
        return outs, sents

    def final_blocks(self) -> tuple[list[FloatArray], list[FloatArray]]:
        """``final_eval_blocks`` blocks with frozen weights: (equalised output, sent levels),
        one array per block."""
        return self._run_blocks(self.eq.final_eval_blocks, None)

    def final_ber(self) -> BerEstimate:
        """The BER of ``final_eval_blocks`` blocks with frozen weights."""
        return self.estimate(self.eq.final_eval_blocks, None)

    def _until_below_target(
        self, adapt: npt.NDArray[np.bool_], cap: int, keep_adapting: bool
    ) -> tuple[npt.NDArray[np.int64], list[FloatArray]]:
        """Run adapting blocks until every row of ``adapt`` has had its per-block BER below
        target for ``confirm_blocks`` blocks in a row, ``cap`` blocks at most.

        Returns the block at which each row got there (-1: not within ``cap``, or not in
        ``adapt``) and each block's MSE. A row that got there stops adapting, unless
        ``keep_adapting`` (phase 1: the batch's receivers adapt on until the last is done).
        """
        eq = self.eq
        pending, adapting = adapt.copy(), adapt.copy()
        run = np.zeros(self.stream.batch, dtype=np.int64)
        done_at = np.full(self.stream.batch, -1, dtype=np.int64)
        mse_log = []
        tx = PRESET_TABLE[self._preset]
        for k in range(1, cap + 1):
            if k % _PREFETCH_BLOCKS == 1:
                ahead = min(_PREFETCH_BLOCKS, cap + 1 - k)
                self.stream.prefetch(ahead * eq.block_symbols, tx)
            est = self.estimate(1, adapting)
            mse_log.append(est.mse)
            run = np.where(est.ber < eq.ber_target, run + 1, 0)
            newly = pending & (run >= eq.confirm_blocks)
            done_at[newly] = k
            pending &= ~newly
            if not keep_adapting:
                adapting &= ~newly
            if not pending.any():
                break
        self.stream.discard_ahead()
        return done_at, mse_log

    def train(self) -> LmsTraining:
        eq = self.eq
        every = np.ones(self.stream.batch, dtype=bool)
        done_at, mse_log = self._until_below_target(every, eq.max_phase1_blocks, True)
        converged = done_at >= 0
        iterations = np.where(converged, done_at, eq.max_phase1_blocks)
        return LmsTraining(
            iterations=iterations,
            converged=converged,
            ber=self.final_ber(),
            mse_per_block=np.array(mse_log).T,
            rx_ffe=self.rx.ffe_taps(),
            rx_dfe=self.rx.dfe_taps(),
        )

    def search_presets(self, searching: npt.NDArray[np.bool_]) -> _SearchOutcome:
        """Hill-climb the Tx presets of the directions in ``searching``."""
        eq = self.eq
        batch = self.stream.batch
        iterations = np.zeros(batch, dtype=np.int64)
        tried: list[list[int]] = [[] for _ in range(batch)]
        best = self.preset.copy()
        best_weights = self.rx.snapshot()
        best_snr = np.full(batch, -np.inf)

        def evaluate(candidate: npt.NDArray[np.int64], mask: npt.NDArray[np.bool_]) -> FloatArray:
            self.preset = np.where(mask, candidate, best)
            self.rx.restore(best_weights, mask)
            done_at, _ = self._until_below_target(mask, eq.max_settle_blocks, False)
            settled = np.where(done_at > 0, done_at, eq.max_settle_blocks)
            snr = self.estimate(eq.eval_blocks, mask).eye_snr_db
            iterations[mask] += settled[mask] + eq.eval_blocks
            for b in np.nonzero(mask)[0]:
                tried[b].append(int(candidate[b]))
            return snr

        snr = evaluate(best, searching)
        best_snr[searching] = snr[searching]
        best_weights = self.rx.snapshot()
        active = searching.copy()
        while np.any(active):
            options = [
                [
                    PRESET_NAMES.index(n)
                    for n in PRESET_NEIGHBOURS[PRESET_NAMES[best[b]]]
                    if PRESET_NAMES.index(n) not in tried[b]
                ]
                if active[b]
                else []
                for b in range(batch)
            ]
            width = max(len(o) for o in options)
            round_snr = np.full(batch, -np.inf)
            round_preset = best.copy()
            round_weights = self.rx.snapshot()
            for slot in range(width):
                mask = np.array([len(o) > slot for o in options])
                candidate = np.array([o[slot] if len(o) > slot else 0 for o in options])
                snr = evaluate(candidate, mask)
                better = mask & (snr > round_snr)
                round_snr[better] = snr[better]
                round_preset[better] = candidate[better]
                round_weights[better] = self.rx.weights[better]
            move = active & (round_snr > best_snr + eq.preset_margin_db)
            best[move] = round_preset[move]
            best_snr[move] = round_snr[move]
            best_weights[move] = round_weights[move]
            active = move
        self.preset = np.where(searching, best, self.preset)
        self.rx.restore(best_weights, searching)
        return _SearchOutcome(iterations=iterations, tried=tried)


@dataclass(frozen=True)
class _SearchOutcome:
    iterations: npt.NDArray[np.int64]
    tried: list[list[int]]


def _phase_offsets(phase_ui: npt.ArrayLike | None, batch: int, n_links: int) -> FloatArray:
    if phase_ui is None:
        return np.zeros(batch)
    phase = np.broadcast_to(np.asarray(phase_ui, dtype=float), (n_links,))
    return np.tile(phase, batch // n_links)


def _fixed_preset_session(
    channel: ChannelProfile,
    rng: np.random.Generator,
    n_links: int,
    tx_preset: str,
    eq: EqProfile | None,
    phase_ui: npt.ArrayLike | None,
    symbol_source: SymbolSource | None,
) -> _Session:
    eq = EqProfile(initial_preset=tx_preset) if eq is None else eq
    source = symbol_source or (lambda shape: random_pam4(rng, shape))
    session = _Session(channel, _phase_offsets(phase_ui, n_links, n_links), rng, eq, source)
    session.preset = np.full(n_links, PRESET_NAMES.index(tx_preset))
    return session


def train_rx_equalizer(
    channel: ChannelProfile,
    rng: np.random.Generator,
    n_links: int = 1,
    tx_preset: str = "Q4",
    eq: EqProfile | None = None,
    phase_ui: npt.ArrayLike | None = None,
    symbol_source: SymbolSource | None = None,
) -> LmsTraining:
    """Phase-1-style LMS training of ``n_links`` receivers behind one channel profile.

    Args:
        channel: the channel every link in the batch shares.
        rng: noise, jitter and (by default) training-symbol draws.
        n_links: batch size; each link has its own noise and jitter.
        tx_preset: the partner's Tx preset during training.
        eq: receiver and procedure parameters (``initial_preset`` is ignored).
        phase_ui: per-link sampling-phase offset from the lock point (UI).
        symbol_source: (batch, n) -> PAM4 levels; default uniform random levels.
    """
    session = _fixed_preset_session(channel, rng, n_links, tx_preset, eq, phase_ui, symbol_source)
    return session.train()


def equalize(
    channel: ChannelProfile,
    rng: np.random.Generator,
    n_symbols: int,
    n_links: int = 1,
    tx_preset: str = "Q4",
    eq: EqProfile | None = None,
    phase_ui: npt.ArrayLike | None = None,
    symbol_source: SymbolSource | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Train (as ``train_rx_equalizer``), then equalise >= ``n_symbols`` with frozen weights.

    Returns (equaliser output, sent levels), each of shape (n_links, whole blocks);
    ``estimate_ber(*equalize(...))`` is the post-EQ BER.
    """
    session = _fixed_preset_session(channel, rng, n_links, tx_preset, eq, phase_ui, symbol_source)
    session.train()
    return session.blocks(max(1, math.ceil(n_symbols / session.eq.block_symbols)), None)


@dataclass(frozen=True)
class EqPhaseResult:
    """One EQ phase of one link, as the ``eq`` table records it.

    ``iterations`` counts LMS training blocks (sets); ``presets_tried`` lists
    the Tx presets sent and evaluated in order; ``ber`` / ``method`` are the
    receiver's measured BER at the phase's end (worst direction in phase 1).
    """

    phase: int
    ran: bool
    iterations: int
    presets_tried: tuple[str, ...]
    preset: str | None
    ber: float | None
    method: str | None
    converged: bool


@dataclass(frozen=True)
class EqRecord:
    """Level-3 EQ of one link: phases 0-3 and the final per-direction BER.

    Direction 0 is downstream port Tx -> upstream port Rx (tuned in phase 2),
    direction 1 the reverse (tuned in phase 3).
    """

    phases: tuple[EqPhaseResult, EqPhaseResult, EqPhaseResult, EqPhaseResult]
    tx_presets: tuple[str, str]
    final_ber: tuple[float, float]
    ber_target: float

    @property
    def completed(self) -> bool:
        """All four phases ran and each ended below the BER target."""
        return all(p.ran and p.converged for p in self.phases)

    @property
    def total_iterations(self) -> int:
        return sum(p.iterations for p in self.phases)

    @property
    def presets_tried(self) -> int:
        return sum(len(p.presets_tried) for p in self.phases)


@dataclass(frozen=True)
class Level3Outcome:
    """Level-3 EQ of a batch of links plus what the receivers saw after it.

    ``final_output`` / ``final_sent`` (shape ``(2 * n_links, final_eval_blocks *
    block_symbols)``, direction 0 of every link first, then direction 1) are the
    equalised samples and sent levels of the final evaluation blocks, sent after
    phase 3 with the tuned presets and frozen weights: what a receiver's checker
    can verify. ``output_blocks`` / ``sent_blocks`` are the same, one array per block.
    """

    records: list[EqRecord]
    output_blocks: tuple[FloatArray, ...]
    sent_blocks: tuple[FloatArray, ...]

    # Joined on first use only: at a thousand links each is tens of MB of fresh pages.
    @cached_property
    def final_output(self) -> FloatArray:
        return np.concatenate(self.output_blocks, axis=1)

    @cached_property
    def final_sent(self) -> FloatArray:
        return np.concatenate(self.sent_blocks, axis=1)


def level3_eq(
    channel: ChannelProfile,
    rng: np.random.Generator,
    n_links: int = 1,
    eq: EqProfile | None = None,
    phase_ui: npt.ArrayLike | None = None,
    symbol_source: SymbolSource | None = None,
) -> list[EqRecord]:
    """Level-3 equalisation (phases 0-3) of ``n_links`` links sharing one channel profile.

    Both directions of every link use ``channel`` with independent noise and
    jitter; ``phase_ui`` (scalar or per link) is the CDR's sampling-phase offset.
    ``symbol_source`` maps (batch, n) to PAM4 training levels (default uniform
    random levels from ``rng``). Returns one record per link.
    """
    return level3_eq_detail(channel, rng, n_links, eq, phase_ui, symbol_source).records


def level3_eq_detail(
    channel: ChannelProfile,
    rng: np.random.Generator,
    n_links: int = 1,
    eq: EqProfile | None = None,
    phase_ui: npt.ArrayLike | None = None,
    symbol_source: SymbolSource | None = None,
) -> Level3Outcome:
    """As :func:`level3_eq`, keeping the final evaluation blocks (see :class:`Level3Outcome`)."""
    eq = EqProfile() if eq is None else eq
    source = symbol_source or (lambda shape: random_pam4(rng, shape))
    batch = 2 * n_links
    session = _Session(channel, _phase_offsets(phase_ui, batch, n_links), rng, eq, source)

    training = session.train()
    searching = np.zeros(batch, dtype=bool)
    searching[:n_links] = True
    if not eq.skip_phase3:
        searching[n_links:] = True
    search = session.search_presets(searching)
    output_blocks, sent_blocks = session.final_blocks()
    final = estimate_ber_of_blocks(output_blocks, sent_blocks, eq.min_errors)

    records = []
    for i in range(n_links):
        directions = (i, n_links + i)
        worst = max(directions, key=lambda b: training.ber.ber[b])
        phase0 = EqPhaseResult(
            phase=0,
            ran=True,
            iterations=0,
            presets_tried=(),
            preset=eq.initial_preset,
            ber=None,
            method=None,
            converged=True,
        )
        phase1 = EqPhaseResult(
            phase=1,
            ran=True,
            iterations=int(max(training.iterations[b] for b in directions)),
            presets_tried=(),
            preset=eq.initial_preset,
            ber=float(training.ber.ber[worst]),
            method=str(training.ber.method[worst]),
            converged=bool(
                all(training.converged[b] for b in directions)
                and training.ber.ber[worst] < eq.ber_target
            ),
        )
        tuned = []
        for phase, b in ((2, directions[0]), (3, directions[1])):
            if not searching[b]:
                tuned.append(
                    EqPhaseResult(
                        phase=phase,
                        ran=False,
                        iterations=0,
                        presets_tried=(),
                        preset=None,
                        ber=None,
                        method=None,
                        converged=False,
                    )
                )
                continue
            tuned.append(
                EqPhaseResult(
                    phase=phase,
                    ran=True,
                    iterations=int(search.iterations[b]),
                    presets_tried=tuple(PRESET_NAMES[p] for p in search.tried[b]),
                    preset=PRESET_NAMES[session.preset[b]],
                    ber=float(final.ber[b]),
                    method=str(final.method[b]),
                    converged=bool(final.ber[b] < eq.ber_target),
                )
            )
        records.append(
            EqRecord(
                phases=(phase0, phase1, tuned[0], tuned[1]),
                tx_presets=(
                    PRESET_NAMES[session.preset[i]],
                    PRESET_NAMES[session.preset[n_links + i]],
                ),
                final_ber=(float(final.ber[i]), float(final.ber[n_links + i])),
                ber_target=eq.ber_target,
            )
        )
    return Level3Outcome(
        records=records, output_blocks=tuple(output_blocks), sent_blocks=tuple(sent_blocks)
    )
