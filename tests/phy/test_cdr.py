"""Bang-bang CDR: TRAIN_CTRL integration, lock time and residual phase error."""

import math

import numpy as np
import pytest

from sitssim.phy.cdr import CdrConfig, integration_ui, run_cdr, train_ctrl_field
from sitssim.phy.channel import PAM4_LEVELS, ChannelProfile, noise_rms, pulse_response
from sitssim.phy.equalizer import EqProfile, train_rx_equalizer

NOMINAL = ChannelProfile(loss_db=4.0, snr_db=30.0, rj_rms_ui=0.01)


def test_train_ctrl_encodings() -> None:
    assert [integration_ui(e) for e in range(4)] == [4, 8, 16, 32]
    assert train_ctrl_field(0x35) == 3
    assert train_ctrl_field(0x0F) == 0
    for bad in (-1, 4, 15):
        with pytest.raises(ValueError):
            integration_ui(bad)
    with pytest.raises(ValueError):
        train_ctrl_field(0x45)
    with pytest.raises(ValueError):
        CdrConfig(train_ctrl=4)


def test_locked_from_the_start_when_the_phase_is_already_right() -> None:
    result = run_cdr(
        ChannelProfile(4.0, math.inf), np.random.default_rng(0), n_links=4, initial_phase_ui=0.0
    )
    np.testing.assert_array_equal(result.lock_time_ui, 0.0)
    # Bang-bang dither around the lock point: a step or two, never a drift away.
    assert np.all(result.residual_rms_ui <= 2 * CdrConfig().kp_ui)
    assert np.all(result.residual_max_ui < 0.125)


def test_acquisition_walks_the_phase_back_to_the_lock_point() -> None:
    result = run_cdr(
        ChannelProfile(4.0, math.inf), np.random.default_rng(1), n_links=4, initial_phase_ui=0.4
    )
    assert np.all(result.locked)
    # At most one step per update, so the error cannot close faster than this.
    min_updates = math.ceil((0.4 - CdrConfig().lock_band_ui) / CdrConfig().kp_ui)
    assert np.all(result.updates_to_lock >= min_updates)
    assert np.all(np.abs(result.phase_error_ui[:, -1]) <= CdrConfig().lock_band_ui)


def test_nominal_channel_locks_within_256_ui_with_encoding_0() -> None:
    result = run_cdr(NOMINAL, np.random.default_rng(2), CdrConfig(train_ctrl=0), n_links=16)
    assert np.all(result.lock_time_ui <= 256)
    assert np.all(result.residual_max_ui <= 0.125)
    assert np.all(result.residual_rms_ui < 0.05)


def test_wider_integration_locks_slower_with_less_residual_jitter() -> None:
    lock = {0: [], 3: []}
    rms = {0: [], 3: []}
    for seed in range(3):
        for encoding in (0, 3):
            result = run_cdr(
                NOMINAL, np.random.default_rng(seed), CdrConfig(train_ctrl=encoding), n_links=16
            )
            assert np.all(result.locked)
            lock[encoding].append(np.mean(result.lock_time_ui))
            rms[encoding].append(np.mean(result.residual_rms_ui))
    assert np.mean(lock[3]) > 1.5 * np.mean(lock[0])
    assert np.mean(rms[3]) < np.mean(rms[0])


def test_second_order_loop_removes_the_lag_of_a_frequency_offset() -> None:
    first = run_cdr(NOMINAL, np.random.default_rng(3), n_links=8, freq_offset_ppm=2000.0)
    second = run_cdr(
        NOMINAL,
        np.random.default_rng(3),
        CdrConfig(ki_ui=1.0 / 512.0),
        n_links=8,
        freq_offset_ppm=2000.0,
    )
    lag_first = np.mean(first.phase_error_ui[:, 256:])
    lag_second = np.mean(second.phase_error_ui[:, 256:])
    assert lag_first > 0.04
    assert abs(lag_second) < 0.02


def test_more_loss_leaves_more_residual_phase_error() -> None:
    mild = run_cdr(NOMINAL, np.random.default_rng(4), n_links=16)
    lossy = run_cdr(
        ChannelProfile(loss_db=12.0, snr_db=30.0, rj_rms_ui=0.01),
        np.random.default_rng(4),
        n_links=16,
    )
    spread_mild = np.sqrt(np.mean(mild.phase_error_ui[:, 256:] ** 2))
    spread_lossy = np.sqrt(np.mean(lossy.phase_error_ui[:, 256:] ** 2))
    assert spread_lossy > spread_mild


def test_a_linear_rx_equaliser_in_front_restores_lock_on_a_lossy_channel() -> None:
    lossy = ChannelProfile(loss_db=15.0, snr_db=30.0, rj_rms_ui=0.01)
    linear = EqProfile(n_dfe=0, ffe_pre=2, ffe_post=6)
    trained = train_rx_equalizer(lossy, np.random.default_rng(5), eq=linear)
    raw = run_cdr(lossy, np.random.default_rng(6), n_links=16)
    equalised = run_cdr(
        lossy,
        np.random.default_rng(6),
        n_links=16,
        rx_ffe=trained.rx_ffe[0],
        rx_ffe_pre=linear.ffe_pre,
    )
    assert np.all(equalised.locked)
    assert np.median(equalised.lock_time_ui) < np.median(raw.lock_time_ui)
    assert np.nanmean(equalised.residual_rms_ui) < np.nanmean(raw.residual_rms_ui)


def _phase_trace_one_update_at_a_time(
    channel: ChannelProfile,
    rng: np.random.Generator,
    cfg: CdrConfig,
    symbols: np.ndarray,
    err: np.ndarray,
    tx_ffe: list[float],
    rx_ffe: list[float],
    ppm: float,
) -> np.ndarray:
    """The CDR loop as first written: each update's draws and samples on their own."""
    window = integration_ui(cfg.train_ctrl)
    pulse = pulse_response(channel).with_tx_ffe(tx_ffe).with_ffe(rx_ffe, 1)
    sigma = noise_rms(channel) * float(np.linalg.norm(rx_ffe))
    n_updates = cfg.duration_ui // window
    taps = np.arange(-pulse.n_pre - 1, pulse.n_post + 2)
    origin = pulse.n_post + 1
    n_links = err.size
    freq = np.zeros(n_links)
    trace = np.empty((n_links, n_updates + 1))
    n_local = np.arange(window + 1)
    for k in range(n_updates):
        trace[:, k] = err
        sym = symbols[:, origin + k * window + n_local[:, None] - taps[None, :]]
        data_u = err[:, None] + channel.rj_rms_ui * rng.standard_normal((n_links, window + 1))
        edge_u = err[:, None] + 0.5 + channel.rj_rms_ui * rng.standard_normal((n_links, window))
        data = np.einsum("bst,bst->bs", sym, pulse.at(data_u[..., None] + taps))
        edge = np.einsum("bst,bst->bs", sym[:, :window], pulse.at(edge_u[..., None] + taps))
        if sigma > 0:
            data = data + rng.normal(0.0, sigma, data.shape)
            edge = edge + rng.normal(0.0, sigma, edge.shape)
        sign = np.sign(data)
        crossing = sign[:, :-1] != sign[:, 1:]
        votes = np.where(crossing, np.sign(edge) * sign[:, :-1], 0.0).sum(axis=1)
        step = np.sign(votes)
        freq += cfg.ki_ui * step
        err = (err + cfg.kp_ui * step + freq + ppm * 1e-6 * window + 0.5) % 1.0 - 0.5
    trace[:, n_updates] = err
    return trace


@pytest.mark.parametrize(
    ("channel", "train_ctrl"),
    [
        (NOMINAL, 0),
        (ChannelProfile(loss_db=9.0, snr_db=24.0, rj_rms_ui=0.03), 1),
        (ChannelProfile(loss_db=6.0, snr_db=math.inf, rj_rms_ui=0.02), 2),
        (ChannelProfile(loss_db=3.0, snr_db=28.0, rj_rms_ui=0.0, n_post=4), 3),
    ],
)
def test_batched_draws_and_samples_give_the_one_update_at_a_time_trace_bit_for_bit(
    channel: ChannelProfile, train_ctrl: int
) -> None:
    # Updates drawn many at a time, data and edge samples in one interpolation: the same
    # draws in the same order, the same arithmetic, so the same phase at every update.
    cfg = CdrConfig(train_ctrl=train_ctrl, ki_ui=1 / 512, duration_ui=1024)
    tx_ffe, rx_ffe = [-0.05, 0.85, -0.1], [-0.1, 1.2, -0.15, 0.05]
    setup = np.random.default_rng(17)
    symbols = PAM4_LEVELS[setup.integers(0, 4, (9, 1200))]
    err = setup.uniform(-0.5, 0.5, 9)
    got = run_cdr(
        channel,
        np.random.default_rng(5),
        cfg,
        n_links=9,
        tx_ffe=tx_ffe,
        rx_ffe=rx_ffe,
        rx_ffe_pre=1,
        initial_phase_ui=err,
        freq_offset_ppm=150.0,
        symbols=symbols,
    )
    expected = _phase_trace_one_update_at_a_time(
        channel, np.random.default_rng(5), cfg, symbols, err, tx_ffe, rx_ffe, 150.0
    )
    np.testing.assert_array_equal(got.phase_error_ui, expected)
