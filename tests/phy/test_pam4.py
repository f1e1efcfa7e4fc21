"""PAM4 Gray mapping, slicing, precoding and rate constants."""

from __future__ import annotations

import numpy as np
import pytest

from sitssim.phy import pam4
from sitssim.phy.pam4 import (
    GRAY_MAP,
    SYMBOL_RATE_GBD,
    UI_PS,
    decode_precoded,
    demodulate,
    gray_decode,
    gray_encode,
    modulate,
    precode,
    slice_symbols,
    symbol_rate_gbd,
    to_levels,
    ui_ps,
)


def random_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2, n, dtype=np.uint8)


def test_rate_constants_follow_from_64_gtps() -> None:
    assert SYMBOL_RATE_GBD == 32.0
    assert UI_PS == 31.25
    assert symbol_rate_gbd(64) == 32.0
    assert ui_ps(64) == 31.25
    assert ui_ps(32) == 62.5
    for bad in (0, -64, float("nan")):
        with pytest.raises(ValueError, match="GT/s"):
            ui_ps(bad)


def test_gray_table_is_the_specified_one() -> None:
    bits = np.array([0, 0, 0, 1, 1, 1, 1, 0], dtype=np.uint8)
    np.testing.assert_array_equal(to_levels(gray_encode(bits)), [-3, -1, 1, 3])
    assert dict(GRAY_MAP) == {(0, 0): 0, (0, 1): 1, (1, 1): 2, (1, 0): 3}


def test_adjacent_levels_differ_in_exactly_one_bit() -> None:
    pairs = gray_decode(np.arange(4)).reshape(4, 2).astype(int)
    assert len({tuple(p) for p in pairs}) == 4
    np.testing.assert_array_equal(np.abs(np.diff(pairs, axis=0)).sum(axis=1), [1, 1, 1])


@pytest.mark.parametrize("precoding", [False, True])
def test_round_trip_through_levels_and_a_noisy_slicer(precoding: bool) -> None:
    rng = np.random.default_rng(11)
    bits = random_bits(rng, 20_000)
    levels = modulate(bits, precoding=precoding)
    assert set(np.unique(levels).tolist()) == {-3, -1, 1, 3}
    noisy = levels + rng.uniform(-0.99, 0.99, levels.size)
    np.testing.assert_array_equal(demodulate(noisy, precoding=precoding), bits)


def test_slicer_thresholds() -> None:
    samples = np.array([-9.0, -2.001, -2.0, -0.001, 0.0, 1.999, 2.0, 9.0])
    np.testing.assert_array_equal(slice_symbols(samples), [0, 0, 1, 1, 2, 2, 3, 3])


def test_slicer_decides_as_a_binary_search_of_the_thresholds() -> None:
    # Including -0.0 (on the threshold: up), infinities and NaN (sorted last: level 3).
    rng = np.random.default_rng(2)
    samples = np.concatenate(
        [rng.normal(0.0, 2.0, 4998), [-0.0, np.inf, -np.inf, np.nan, -2.0, 2.0, 5e-324]]
    ).reshape(-1, 7)
    got = slice_symbols(samples)
    expected = np.searchsorted([-2.0, 0.0, 2.0], samples, side="right")
    assert got.dtype == np.uint8 and got.shape == samples.shape
    np.testing.assert_array_equal(got, expected)
    assert slice_symbols(0.0) == 2 and slice_symbols(float("nan")) == 3


def test_adjacent_level_slicer_error_costs_one_bit() -> None:
    rng = np.random.default_rng(5)
    bits = random_bits(rng, 4000)
    levels = modulate(bits).astype(float)
    step = np.where(levels < 3, 2.0, -2.0)  # push every symbol onto a neighbouring level
    errors = demodulate(levels + step) ^ bits
    np.testing.assert_array_equal(errors.reshape(-1, 2).sum(axis=1), 1)


def test_precoder_obeys_its_recursion() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(0, 4, 500, dtype=np.uint8)
    for state in range(4):
        y = precode(x, state=state)
        prev = state
        for xn, yn in zip(x, y, strict=True):
            assert int(yn) == (int(xn) - int(prev)) % 4
            prev = yn
        np.testing.assert_array_equal(decode_precoded(y, state=state), x)


def test_precoding_continues_across_calls() -> None:
    x = np.random.default_rng(4).integers(0, 4, 301, dtype=np.uint8)
    first = precode(x[:150])
    second = precode(x[150:], state=int(first[-1]))
    np.testing.assert_array_equal(np.concatenate((first, second)), precode(x))


@pytest.mark.parametrize("burst", [1, 2, 7, 40])
def test_precoding_turns_an_alternating_error_burst_into_two_errors(burst: int) -> None:
    rng = np.random.default_rng(burst)
    x = rng.integers(0, 4, 200, dtype=np.uint8)
    y = precode(x).astype(np.int64)
    start = 50
    # A DFE error: one wrong decision, then feedback that errs the other way, and so on.
    signs = (-1) ** np.arange(burst)
    received = y.copy()
    received[start : start + burst] = (received[start : start + burst] + signs) % 4
    wrong = np.flatnonzero(decode_precoded(received) != x)
    np.testing.assert_array_equal(wrong, [start, start + burst])


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="even"):
        gray_encode([0, 1, 1])
    with pytest.raises(ValueError, match="0 or 1"):
        gray_encode([0, 2])
    with pytest.raises(ValueError, match=r"0\.\.3"):
        to_levels([4])
    with pytest.raises(ValueError, match="state"):
        precode([0, 1], state=4)


def test_levels_are_read_only() -> None:
    with pytest.raises(ValueError):
        pam4.LEVELS[0] = 0
