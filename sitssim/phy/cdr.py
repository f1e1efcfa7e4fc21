"""Clock and data recovery: bang-bang (Alexander) phase detector and loop filter.

Theory of operation
-------------------
The receiver samples the continuous received waveform twice per UI: a data
sample at its recovered phase and an edge sample half a UI later. The waveform
is the sum over symbols of the pulse response (``channel.py``), shaped by the
partner's Tx FFE and by the receiver's linear equaliser when one is given,
evaluated at the actual, jittered sampling instants (interpolated from the
oversampled pulse), plus the channel's Gaussian noise; nothing is linearised.
Without a linear equaliser in front of it the detector works on the raw, ISI-laden
waveform and degrades quickly with loss; after EQ (dynamic retraining, where
TRAIN_CTRL applies) pass the trained Rx FFE.

*Phase detector.* For every pair of consecutive data samples whose signs differ
(a zero crossing between them), the edge sample votes: if it has the sign of the
earlier data sample the clock is early (the crossing has not happened yet), if
it has the sign of the later one the clock is late. PAM4 transitions that cross
zero off-centre (e.g. -1 -> +3) and ISI make individual votes noisy; on average
the votes balance where p(t + UI/2) = p(t - UI/2), the pulse's lock point, which
is therefore the zero of the phase error reported here.

*Integration and loop.* ``TRAIN_CTRL[7:4]`` (encodings 0-3) selects how many UI
the detector integrates per phase update: 4, 8, 16 or 32. At the end of each
window the loop takes the sign of the summed votes (majority, bang-bang) and
moves the phase by ``kp_ui``; a second-order loop also accumulates ``ki_ui``
per update into a frequency term that it adds every update, so a frequency
offset between the transmitter and receiver clocks is tracked without a
standing phase lag. A window without any zero crossing leaves the phase alone.
Wider windows average more votes (fewer wrong-way steps) but update less often,
so lock is slower; neither effect is written in, both follow from the loop.

*Lock.* The CDR is locked from the first update after which the phase error
stays within ``lock_band_ui`` for ``hold_ui`` UI. The residual phase error (RMS
and maximum magnitude) is measured over all updates from lock to the end of the
run. The initial phase error is uniform over one UI unless given. Phase error is
kept in [-0.5, 0.5) UI: a slip by a whole UI only relabels symbols.

All links of a batch advance together: one update is one set of numpy operations
over (links, samples in the window, pulse taps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from sitssim.phy.channel import (
    PAM4_LEVELS,
    ChannelProfile,
    FloatArray,
    PulseSampler,
    noise_rms,
    pulse_response,
)

TRAIN_CTRL_INTEGRATION_UI: tuple[int, ...] = (4, 8, 16, 32)


def integration_ui(train_ctrl: int) -> int:
    """UI integrated per phase update for a TRAIN_CTRL[7:4] encoding (0-3)."""
    if not (isinstance(train_ctrl, int | np.integer) and 0 <= train_ctrl < 4):
        raise ValueError(f"TRAIN_CTRL[7:4] encoding must be 0..3, got {train_ctrl!r}")
    return TRAIN_CTRL_INTEGRATION_UI[int(train_ctrl)]


def train_ctrl_field(register: int) -> int:
    """The TRAIN_CTRL[7:4] encoding of a register value; ValueError if not 0-3."""
    encoding = (int(register) >> 4) & 0xF
    integration_ui(encoding)
    return encoding


@dataclass(frozen=True)
class CdrConfig:
    """CDR loop parameters a device implements.

    Attributes:
        train_ctrl: TRAIN_CTRL[7:4] encoding, 0-3 (4/8/16/32 UI per update).
        kp_ui: proportional phase step per update, UI.
        ki_ui: integral (frequency) step per update, UI per update; 0 = first order.
        lock_band_ui: |phase error| that counts as locked, UI.
        hold_ui: how long the error must stay in the band to declare lock, UI.
        duration_ui: simulated time, UI.
    """

    train_ctrl: int = 0
    kp_ui: float = 1.0 / 64.0
    ki_ui: float = 0.0
    lock_band_ui: float = 0.0625
    hold_ui: int = 64
    duration_ui: int = 2048

    def __post_init__(self) -> None:
        integration_ui(self.train_ctrl)
        if not 0 < self.kp_ui < 0.5:
            raise ValueError(f"kp_ui must be in (0, 0.5), got {self.kp_ui}")
        if not 0 <= self.ki_ui < self.kp_ui:
            raise ValueError(f"ki_ui must be in [0, kp_ui), got {self.ki_ui}")
        if not 0 < self.lock_band_ui < 0.5:
            raise ValueError(f"lock_band_ui must be in (0, 0.5), got {self.lock_band_ui}")
        if self.hold_ui < 0 or self.duration_ui < 32:
            raise ValueError("hold_ui must be >= 0 and duration_ui >= 32")


@dataclass(frozen=True)
class CdrResult:
    """Outcome of a CDR run (arrays over the batch of links).

    ``phase_error_ui[:, k]`` is the error at ``t_ui[k]`` (before update k).
    ``lock_time_ui`` is inf and the residuals NaN for a link that never locked.
    """

    integration_ui: int
    t_ui: npt.NDArray[np.int64]
    phase_error_ui: FloatArray
    lock_time_ui: FloatArray
    residual_rms_ui: FloatArray
    residual_max_ui: FloatArray

    @property
    def locked(self) -> npt.NDArray[np.bool_]:
        return np.isfinite(self.lock_time_ui)

    @property
    def updates_to_lock(self) -> npt.NDArray[np.int64]:
        """Phase updates before lock (-1 if never locked)."""
        updates = np.where(self.locked, self.lock_time_ui / self.integration_ui, -1)
        return updates.astype(np.int64)


def _wrap(phase_ui: FloatArray) -> FloatArray:
    return (phase_ui + 0.5) % 1.0 - 0.5


def run_cdr(
    channel: ChannelProfile,
    rng: np.random.Generator,
    config: CdrConfig | None = None,
    n_links: int = 1,
    tx_ffe: npt.ArrayLike | None = None,
    rx_ffe: npt.ArrayLike | None = None,
    rx_ffe_pre: int = 0,
    initial_phase_ui: npt.ArrayLike | None = None,
    freq_offset_ppm: float = 0.0,
    symbols: npt.ArrayLike | None = None,
) -> CdrResult:
    """Acquire phase on ``n_links`` links that share ``channel``.

    Args:
        channel: the channel (loss, noise, random jitter).
        rng: initial phases, symbols, noise and jitter draws.
        config: loop parameters (TRAIN_CTRL encoding, gains, lock criterion).
        n_links: batch size.
        tx_ffe: the partner's Tx FFE [c-1, c0, c+1] (None = no Tx EQ).
        rx_ffe: linear receiver equaliser in front of the samplers, taps
            c[-rx_ffe_pre..] of z[n] = sum_k c[k] y[n - k] (None = none); it
            shapes the waveform and scales the noise by its norm.
        rx_ffe_pre: taps of ``rx_ffe`` ahead of the cursor.
        initial_phase_ui: starting phase error per link (UI); default uniform
            in [-0.5, 0.5).
        freq_offset_ppm: Tx/Rx clock frequency offset; the phase drifts by
            ppm * 1e-6 UI per UI unless the loop corrects it.
        symbols: PAM4 levels, shape (n_links, >= duration_ui + span of the
            equalised pulse + 4); default uniform random levels.
    """
    cfg = CdrConfig() if config is None else config
    window = integration_ui(cfg.train_ctrl)
    pulse = pulse_response(channel)
    sigma = noise_rms(channel)
    if tx_ffe is not None:
        pulse = pulse.with_tx_ffe(tx_ffe)
    if rx_ffe is not None:
        pulse = pulse.with_ffe(rx_ffe, rx_ffe_pre)
        sigma *= float(np.linalg.norm(rx_ffe))
    n_updates = cfg.duration_ui // window
    span = n_updates * window + 1
    taps = np.arange(-pulse.n_pre - 1, pulse.n_post + 2)
    origin = pulse.n_post + 1
    length = span + pulse.n_pre + pulse.n_post + 3
    if symbols is None:
        x = PAM4_LEVELS[rng.integers(0, 4, (n_links, length))]
    else:
        x = np.asarray(symbols, dtype=float)[:, :length]
        if x.shape != (n_links, length):
            raise ValueError(f"symbols must have shape ({n_links}, >= {length})")
    if initial_phase_ui is None:
        err = rng.uniform(-0.5, 0.5, n_links)
    else:
        err = _wrap(np.broadcast_to(np.asarray(initial_phase_ui, dtype=float), (n_links,)).copy())

    rj = channel.rj_rms_ui
    drift = freq_offset_ppm * 1e-6 * window
    freq = np.zeros(n_links)
    trace = np.empty((n_links, n_updates + 1))
    draws = _UpdateDraws(rng, n_links, window, sigma > 0, n_updates)
    # One update's data samples (window + 1) and edge samples (window) side by side:
    # their sampling instants, and the symbols under the pulse taps.
    instants = np.empty((n_links, 2 * window + 1, 1))
    sym = np.empty((n_links, 2 * window + 1, taps.size))
    sampler = PulseSampler(pulse, sym.shape)
    # newest[:, j, i] = x[:, j + taps.size - 1 - i]: the symbols under the taps, newest first.
    newest = sliding_window_view(x, taps.size, axis=1)[:, :, ::-1]
    first = origin - taps[-1]
    for k in range(n_updates):
        trace[:, k] = err
        z_data, z_edge, noise_data, noise_edge = draws.next()
        j = first + k * window
        np.copyto(sym[:, : window + 1], newest[:, j : j + window + 1])
        np.copyto(sym[:, window + 1 :], newest[:, j : j + window])
        instants[:, : window + 1, 0] = err[:, None] + rj * z_data
        instants[:, window + 1 :, 0] = err[:, None] + 0.5 + rj * z_edge
        samples = np.einsum("bst,bst->bs", sym, sampler(instants, taps))
        data, edge = samples[:, : window + 1], samples[:, window + 1 :]
        if noise_data is not None and noise_edge is not None:
            # As Generator.normal(0, sigma) scales its standard normals: 0 + sigma * z.
            data = data + (0.0 + sigma * noise_data)
            edge = edge + (0.0 + sigma * noise_edge)
        sign = np.sign(data)
        crossing = sign[:, :-1] != sign[:, 1:]
        # +1: the edge sample still has the earlier symbol's sign, the clock is early.
        votes = np.where(crossing, np.sign(edge) * sign[:, :-1], 0.0).sum(axis=1)
        step = np.sign(votes)
        freq += cfg.ki_ui * step
        err = _wrap(err + cfg.kp_ui * step + freq + drift)
    trace[:, n_updates] = err
    t_ui = np.arange(n_updates + 1) * window
    return _measure(trace, t_ui, window, cfg)


class _UpdateDraws:
    """Each update's draws, in the order the loop once drew them one by one.

    Per update: the data samples' jitter (links x (window + 1) standard normals), the
    edge samples' jitter (links x window), then, with noise, the same again for the
    noise (``Generator.normal`` scales standard normals from the same stream). Drawn
    for many updates at a time, the sequence is the same and the calls far fewer.
    """

    def __init__(
        self, rng: np.random.Generator, n_links: int, window: int, noise: bool, updates: int
    ) -> None:
        self._rng = rng
        self._shapes = [(n_links, window + 1), (n_links, window)] * (2 if noise else 1)
        self._per_update = sum(math.prod(shape) for shape in self._shapes)
        self._chunk = max(1, _DRAW_ELEMENTS // self._per_update)
        self._left = updates
        self._block = np.empty((0, self._per_update))
        self._row = 0

    def next(self) -> tuple[FloatArray, FloatArray, FloatArray | None, FloatArray | None]:
        """(data jitter, edge jitter, data noise, edge noise) standard normals; no noise: None."""
        if self._row == self._block.shape[0]:
            count = min(self._chunk, self._left)
            self._block = self._rng.standard_normal((count, self._per_update))
            self._left -= count
            self._row = 0
        row = self._block[self._row]
        self._row += 1
        parts = []
        at = 0
        for shape in self._shapes:
            size = math.prod(shape)
            parts.append(row[at : at + size].reshape(shape))
            at += size
        if len(parts) == 2:
            return parts[0], parts[1], None, None
        return parts[0], parts[1], parts[2], parts[3]


# Standard normals per draw of ``_UpdateDraws`` (a few MB).
_DRAW_ELEMENTS = 1 << 19


def _measure(
    trace: FloatArray, t_ui: npt.NDArray[np.int64], window: int, cfg: CdrConfig
) -> CdrResult:
    n_links, n_points = trace.shape
    hold = math.ceil(cfg.hold_ui / window)
    outside = np.abs(trace) > cfg.lock_band_ui
    # Runs of hold + 1 in-band points starting at each index, via a cumulative count.
    csum = np.concatenate([np.zeros((n_links, 1)), np.cumsum(outside, axis=1)], axis=1)
    starts = n_points - hold
    if starts > 0:
        clean = (csum[:, hold + 1 : hold + 1 + starts] - csum[:, :starts]) == 0
        has_lock = clean.any(axis=1)
        first = np.argmax(clean, axis=1)
    else:
        has_lock = np.zeros(n_links, dtype=bool)
        first = np.zeros(n_links, dtype=np.int64)
    lock_time = np.where(has_lock, t_ui[first], np.inf).astype(float)
    after = (np.arange(n_points)[None, :] >= first[:, None]) & has_lock[:, None]
    count = np.maximum(after.sum(axis=1), 1)
    rms = np.sqrt(np.where(after, trace**2, 0.0).sum(axis=1) / count)
    peak = np.where(after, np.abs(trace), 0.0).max(axis=1)
    return CdrResult(
        integration_ui=window,
        t_ui=t_ui,
        phase_error_ui=trace,
        lock_time_ui=lock_time,
        residual_rms_ui=np.where(has_lock, rms, np.nan),
        residual_max_ui=np.where(has_lock, peak, np.nan),
    )
