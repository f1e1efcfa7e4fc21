"""Bang-bang CDR: TRAIN_CTRL integration, lock time and residual phase error."""

import math

import numpy as np
import pytest

from sitssim.phy.cdr import CdrConfig, integration_ui, run_cdr, train_ctrl_field
from sitssim.phy.channel import ChannelProfile
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
