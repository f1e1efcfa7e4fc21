"""Tx presets, LMS FFE/DFE, BER estimation and the Level-3 EQ procedure."""

import math
from collections import deque

import numpy as np
import pytest

import sitssim.phy.equalizer as equalizer
from sitssim.config.presets import PRESET_NAMES, PRESET_NEIGHBOURS, PRESET_NOMINAL_DB
from sitssim.phy.channel import PAM4_LEVELS, ChannelProfile, pulse_response, transmit
from sitssim.phy.equalizer import (
    PRESET_TABLE,
    TX_PRESETS,
    EqProfile,
    ber_q_function,
    count_bit_errors,
    equalize,
    estimate_ber,
    estimate_ber_of_blocks,
    level3_eq,
    preset_coefficients,
    preset_db,
    train_rx_equalizer,
)

NOMINAL = ChannelProfile(loss_db=10.0, snr_db=30.0, rj_rms_ui=0.01)


def test_preset_table_is_eleven_full_swing_three_tap_filters() -> None:
    assert tuple(f"Q{i}" for i in range(11)) == PRESET_NAMES
    assert PRESET_TABLE.shape == (11, 3)
    np.testing.assert_allclose(np.abs(PRESET_TABLE).sum(axis=1), 1.0)
    assert np.all(PRESET_TABLE[:, 1] > 0)
    assert np.all(PRESET_TABLE[:, [0, 2]] <= 0)
    np.testing.assert_array_equal(preset_coefficients("Q4"), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(TX_PRESETS["Q7"], (-0.1, 0.7, -0.2))


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_preset_coefficients_give_the_tabulated_preshoot_and_deemphasis(name: str) -> None:
    preshoot, deemphasis = preset_db(preset_coefficients(name))
    nominal = PRESET_NOMINAL_DB[name]
    assert preshoot == pytest.approx(nominal[0], abs=0.1)
    assert deemphasis == pytest.approx(nominal[1], abs=0.1)


def test_preset_neighbourhood_is_symmetric_and_connected() -> None:
    for name, neighbours in PRESET_NEIGHBOURS.items():
        assert name not in neighbours
        for other in neighbours:
            assert name in PRESET_NEIGHBOURS[other]
    seen, queue = {"Q4"}, deque(["Q4"])
    while queue:
        for other in PRESET_NEIGHBOURS[queue.popleft()]:
            if other not in seen:
                seen.add(other)
                queue.append(other)
    assert seen == set(PRESET_NAMES)


def test_unknown_preset_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown Tx preset"):
        preset_coefficients("Q11")
    with pytest.raises(ValueError):
        EqProfile(initial_preset="P4")


def test_gray_mapping_bit_errors() -> None:
    decided = np.array([-3.0, -3.0, -1.0, 1.0, 3.0, 3.0])
    sent = np.array([-1.0, 1.0, 1.0, 3.0, -3.0, 3.0])
    # 00/01, 00/11, 01/11, 11/10, 10/00, 10/10
    assert count_bit_errors(decided, sent) == 1 + 2 + 1 + 1 + 1 + 0


def test_q_function_and_counted_ber_agree_on_gaussian_noise() -> None:
    rng = np.random.default_rng(5)
    sent = PAM4_LEVELS[rng.integers(0, 4, 400_000)]
    received = sent + rng.normal(0.0, 0.35, sent.size)
    counted = estimate_ber(received, sent, min_errors=20)
    assert counted.method == "counted"
    assert counted.ber == pytest.approx(float(ber_q_function(0.35)), rel=0.1)
    forced_q = estimate_ber(received, sent, min_errors=10**9)
    assert forced_q.method == "q_function"
    assert forced_q.ber == pytest.approx(counted.ber, rel=0.1)


def test_too_few_errors_falls_back_to_the_q_function() -> None:
    rng = np.random.default_rng(6)
    sent = PAM4_LEVELS[rng.integers(0, 4, 5_000)]
    est = estimate_ber(sent + rng.normal(0.0, 0.15, sent.size), sent)
    assert est.method == "q_function"
    assert est.bit_errors < 20
    assert 0 < est.ber < 1e-6


def test_lms_converges_on_a_mild_channel_and_beats_no_equalisation() -> None:
    rng = np.random.default_rng(7)
    training = train_rx_equalizer(NOMINAL, rng, n_links=4)
    assert np.all(training.converged)
    assert np.all(training.ber.ber < 1e-4)
    assert np.all(training.mse_per_block[:, -1] < training.mse_per_block[:, 0])

    out, sent = equalize(NOMINAL, rng, 4096, n_links=4)
    eq_mse = np.mean((out - sent) ** 2, axis=1)
    raw = transmit(sent, NOMINAL, rng)
    # Best single gain on the raw samples: what a receiver without EQ could do.
    gain = np.sum(raw * sent, axis=1) / np.sum(raw * raw, axis=1)
    raw_mse = np.mean((gain[:, None] * raw - sent) ** 2, axis=1)
    assert np.all(eq_mse < 0.2 * raw_mse)


def test_q_function_and_counted_ber_agree_after_equalisation() -> None:
    # Low SNR so that errors are countable in a short run; phase 1 cannot reach
    # 1e-4 here, so cap its length.
    channel = ChannelProfile(loss_db=6.0, snr_db=16.0, rj_rms_ui=0.01)
    eq = EqProfile(max_phase1_blocks=40)
    out, sent = equalize(channel, np.random.default_rng(8), 40_000, n_links=2, eq=eq)
    counted = estimate_ber(out, sent, min_errors=20)
    q = estimate_ber(out, sent, min_errors=10**9)
    assert np.all(counted.method == "counted")
    assert np.all(counted.bit_errors > 100)
    ratio = counted.ber / q.ber
    assert np.all((ratio > 0.67) & (ratio < 1.5))


def test_each_preset_of_phases_2_and_3_takes_the_channel_its_time_to_reacquire() -> None:
    """A lossy channel's receiver needs longer to re-adapt after a preset change, so the
    preset search costs more blocks per preset tried there (a fixed count would not)."""

    def blocks_per_preset(loss_db: float) -> float:
        channel = ChannelProfile(loss_db=loss_db, snr_db=30.0, rj_rms_ui=0.01)
        records = level3_eq(channel, np.random.default_rng(13), n_links=4)
        phases = [p for r in records for p in r.phases[2:]]
        return float(np.mean([p.iterations / len(p.presets_tried) for p in phases]))

    assert blocks_per_preset(21.0) > 1.6 * blocks_per_preset(6.0)


def test_level3_record_on_a_nominal_channel() -> None:
    eq = EqProfile()
    (record,) = level3_eq(NOMINAL, np.random.default_rng(9), eq=eq)
    assert [p.phase for p in record.phases] == [0, 1, 2, 3]
    phase0, phase1, phase2, phase3 = record.phases
    assert phase0.iterations == 0 and phase0.preset == eq.initial_preset
    assert phase1.iterations >= eq.confirm_blocks
    for phase in (phase2, phase3):
        assert phase.ran
        assert phase.presets_tried[0] == eq.initial_preset
        assert phase.preset in phase.presets_tried
        assert len(set(phase.presets_tried)) == len(phase.presets_tried)
        # Each candidate: re-acquired (at least confirm_blocks), then scored.
        least = len(phase.presets_tried) * (eq.confirm_blocks + eq.eval_blocks)
        most = len(phase.presets_tried) * (eq.max_settle_blocks + eq.eval_blocks)
        assert least <= phase.iterations <= most
        # The hill climb stops only when every neighbour of the choice was tried.
        assert set(PRESET_NEIGHBOURS[phase.preset]) <= set(phase.presets_tried)
        assert phase.method in ("counted", "q_function")
        assert phase.ber is not None and phase.ber < eq.ber_target
    assert record.completed
    assert record.tx_presets == (phase2.preset, phase3.preset)


def test_skip_phase3_reports_phase3_not_run() -> None:
    (record,) = level3_eq(NOMINAL, np.random.default_rng(10), eq=EqProfile(skip_phase3=True))
    assert record.phases[2].ran
    assert not record.phases[3].ran
    assert record.phases[3].presets_tried == ()
    assert not record.completed
    assert record.tx_presets[1] == EqProfile().initial_preset


def test_level3_is_deterministic_and_batches_links() -> None:
    a = level3_eq(NOMINAL, np.random.default_rng(11), n_links=3)
    b = level3_eq(NOMINAL, np.random.default_rng(11), n_links=3)
    assert a == b
    assert len(a) == 3


def test_an_unreachable_target_is_reported_not_hidden() -> None:
    lossy = ChannelProfile(loss_db=30.0, snr_db=22.0, rj_rms_ui=0.01)
    (record,) = level3_eq(lossy, np.random.default_rng(12), eq=EqProfile(max_phase1_blocks=30))
    phase1 = record.phases[1]
    assert phase1.iterations == 30
    assert not phase1.converged
    assert phase1.ber is not None and phase1.ber > 1e-4
    assert not record.completed
    assert math.isfinite(record.final_ber[0])


def test_trained_linear_ffe_flattens_the_channel_cursors() -> None:
    linear = EqProfile(n_dfe=0, ffe_pre=2, ffe_post=6)
    trained = train_rx_equalizer(NOMINAL, np.random.default_rng(13), eq=linear)
    h = pulse_response(NOMINAL).cursors()
    combined = np.convolve(trained.rx_ffe[0], h)
    main = linear.ffe_pre + NOMINAL.n_pre
    assert combined[main] == pytest.approx(1.0, abs=0.1)
    isi = np.delete(combined, main)
    assert np.sum(np.abs(isi)) < 0.3 * np.sum(np.abs(np.delete(h, 2))) / h[2]


def test_ber_estimate_in_row_groups_is_the_whole_arrays_estimate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(12)
    sent = PAM4_LEVELS[rng.integers(0, 4, (1, 4, 300))]
    z = sent + rng.normal(0.0, 0.7, (3, 4, 300))
    whole = estimate_ber(z, sent)
    monkeypatch.setattr(equalizer, "_ESTIMATE_ELEMENTS", 2 * 300)
    grouped = estimate_ber(z, sent)
    assert grouped.ber.shape == (3, 4)
    decided = equalizer.slice_pam4(z)
    np.testing.assert_array_equal(grouped.bit_errors, count_bit_errors(decided, sent))
    np.testing.assert_array_equal(grouped.bit_errors, whole.bit_errors)
    np.testing.assert_array_equal(grouped.eye_snr_db, whole.eye_snr_db)
    np.testing.assert_array_equal(grouped.ber, whole.ber)
    assert set(grouped.method.ravel()) == {"counted"}


def test_level3_in_row_groups_draws_and_computes_as_one_piece(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run(rows: int) -> equalizer.Level3Outcome:
        monkeypatch.setattr(equalizer, "_ROWS_PER_GROUP", rows)
        return equalizer.level3_eq_detail(NOMINAL, np.random.default_rng(21), n_links=9)

    # 18 directions: whole, in groups of 4 (the last one short), and one by one.
    one_piece, grouped, single = run(1 << 30), run(4), run(1)
    for other in (grouped, single):
        assert other.records == one_piece.records
        np.testing.assert_array_equal(other.final_output, one_piece.final_output)


def test_the_estimate_of_blocks_is_the_estimate_of_the_joined_blocks() -> None:
    rng = np.random.default_rng(12)
    sent = [PAM4_LEVELS[rng.integers(0, 4, (40, n))] for n in (512, 512, 100)]
    out = [s + rng.normal(0.0, 0.45, s.shape) for s in sent]
    whole = estimate_ber(np.concatenate(out, axis=1), np.concatenate(sent, axis=1), 5)
    for got in (estimate_ber_of_blocks(out, sent, 5), estimate_ber_of_blocks(out[:1], sent[:1], 5)):
        assert got.ber.shape == (40,)
    got = estimate_ber_of_blocks(out, sent, 5)
    for field in ("ber", "bit_errors", "eye_snr_db", "mse", "method"):
        np.testing.assert_array_equal(getattr(got, field), getattr(whole, field))
    assert got.bits == whole.bits
    one = estimate_ber_of_blocks(out[:1], sent[:1], 5)
    np.testing.assert_array_equal(one.mse, estimate_ber(out[0], sent[0], 5).mse)
