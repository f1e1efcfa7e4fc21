"""Unit tests for sitssim.link.flit: layout, efficiency, FEC failure model, failed-flit draws."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from sitssim.link.flit import (
    PCIE6_FLIT,
    BurstModel,
    FlitLayout,
    draw_failed_flits,
    flit_error_rates,
    flit_time_ns,
    flits_for_message,
    payload_efficiency,
)


def test_pcie6_layout_adds_up_to_256_bytes_with_one_correctable_byte_per_group() -> None:
    assert PCIE6_FLIT.total_bytes == 256
    assert PCIE6_FLIT.correctable_bytes_per_group == 1
    groups = PCIE6_FLIT.group_of_byte()
    assert groups[:6].tolist() == [0, 1, 2, 0, 1, 2]
    assert np.bincount(groups).tolist() == [86, 85, 85]


def test_payload_efficiency_follows_the_layout() -> None:
    assert payload_efficiency() == pytest.approx(236 / 256)
    wider_ecc = FlitLayout(ecc_bytes=12)
    assert payload_efficiency(wider_ecc) == pytest.approx(236 / 262)
    assert wider_ecc.correctable_bytes_per_group == 2


def test_flits_for_message_rounds_up_to_whole_flits() -> None:
    assert flits_for_message(0) == 0
    assert flits_for_message(1) == 1
    assert flits_for_message(236) == 1
    assert flits_for_message(237) == 2
    assert flits_for_message(236 * 7) == 7
    with pytest.raises(ValueError):
        flits_for_message(-1)


def test_flit_time_at_64_gt_s_x16() -> None:
    assert flit_time_ns(16, 64.0) == pytest.approx(256 * 8 / (16 * 64.0))
    assert flit_time_ns(4, 64.0) == pytest.approx(4 * flit_time_ns(16, 64.0))


def test_at_ber_zero_nothing_fails_and_throughput_equals_layout_efficiency() -> None:
    rates = flit_error_rates(0.0)
    assert float(rates.p_fec_fail) == 0.0
    assert float(rates.p_corrected) == 0.0
    assert float(rates.p_replay) == 0.0
    rng = np.random.default_rng(1)
    message_bytes = 236 * 50
    n_flits = flits_for_message(message_bytes)
    failed = draw_failed_flits(rng, n_flits, float(rates.p_replay))
    wire_bytes = (n_flits + failed.size) * PCIE6_FLIT.total_bytes
    assert message_bytes / wire_bytes == pytest.approx(payload_efficiency())


def test_independent_errors_match_the_binomial_closed_form() -> None:
    ber = np.array([1e-7, 1e-5, 1e-3])
    rates = flit_error_rates(ber, BurstModel(p_propagate=0.0))
    p_byte = 1.0 - (1.0 - ber) ** 8
    group_sizes = np.bincount(PCIE6_FLIT.group_of_byte())
    p_all_groups_ok = np.prod([binom.cdf(1, n, p_byte) for n in group_sizes], axis=0)
    p_no_error = (1.0 - p_byte) ** PCIE6_FLIT.total_bytes
    np.testing.assert_allclose(rates.p_fec_fail, 1.0 - p_all_groups_ok, rtol=1e-6)
    np.testing.assert_allclose(rates.p_corrected, p_all_groups_ok - p_no_error, rtol=1e-6)


def test_independent_errors_do_not_depend_on_link_width() -> None:
    x16 = flit_error_rates(1e-5, BurstModel(p_propagate=0.0, lanes=16))
    x1 = flit_error_rates(1e-5, BurstModel(p_propagate=0.0, lanes=1))
    assert float(x16.p_fec_fail) == pytest.approx(float(x1.p_fec_fail), rel=1e-9)


def _monte_carlo_fail_rate(
    rng: np.random.Generator, ber: float, burst: BurstModel, n_flits: int
) -> float:
    """Straight simulation of the symbol-level burst chain on every lane."""
    per_lane = PCIE6_FLIT.total_bytes // burst.lanes * burst.symbols_per_byte
    q = 1.0 - (1.0 - ber) ** burst.bits_per_symbol
    rho = burst.p_propagate
    stationary = q / ((1.0 - rho) * (1.0 - q) + q)
    err = np.empty((n_flits, burst.lanes, per_lane), dtype=bool)
    err[..., 0] = rng.random((n_flits, burst.lanes)) < stationary
    for t in range(1, per_lane):
        u = rng.random((n_flits, burst.lanes))
        err[..., t] = np.where(err[..., t - 1], u < rho + (1.0 - rho) * q, u < q)
    byte_err = err.reshape(n_flits, burst.lanes, -1, burst.symbols_per_byte).any(axis=-1)
    lane_bytes = byte_err.shape[-1]
    flit_byte = np.arange(burst.lanes)[:, None] + burst.lanes * np.arange(lane_bytes)[None, :]
    group = flit_byte % PCIE6_FLIT.ecc_groups
    counts = np.stack([(byte_err & (group == g)).sum(axis=(1, 2)) for g in range(3)], axis=1)
    return float((counts >= 2).any(axis=1).mean())


def test_burst_model_matches_a_direct_simulation() -> None:
    burst = BurstModel(p_propagate=0.6, lanes=16)
    ber = 5e-4
    n = 16_000
    simulated = _monte_carlo_fail_rate(np.random.default_rng(7), ber, burst, n)
    predicted = float(flit_error_rates(ber, burst).p_fec_fail)
    sigma = np.sqrt(predicted * (1.0 - predicted) / n)
    assert abs(simulated - predicted) < 4.5 * sigma


def test_bursts_turn_the_quadratic_failure_law_linear() -> None:
    ber = np.array([1e-9, 1e-10])
    independent = flit_error_rates(ber, BurstModel(p_propagate=0.0)).p_fec_fail
    bursty = flit_error_rates(ber, BurstModel(p_propagate=0.7)).p_fec_fail
    # Pairs of independent byte errors: p_fail ~ ber^2. One long burst alone can put two
    # errors into one group: p_fail ~ ber.
    assert independent[0] / independent[1] == pytest.approx(100.0, rel=0.01)
    assert bursty[0] / bursty[1] == pytest.approx(10.0, rel=0.01)
    assert np.all(bursty > independent)


def test_failure_rate_grows_with_ber_and_with_burstiness() -> None:
    ber = np.logspace(-8, -4, 5)
    fails = [flit_error_rates(ber, BurstModel(p_propagate=p)).p_fec_fail for p in (0.0, 0.4, 0.8)]
    for f in fails:
        assert np.all(np.diff(f) > 0)
    assert np.all(fails[0] < fails[1]) and np.all(fails[1] < fails[2])


def test_crc_splits_failures_into_replays_and_escapes() -> None:
    rates = flit_error_rates([1e-6, 1e-4])
    np.testing.assert_allclose(rates.p_replay + rates.p_undetected, rates.p_fec_fail)
    np.testing.assert_allclose(rates.p_undetected, rates.p_fec_fail * 2.0**-64)


def test_rates_keep_the_shape_of_ber_and_match_scalar_calls() -> None:
    ber = np.array([[1e-8, 1e-6], [1e-5, 1e-4]])
    rates = flit_error_rates(ber)
    assert rates.p_replay.shape == (2, 2)
    assert float(rates.p_replay[1, 0]) == pytest.approx(float(flit_error_rates(1e-5).p_replay))


def test_invalid_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        flit_error_rates(-1e-6)
    with pytest.raises(ValueError):
        BurstModel(p_propagate=1.0)
    with pytest.raises(ValueError):
        FlitLayout(ecc_bytes=7)


def test_a_width_that_splits_the_flit_unevenly_is_modelled_not_refused() -> None:
    # x5 keeps consecutive lane bytes in different ECC groups: about the x4 rate. x3 puts
    # all of a lane's bytes in one group, so a two-byte burst defeats the FEC.
    x4, x5, x3 = (float(flit_error_rates(1e-6, BurstModel(lanes=n)).p_replay) for n in (4, 5, 3))
    assert x5 == pytest.approx(x4, rel=0.05)
    assert x3 > 50 * x4


def test_draw_failed_flits_is_seeded_sorted_and_distinct() -> None:
    a = draw_failed_flits(np.random.default_rng(3), 10_000, 0.01)
    b = draw_failed_flits(np.random.default_rng(3), 10_000, 0.01)
    np.testing.assert_array_equal(a, b)
    assert np.all(np.diff(a) > 0)
    assert a.min() >= 0 and a.max() < 10_000
    assert draw_failed_flits(np.random.default_rng(3), 5, 1.0).tolist() == [0, 1, 2, 3, 4]
    assert draw_failed_flits(np.random.default_rng(3), 0, 0.5).size == 0


def test_draw_failed_flits_count_is_binomial() -> None:
    rng = np.random.default_rng(11)
    n, p = 2_000, 0.05
    counts = np.array([draw_failed_flits(rng, n, p).size for _ in range(400)])
    assert counts.mean() == pytest.approx(n * p, rel=0.03)
    assert counts.var() == pytest.approx(n * p * (1 - p), rel=0.25)


def test_draw_failed_flits_refuses_bad_arguments() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        draw_failed_flits(rng, -1, 0.1)
    with pytest.raises(ValueError):
        draw_failed_flits(rng, 10, 1.5)
