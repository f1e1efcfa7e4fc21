"""PAM4 channel: pulse response from insertion loss, ISI, noise and random jitter.

Theory of operation
-------------------
A link direction is a linear channel sampled once per UI (31.25 ps at 32 GBd).

*Loss model.* The channel's magnitude response has an attenuation (in dB) that
mixes a skin-effect term growing with sqrt(f) and a dielectric term growing with
f, scaled so that the attenuation at the Nyquist frequency (16 GHz) equals the
profile's insertion loss::

    A(f) = loss_db * ((1 - beta) * sqrt(f / f_N) + beta * f / f_N),   |H(0)| = 1

``beta`` is the profile's ``dielectric_fraction``. The phase is the minimum
phase belonging to that magnitude (real-cepstrum folding), so the impulse
response is causal, as a passive channel's is. The impulse response is built on
a grid of ``OVERSAMPLE`` samples per UI over ``SPAN_UI`` UI and convolved with
a 1-UI rectangle (the NRZ-held PAM4 symbol) to give the continuous-time pulse
response p(t). Because the rectangles of consecutive UIs tile the time axis,
the 1-UI-spaced samples of p sum to the DC gain (1) at any sampling phase.

*Sampling point.* A bang-bang (Alexander) CDR settles where a symmetric
transition crosses zero half a UI from the data sample, i.e. where
p(t + UI/2) = p(t - UI/2); that instant is the pulse's lock point and the
origin of all phases in this package (see ``cdr.py``). The main cursor is p at
the lock point; pre- and post-cursors are p one UI earlier or later. The
profile's ``n_pre`` / ``n_post`` bound the modelled ISI: the slow skin-effect
tail beyond ``n_post`` UI is what AC coupling and baseline-wander correction
remove in a real receiver, and it is not modelled. More loss spreads the pulse:
the main cursor shrinks and the cursor ratios grow.

*Noise.* Additive white Gaussian noise whose power is set once per channel from
the SNR and the received signal power *without* Tx equalisation,
5 * sum(h_k^2) (5 = mean power of the levels -3, -1, +1, +3). Tx presets reshape
the signal but not the noise, so de-emphasis trades ISI against SNR as it does
on a real link. ``snr_db = inf`` gives a noiseless channel.

*Random jitter.* The sampling instant of each symbol is displaced by a Gaussian
delta (RMS ``rj_rms_ui``); to first order the sample changes by delta times the
waveform's slope there, and the slope is the same ISI sum taken over the pulse
derivative p'(t). The CDR (``cdr.py``) instead samples the interpolated
waveform at the jittered instants directly.

Everything is vectorised: ``transmit`` takes one sequence or a batch (leading
axis = links, each with its own sampling-phase offset, Tx FFE and noise draws).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from sitssim.phy.pam4 import LEVELS

PAM4_LEVELS = LEVELS.astype(np.float64)
PAM4_LEVELS.setflags(write=False)
PAM4_SYMBOL_POWER = float(np.mean(PAM4_LEVELS**2))
OVERSAMPLE = 32
SPAN_UI = 512

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ChannelProfile:
    """Signal-level description of one link direction.

    Attributes:
        loss_db: insertion loss at the Nyquist frequency (16 GHz), dB, >= 0.
        snr_db: SNR at the receiver input, dB, relative to the received signal
            power without Tx equalisation; ``math.inf`` for no noise.
        rj_rms_ui: random jitter of the sampling instant, RMS, UI.
        n_pre: pre-cursor taps of the modelled channel.
        n_post: post-cursor taps of the modelled channel.
        dielectric_fraction: share of the Nyquist loss that grows linearly with
            frequency; the rest grows as sqrt(f) (skin effect).
    """

    loss_db: float
    snr_db: float
    rj_rms_ui: float = 0.0
    n_pre: int = 2
    n_post: int = 12
    dielectric_fraction: float = 0.75

    def __post_init__(self) -> None:
        if not (math.isfinite(self.loss_db) and self.loss_db >= 0):
            raise ValueError(f"loss_db must be a finite number >= 0, got {self.loss_db}")
        if math.isnan(self.snr_db) or self.snr_db == -math.inf:
            raise ValueError(f"snr_db must be a number or +inf, got {self.snr_db}")
        if not (math.isfinite(self.rj_rms_ui) and 0 <= self.rj_rms_ui < 0.5):
            raise ValueError(f"rj_rms_ui must be in [0, 0.5) UI, got {self.rj_rms_ui}")
        if not 0 <= self.n_pre <= 8:
            raise ValueError(f"n_pre must be in 0..8, got {self.n_pre}")
        if not 1 <= self.n_post <= SPAN_UI // 2:
            raise ValueError(f"n_post must be in 1..{SPAN_UI // 2}, got {self.n_post}")
        if not 0 <= self.dielectric_fraction <= 1:
            raise ValueError(
                f"dielectric_fraction must be in [0, 1], got {self.dielectric_fraction}"
            )


@dataclass(frozen=True, eq=False)
class PulseResponse:
    """Continuous-time single-symbol response, sampled ``os`` times per UI.

    ``waveform[i]`` is p(t) at t = i / os UI (circular over ``span_ui``);
    ``lock_ui`` is the Alexander lock point, the origin of every ``phase_ui``.
    """

    impulse: FloatArray
    waveform: FloatArray
    lock_ui: float
    os: int
    n_pre: int
    n_post: int
    slope: FloatArray = field(init=False)
    # (grid, grid shifted by one sample), each twice over, so that the interpolation's
    # indices -2n..2n-1 of an n-sample grid read it circularly without a modulo.
    _waveform_pairs: tuple[FloatArray, FloatArray] = field(init=False, repr=False)
    _slope_pairs: tuple[FloatArray, FloatArray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # d p / d t in amplitude per UI, by central differences on the circular grid.
        slope = (np.roll(self.waveform, -1) - np.roll(self.waveform, 1)) * (self.os / 2)
        object.__setattr__(self, "slope", slope)
        for name, grid in (("_waveform_pairs", self.waveform), ("_slope_pairs", slope)):
            pairs = (np.tile(grid, 2), np.tile(np.roll(grid, -1), 2))
            object.__setattr__(self, name, pairs)

    @property
    def span_ui(self) -> int:
        return self.waveform.size // self.os

    @property
    def n_taps(self) -> int:
        return self.n_pre + 1 + self.n_post

    def at(self, u_ui: npt.ArrayLike) -> FloatArray:
        """p(lock + u) for any array of offsets u (UI), linearly interpolated."""
        u = np.asarray(u_ui, dtype=float)
        out = PulseSampler(self, u.shape)(u)
        return out if out.ndim else out[()]

    def slope_at(self, u_ui: npt.ArrayLike) -> FloatArray:
        """p'(lock + u) in amplitude per UI."""
        u = np.asarray(u_ui, dtype=float)
        out = PulseSampler(self, u.shape, slope=True)(u)
        return out if out.ndim else out[()]

    def cursors(
        self, phase_ui: npt.ArrayLike = 0.0, n_pre: int | None = None, n_post: int | None = None
    ) -> FloatArray:
        """Cursors h[-n_pre..n_post] sampled at ``phase_ui`` from the lock point.

        ``phase_ui`` of shape S gives an array of shape S + (n_taps,).
        """
        return self.at(self._tap_offsets(phase_ui, n_pre, n_post))

    def slope_cursors(
        self, phase_ui: npt.ArrayLike = 0.0, n_pre: int | None = None, n_post: int | None = None
    ) -> FloatArray:
        """Pulse-derivative cursors (amplitude per UI), same layout as ``cursors``."""
        return self.slope_at(self._tap_offsets(phase_ui, n_pre, n_post))

    def with_ffe(self, taps: npt.ArrayLike, n_pre: int) -> PulseResponse:
        """Response of this channel combined with a linear FIR equaliser.

        ``taps`` are c[-n_pre..n_post] of y[n] = sum_k c[k] x[n - k]: for a Tx FFE
        [c-1, c0, c+1] use ``n_pre=1``; a receiver FFE over the received samples
        has the same form. The lock point is recomputed for the combined pulse
        and the modelled ISI span grows by the filter's span.
        """
        c = np.asarray(taps, dtype=float)
        shaped = np.zeros_like(self.waveform)
        impulse = np.zeros_like(self.impulse)
        for j, coeff in enumerate(c):
            shift = (j - n_pre) * self.os
            shaped += coeff * np.roll(self.waveform, shift)
            impulse += coeff * np.roll(self.impulse, shift)
        return PulseResponse(
            impulse=impulse,
            waveform=shaped,
            lock_ui=_lock_point_ui(shaped, self.os),
            os=self.os,
            n_pre=self.n_pre + n_pre,
            n_post=self.n_post + c.size - 1 - n_pre,
        )

    def with_tx_ffe(self, tx_ffe: npt.ArrayLike) -> PulseResponse:
        """Response of a 3-tap Tx FFE [c-1, c0, c+1] followed by this channel."""
        return self.with_ffe(tx_ffe, n_pre=1)

    def _tap_offsets(
        self, phase_ui: npt.ArrayLike, n_pre: int | None, n_post: int | None
    ) -> FloatArray:
        pre = self.n_pre if n_pre is None else n_pre
        post = self.n_post if n_post is None else n_post
        k = np.arange(-pre, post + 1, dtype=float)
        return np.asarray(phase_ui, dtype=float)[..., None] + k


class PulseSampler:
    """p(lock + u) (or p') at arrays of offsets of one shape, computed in reused buffers.

    ``grid[i] * (1 - frac) + grid[i + 1] * frac`` at ``i + frac = (u + lock) * os`` on
    the circular grid. The indices read the grid through its doubled copies (each
    value's neighbour from the shifted copy: no second index array, no modulo), and the
    arithmetic runs in place in buffers kept between calls: the CDR interpolates a
    thousand links' sampling instants at every update, and fresh temporaries of that
    size cost more in page faults than the arithmetic. A call's result is valid until
    the next call.
    """

    def __init__(self, pulse: PulseResponse, shape: tuple[int, ...], slope: bool = False) -> None:
        self._lock, self._os = pulse.lock_ui, pulse.os
        self._grid, self._grid_next = pulse._slope_pairs if slope else pulse._waveform_pairs
        self._pos = np.empty(shape)
        self._floor = np.empty(shape)
        self._index = np.empty(shape, dtype=np.intp)

    def __call__(self, u_ui: npt.ArrayLike, taps: npt.ArrayLike | None = None) -> FloatArray:
        """p(lock + u), or p(lock + (u + taps)) with ``taps`` broadcast against ``u``."""
        if taps is None:
            pos = np.add(u_ui, self._lock, out=self._pos)
        else:
            pos = np.add(u_ui, taps, out=self._pos)
            pos += self._lock
        pos *= self._os
        i0 = np.floor(pos, out=self._floor)
        frac = np.subtract(pos, i0, out=pos)
        index = self._index
        np.copyto(index, i0, casting="unsafe")
        grid, grid_next = self._grid, self._grid_next
        try:
            low, high = grid[index], grid_next[index]
        except IndexError:  # offsets beyond the grid's span: wrap them explicitly
            index %= grid.size // 2
            low, high = grid[index], grid_next[index]
        weight = np.subtract(1.0, frac, out=i0)
        low *= weight
        high *= frac
        low += high
        return low


def _minimum_phase_impulse(loss_db: float, beta: float, os: int, span_ui: int) -> FloatArray:
    n = os * span_ui
    nu = 2.0 * np.arange(n // 2 + 1) / span_ui  # frequency / Nyquist on the rfft grid
    log_mag = -loss_db * ((1.0 - beta) * np.sqrt(nu) + beta * nu) * (math.log(10) / 20)
    cep = np.fft.irfft(log_mag, n)
    folded = np.zeros(n)
    folded[0] = cep[0]
    folded[1 : n // 2] = 2.0 * cep[1 : n // 2]
    folded[n // 2] = cep[n // 2]
    return np.fft.irfft(np.exp(np.fft.rfft(folded)), n)


def _lock_point_ui(waveform: FloatArray, os: int) -> float:
    """Zero of p(t + UI/2) - p(t - UI/2) next to the pulse peak, in UI."""
    half = os // 2
    g = np.roll(waveform, -half) - np.roll(waveform, half)
    peak = int(np.argmax(waveform))
    idx = (peak + np.arange(-os, os + 1)) % waveform.size
    seg = g[idx]
    crossings = np.nonzero((seg[:-1] > 0) & (seg[1:] <= 0))[0]
    if crossings.size == 0:
        return peak / os
    j = crossings[np.argmin(np.abs(crossings - os))]
    frac = seg[j] / (seg[j] - seg[j + 1])
    return ((peak - os + j + frac) % waveform.size) / os


@lru_cache(maxsize=64)
def _cached_pulse(
    loss_db: float, beta: float, n_pre: int, n_post: int, os: int, span_ui: int
) -> PulseResponse:
    impulse = _minimum_phase_impulse(loss_db, beta, os, span_ui)
    # Hold each symbol for one UI: running sum of the impulse over os samples (circular).
    csum = np.cumsum(np.concatenate([impulse[-os:], impulse]))
    waveform = csum[os:] - csum[:-os]
    impulse.setflags(write=False)
    waveform.setflags(write=False)
    return PulseResponse(
        impulse=impulse,
        waveform=waveform,
        lock_ui=_lock_point_ui(waveform, os),
        os=os,
        n_pre=n_pre,
        n_post=n_post,
    )


def pulse_response(profile: ChannelProfile) -> PulseResponse:
    """The channel's pulse response (cached per loss model and tap counts)."""
    return _cached_pulse(
        float(profile.loss_db),
        float(profile.dielectric_fraction),
        int(profile.n_pre),
        int(profile.n_post),
        OVERSAMPLE,
        SPAN_UI,
    )


def noise_rms(profile: ChannelProfile) -> float:
    """RMS of the receiver's additive noise, in the received signal's units."""
    if profile.snr_db == math.inf:
        return 0.0
    h = pulse_response(profile).cursors()
    signal_power = PAM4_SYMBOL_POWER * float(np.sum(h**2))
    return math.sqrt(signal_power / 10 ** (profile.snr_db / 10))


def apply_tx_ffe(symbols: npt.ArrayLike, tx_ffe: npt.ArrayLike) -> FloatArray:
    """Tx output y[n] = c-1 x[n+1] + c0 x[n] + c+1 x[n-1] (zero outside the sequence).

    ``tx_ffe`` is [c-1, c0, c+1], shape (3,) or (batch, 3).
    """
    x = np.asarray(symbols, dtype=float)
    c = np.asarray(tx_ffe, dtype=float)
    xp = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(1, 1)])
    return (
        c[..., 0, None] * xp[..., 2:]
        + c[..., 1, None] * xp[..., 1:-1]
        + c[..., 2, None] * xp[..., :-2]
    )


def isi(symbols: npt.ArrayLike, taps: npt.ArrayLike, n_pre: int) -> FloatArray:
    """y[n] = sum_k taps[k + n_pre] * x[n - k], k = -n_pre..n_post, zero outside.

    ``taps`` of shape (T,) or (batch, T) broadcasts against ``symbols``' leading axes.
    """
    h = np.asarray(taps, dtype=float)
    return fir_columns(symbols, h[..., None], n_pre)[..., 0]


def fir_columns(symbols: npt.ArrayLike, taps: npt.ArrayLike, n_pre: int) -> FloatArray:
    """Several ISI sums at once: ``taps`` (..., T, K) gives (..., N, K).

    Column j of the result is ``isi(symbols, taps[..., j], n_pre)``; one pass
    over the symbol windows serves the cursor and slope sums together.
    """
    x = np.asarray(symbols, dtype=float)
    h = np.asarray(taps, dtype=float)
    n_taps = h.shape[-2]
    n_post = n_taps - 1 - n_pre
    xp = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(n_post, n_pre)])
    # Window n holds x[n - n_post .. n + n_pre], oldest first: taps run newest first.
    windows = sliding_window_view(xp, n_taps, axis=-1)
    newest_first = h[..., ::-1, :]
    lead = np.broadcast_shapes(windows.shape[:-2], h.shape[:-2])
    if not lead:
        return np.matmul(windows, newest_first)
    # matmul copies the overlapping windows into a contiguous buffer first: a whole
    # batch's is gigabytes, so the rows go through in groups whose buffer stays in cache.
    # Each output element is the same dot product either way, so the sums are the same.
    out = np.empty((*lead, windows.shape[-2], h.shape[-1]))
    per_row = math.prod(lead[1:]) * windows.shape[-2] * n_taps
    rows = max(1, _FIR_BUFFER_ELEMENTS // per_row)
    for lo in range(0, lead[0], rows):
        np.matmul(
            _leading_rows(windows, lo, rows, len(lead)),
            _leading_rows(newest_first, lo, rows, len(lead)),
            out=out[lo : lo + rows],
        )
    return out


# Elements of the window buffer per matmul call in ``fir_columns`` (8 MB of float64).
_FIR_BUFFER_ELEMENTS = 1 << 20


def _leading_rows(a: FloatArray, lo: int, rows: int, n_lead: int) -> FloatArray:
    """Rows ``lo:lo + rows`` of the first leading axis, unless ``a`` broadcasts along it."""
    if a.ndim - 2 < n_lead or a.shape[0] == 1:
        return a
    return a[lo : lo + rows]


def transmit(
    symbols: npt.ArrayLike,
    profile: ChannelProfile,
    rng: np.random.Generator,
    tx_ffe: npt.ArrayLike | None = None,
    phase_ui: npt.ArrayLike = 0.0,
) -> FloatArray:
    """Received samples, one per symbol, for PAM4 levels sent through ``profile``.

    Args:
        symbols: PAM4 levels, shape (N,) or (batch, N).
        profile: the channel.
        rng: source of the noise and jitter draws.
        tx_ffe: Tx FFE [c-1, c0, c+1], shape (3,) or (batch, 3); None = no Tx EQ.
            Applied to the symbol stream; sampling stays at the channel's lock point.
        phase_ui: sampling-phase offset from the lock point, UI, scalar or (batch,).

    Returns:
        Samples aligned with ``symbols`` (sample n carries symbol n on the main
        cursor), shape broadcast over the batch axes of the inputs.
    """
    x = np.asarray(symbols, dtype=float)
    if tx_ffe is not None:
        x = apply_tx_ffe(x, tx_ffe)
    pulse = pulse_response(profile)
    phase = np.asarray(phase_ui, dtype=float)
    taps = np.stack([pulse.cursors(phase), pulse.slope_cursors(phase)], axis=-1)
    both = fir_columns(x, taps, profile.n_pre)
    y = both[..., 0]
    if profile.rj_rms_ui > 0:
        y = y + rng.normal(0.0, profile.rj_rms_ui, y.shape) * both[..., 1]
    sigma = noise_rms(profile)
    if sigma > 0:
        y = y + rng.normal(0.0, sigma, y.shape)
    return y
