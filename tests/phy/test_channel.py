"""Channel model: pulse response from insertion loss, ISI, noise and jitter."""

import math

import numpy as np
import pytest

import sitssim.phy.channel as channel
from sitssim.phy.channel import (
    PAM4_LEVELS,
    SPAN_UI,
    ChannelProfile,
    isi,
    noise_rms,
    pulse_response,
    transmit,
)


def _symbols(rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
    return PAM4_LEVELS[rng.integers(0, 4, shape)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"loss_db": -1.0, "snr_db": 20.0},
        {"loss_db": math.inf, "snr_db": 20.0},
        {"loss_db": 10.0, "snr_db": math.nan},
        {"loss_db": 10.0, "snr_db": 20.0, "rj_rms_ui": -0.01},
        {"loss_db": 10.0, "snr_db": 20.0, "n_post": 0},
        {"loss_db": 10.0, "snr_db": 20.0, "dielectric_fraction": 1.5},
    ],
)
def test_profile_rejects_meaningless_values(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        ChannelProfile(**kwargs)


@pytest.mark.parametrize("loss_db", [0.0, 12.0, 30.0])
@pytest.mark.parametrize("phase_ui", [-0.3, 0.0, 0.45])
def test_all_one_ui_samples_of_the_pulse_sum_to_the_dc_gain(
    loss_db: float, phase_ui: float
) -> None:
    pulse = pulse_response(ChannelProfile(loss_db, 30.0))
    # One sample from each of the SPAN_UI UIs of the (circular) response.
    full = pulse.cursors(phase_ui, n_pre=5, n_post=SPAN_UI - 6)
    assert full.sum() == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("loss_db", [3.0, 17.0, 33.0])
def test_attenuation_at_nyquist_equals_the_insertion_loss(loss_db: float) -> None:
    pulse = pulse_response(ChannelProfile(loss_db, 30.0))
    i = np.arange(pulse.impulse.size)
    # Nyquist is half a cycle per UI, i.e. pi radians per os samples.
    h_nyquist = np.sum(pulse.impulse * np.exp(-1j * np.pi * i / pulse.os))
    assert 20 * np.log10(abs(h_nyquist)) == pytest.approx(-loss_db, abs=1e-6)


def test_minimum_phase_pulse_is_causal() -> None:
    impulse = pulse_response(ChannelProfile(30.0, 30.0)).impulse
    late = impulse[impulse.size // 2 :]
    assert np.sum(late**2) < 1e-5 * np.sum(impulse**2)


def test_lock_point_balances_the_pulse_half_a_ui_either_side() -> None:
    for loss_db in (5.0, 20.0, 35.0):
        pulse = pulse_response(ChannelProfile(loss_db, 30.0))
        assert pulse.at(0.5) == pytest.approx(pulse.at(-0.5), abs=1e-3 * pulse.at(0.0))
        assert pulse.at(0.0) > 0.95 * pulse.waveform.max()


def test_more_loss_means_a_smaller_main_cursor_and_more_isi() -> None:
    mains, ratios = [], []
    for loss_db in range(0, 40, 5):
        h = pulse_response(ChannelProfile(float(loss_db), 30.0)).cursors()
        main = h[2]
        mains.append(main)
        ratios.append((np.abs(h).sum() - main) / main)
    assert ratios[0] == pytest.approx(0.0, abs=1e-12)
    assert np.all(np.diff(mains) < 0)
    assert np.all(np.diff(ratios) > 0)


def test_single_symbol_comes_out_as_the_cursors() -> None:
    profile = ChannelProfile(15.0, math.inf)
    x = np.zeros(40)
    x[10] = 1.0
    y = transmit(x, profile, np.random.default_rng(0))
    h = pulse_response(profile).cursors()
    np.testing.assert_allclose(y[10 - profile.n_pre : 10 + profile.n_post + 1], h)
    assert np.count_nonzero(y) == np.count_nonzero(h)


def test_noise_power_matches_the_snr() -> None:
    rng = np.random.default_rng(1)
    x = _symbols(rng, 200_000)
    clean = transmit(x, ChannelProfile(12.0, math.inf), rng)
    noisy = transmit(x, ChannelProfile(12.0, 20.0), rng)
    noise_power = np.var(noisy - clean)
    assert noise_power / np.var(clean) == pytest.approx(10 ** (-20.0 / 10), rel=0.03)
    assert math.sqrt(noise_power) == pytest.approx(noise_rms(ChannelProfile(12.0, 20.0)), rel=0.02)


def test_jitter_error_follows_the_waveform_slope() -> None:
    rng = np.random.default_rng(2)
    x = _symbols(rng, 100_000)
    clean = transmit(x, ChannelProfile(15.0, math.inf), rng)
    jittered = transmit(x, ChannelProfile(15.0, math.inf, rj_rms_ui=0.03), rng)
    slope = isi(x, pulse_response(ChannelProfile(15.0, math.inf)).slope_cursors(), 2)
    err = jittered - clean
    assert np.var(err) == pytest.approx(0.03**2 * np.mean(slope**2), rel=0.05)
    # No slope, no error: the error is the slope times a zero-mean draw.
    assert np.corrcoef(np.abs(err), np.abs(slope))[0, 1] > 0.5


def test_batch_rows_equal_separate_links() -> None:
    rng = np.random.default_rng(3)
    profile = ChannelProfile(20.0, math.inf)
    x = _symbols(rng, (3, 500))
    phases = np.array([0.0, 0.2, -0.15])
    ffe = np.array([[0.0, 1.0, 0.0], [-0.1, 0.7, -0.2], [0.0, 0.75, -0.25]])
    batch = transmit(x, profile, rng, tx_ffe=ffe, phase_ui=phases)
    for b in range(3):
        single = transmit(x[b], profile, rng, tx_ffe=ffe[b], phase_ui=phases[b])
        np.testing.assert_allclose(batch[b], single)


def test_one_sequence_fans_out_over_a_batch_of_phases() -> None:
    rng = np.random.default_rng(4)
    y = transmit(_symbols(rng, 300), ChannelProfile(10.0, 25.0), rng, phase_ui=np.zeros(5))
    assert y.shape == (5, 300)
    # Same symbols and phase, independent noise per link.
    assert not np.allclose(y[0], y[1])


def test_de_emphasis_shortens_the_pulse_tail() -> None:
    pulse = pulse_response(ChannelProfile(15.0, 30.0))
    plain = pulse.cursors()
    shaped = pulse.with_tx_ffe([0.0, 0.75, -0.25]).cursors(n_pre=2, n_post=12)
    assert shaped[3] / shaped[2] < plain[3] / plain[2]
    assert np.sum(np.abs(shaped[4:])) < np.sum(np.abs(plain[4:]))


def test_fir_equaliser_pulse_is_the_convolution_of_taps_and_cursors() -> None:
    pulse = pulse_response(ChannelProfile(12.0, 30.0))
    taps = np.array([-0.05, 0.2, 1.1, -0.3, 0.08])
    shaped = pulse.with_ffe(taps, n_pre=2)
    assert (shaped.n_pre, shaped.n_post) == (pulse.n_pre + 2, pulse.n_post + 2)
    # Sample the combined pulse at the channel's own lock point.
    k = np.arange(-shaped.n_pre, shaped.n_post + 1)
    at_channel_lock = shaped.at(k + pulse.lock_ui - shaped.lock_ui)
    expected = sum(c * pulse.at(k - (j - 2)) for j, c in enumerate(taps))
    np.testing.assert_allclose(at_channel_lock, expected, atol=1e-7)
    # Within the channel's modelled span this is the convolution of taps and cursors.
    inner = slice(taps.size - 1, pulse.n_taps)
    np.testing.assert_allclose(
        at_channel_lock[inner], np.convolve(taps, pulse.cursors())[inner], atol=1e-7
    )


@pytest.mark.parametrize("shared_taps", [True, False])
def test_fir_columns_in_row_groups_gives_each_row_its_own_sums_exactly(
    monkeypatch: pytest.MonkeyPatch, shared_taps: bool
) -> None:
    # A buffer of a few rows forces many groups, and a last one that is not full.
    monkeypatch.setattr(channel, "_FIR_BUFFER_ELEMENTS", 3 * 64 * 7)
    rng = np.random.default_rng(8)
    x = _symbols(rng, (11, 64)) * rng.uniform(0.5, 1.0, (11, 1))
    taps = rng.normal(size=(7, 2) if shared_taps else (11, 7, 2))
    got = channel.fir_columns(x, taps, n_pre=2)
    assert got.shape == (11, 64, 2)
    for b in range(11):
        row_taps = taps if shared_taps else taps[b]
        np.testing.assert_array_equal(got[b], channel.fir_columns(x[b], row_taps, n_pre=2))
        # Column j is the ISI sum with taps[..., j]: the groups must not mix rows or columns.
        np.testing.assert_allclose(got[b, :, 1], isi(x[b], row_taps[:, 1], n_pre=2))


def _interpolated(pulse: channel.PulseResponse, grid: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The pulse's linear interpolation as first written: index arrays modulo the grid."""
    pos = (np.asarray(u, dtype=float) + pulse.lock_ui) * pulse.os
    i0 = np.floor(pos)
    frac = pos - i0
    i0 = i0.astype(np.int64) % grid.size
    i1 = (i0 + 1) % grid.size
    return grid[i0] * (1.0 - frac) + grid[i1] * frac


@pytest.mark.parametrize("reach_ui", [3.0, 700.0, 5000.0])
def test_pulse_sampling_is_the_interpolation_modulo_the_grid_bit_for_bit(reach_ui: float) -> None:
    # Offsets within the grid's span, beyond it (doubled copies), far beyond (wrapped).
    pulse = channel.pulse_response(ChannelProfile(loss_db=12.0, snr_db=30.0))
    u = np.random.default_rng(4).uniform(-reach_ui, reach_ui, (50, 3, 7))
    np.testing.assert_array_equal(pulse.at(u), _interpolated(pulse, pulse.waveform, u))
    np.testing.assert_array_equal(pulse.slope_at(u), _interpolated(pulse, pulse.slope, u))
    sampler = channel.PulseSampler(pulse, u.shape)
    first = sampler(u).copy()
    sampler(u[::-1].copy())
    np.testing.assert_array_equal(sampler(u), first)
    assert pulse.at(0.25) == _interpolated(pulse, pulse.waveform, np.array(0.25))
