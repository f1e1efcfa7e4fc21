"""PRBS generator and checker: known answers, an independent LFSR reference, structure."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sitssim.phy.prbs import POLYNOMIALS, PrbsChecker, prbs, prbs31

TAPS = {7: 6, 15: 14, 23: 18, 31: 28}


def reference_lfsr(order: int, tap: int, n_bits: int, seed: int) -> np.ndarray:
    """Plain bit-by-bit Fibonacci LFSR; register bit j holds the output j + 1 steps ago."""
    mask = (1 << order) - 1
    state = seed
    out = bytearray(n_bits)
    for i in range(n_bits):
        bit = ((state >> (order - 1)) ^ (state >> (tap - 1))) & 1
        state = ((state << 1) | bit) & mask
        out[i] = bit
    return np.frombuffer(bytes(out), dtype=np.uint8)


def hex_msb_first(bits: np.ndarray) -> str:
    return np.packbits(bits).tobytes().hex().upper()


def cyclic_runs(bits: np.ndarray) -> list[tuple[int, int]]:
    """(bit value, run length) for every run of one period read as a cycle."""
    start = int(np.flatnonzero(bits != bits[-1])[0])
    rotated = np.roll(bits, -start)
    edges = np.flatnonzero(np.diff(rotated)) + 1
    bounds = np.concatenate(([0], edges, [rotated.size]))
    return [(int(rotated[a]), int(b - a)) for a, b in itertools.pairwise(bounds)]


def test_polynomials_are_the_o150_ones() -> None:
    assert {o: p.tap for o, p in POLYNOMIALS.items()} == TAPS


def test_prbs31_known_answer() -> None:
    assert hex_msb_first(prbs31(64)) == "0000000E000000FC"


def test_prbs31_inverted_known_answer() -> None:
    assert hex_msb_first(prbs31(64, invert=True)) == "FFFFFFF1FFFFFF03"


def test_prbs31_matches_bit_by_bit_reference_over_a_million_bits() -> None:
    n = 1 << 20
    ref = reference_lfsr(31, 28, n, (1 << 31) - 1)
    np.testing.assert_array_equal(prbs31(n), ref)


@pytest.mark.parametrize("order", [7, 15, 23, 31])
@pytest.mark.parametrize("seed", [1, 0x5A, 0x7F])
def test_all_orders_match_reference_from_other_seeds(order: int, seed: int) -> None:
    n = 20_000
    np.testing.assert_array_equal(
        prbs(order, n, seed=seed), reference_lfsr(order, TAPS[order], n, seed)
    )


@pytest.mark.parametrize("order", [7, 15, 23, 31])
def test_invert_is_the_complement(order: int) -> None:
    np.testing.assert_array_equal(prbs(order, 5000, invert=True), 1 - prbs(order, 5000))


@pytest.mark.parametrize("order", [7, 15])
def test_period_is_maximal_and_every_nonzero_state_occurs(order: int) -> None:
    period = (1 << order) - 1
    bits = prbs(order, 2 * period + order)
    np.testing.assert_array_equal(bits[period:], bits[:-period])
    # The minimal period divides 2^n - 1, so ruling out each maximal proper divisor suffices.
    primes = [
        p for p in range(2, period + 1) if period % p == 0 and all(p % d for d in range(2, p))
    ]
    for p in primes:
        shift = period // p
        assert not np.array_equal(bits[shift : shift + period], bits[:period]), shift
    windows = np.lib.stride_tricks.sliding_window_view(bits[: period + order - 1], order)
    states = windows @ (1 << np.arange(order - 1, -1, -1))
    assert len(set(states.tolist())) == period
    assert 0 not in set(states.tolist())


@pytest.mark.parametrize("order", [7, 15])
def test_full_period_run_structure_is_that_of_an_m_sequence(order: int) -> None:
    runs = cyclic_runs(prbs(order, (1 << order) - 1))
    counts: dict[tuple[int, int], int] = {}
    for run in runs:
        counts[run] = counts.get(run, 0) + 1
    expected = {(v, k): 1 << (order - k - 2) for v in (0, 1) for k in range(1, order - 1)}
    expected[(0, order - 1)] = 1
    expected[(1, order)] = 1
    assert counts == expected


def test_seed_is_history_msb_oldest_first() -> None:
    seed = 0b1011001
    history = [int(c) for c in f"{seed:07b}"]
    full = np.concatenate((history, prbs(7, 300, seed=seed)))
    np.testing.assert_array_equal(full[7:], full[:-7] ^ full[1:-6])


def test_lengths_and_bad_input() -> None:
    assert prbs31(0).shape == (0,)
    assert prbs31(5).dtype == np.uint8
    with pytest.raises(ValueError, match="order"):
        prbs(9, 10)
    with pytest.raises(ValueError, match="seed"):
        prbs31(10, seed=0)
    with pytest.raises(ValueError, match="seed"):
        prbs(7, 10, seed=1 << 7)
    with pytest.raises(ValueError, match="n_bits"):
        prbs31(-1)
    with pytest.raises(ValueError, match="sync_bits"):
        PrbsChecker(31, sync_bits=30)


def test_checker_locks_on_the_first_bits_of_a_clean_stream() -> None:
    checker = PrbsChecker(31)
    assert checker.feed(prbs31(2048)) == 0
    assert checker.locked
    assert checker.lock_positions == (31 + checker.sync_bits,)
    assert checker.bits_checked == 2048 - checker.lock_positions[0]
    assert checker.ber == 0.0


def test_checker_counts_each_channel_error_once() -> None:
    bits = prbs31(4000)
    hits = [500, 528, 531, 1000, 1001, 3999]  # 528 and 531 sit on the taps of 500
    bits[hits] ^= 1
    checker = PrbsChecker(31)
    assert checker.feed(bits) == len(hits)
    assert checker.ber == pytest.approx(len(hits) / checker.bits_checked)


def test_error_in_seed_delays_lock_and_is_not_counted() -> None:
    bits = prbs31(3000)
    bits[[5, 2000]] ^= 1
    checker = PrbsChecker(31)
    checker.feed(bits)
    assert checker.lock_positions[0] >= 6 + 31 + checker.sync_bits
    assert checker.errors == 1


def test_chunking_does_not_change_the_result() -> None:
    rng = np.random.default_rng(7)
    bits = prbs31(6000)
    bits[rng.choice(np.arange(200, 6000), 40, replace=False)] ^= 1
    bits[3000:3150] = rng.integers(0, 2, 150)  # a burst dense enough to lose lock
    whole = PrbsChecker(31)
    whole.feed(bits)
    cuts = np.sort(rng.choice(np.arange(1, 6000), 60, replace=False))
    pieces = PrbsChecker(31)
    for chunk in np.split(bits, cuts):
        pieces.feed(chunk)
    assert len(whole.lock_positions) == 2
    assert (pieces.errors, pieces.bits_checked, pieces.lock_positions) == (
        whole.errors,
        whole.bits_checked,
        whole.lock_positions,
    )


def test_checker_relocks_after_a_slip_without_counting_the_slip() -> None:
    stream = np.concatenate((prbs31(3000), prbs31(3000, seed=0x1234567)))
    checker = PrbsChecker(31)
    assert checker.feed(stream) == 0
    first, second = checker.lock_positions
    assert first == 31 + checker.sync_bits
    assert 3000 < second <= 3000 + 31 + checker.sync_bits
    assert checker.bits_checked < stream.size - first


@pytest.mark.parametrize("order", [7, 15, 23, 31])
def test_checker_handles_every_order_and_inversion(order: int) -> None:
    bits = prbs(order, 3000, seed=0x55, invert=True)
    bits[[1500, 2500]] ^= 1
    checker = PrbsChecker(order, invert=True)
    assert checker.feed(bits) == 2
    uninverted = PrbsChecker(order)
    uninverted.feed(bits)
    assert not uninverted.locked and uninverted.errors == 0


def test_checker_refuses_other_patterns() -> None:
    prbs15_on_prbs31 = PrbsChecker(31)
    prbs15_on_prbs31.feed(prbs(15, 20_000))
    noise = PrbsChecker(31)
    noise.feed(np.random.default_rng(3).integers(0, 2, 20_000))
    assert not prbs15_on_prbs31.locked and prbs15_on_prbs31.bits_checked == 0
    assert not noise.locked and noise.bits_checked == 0


def test_checker_rejects_non_bits() -> None:
    with pytest.raises(ValueError, match="0 or 1"):
        PrbsChecker(31).feed(np.array([0, 1, 2]))
