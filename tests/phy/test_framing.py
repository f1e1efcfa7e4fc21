"""Training sets on the wire: the transmitters' framed PRBS, the receiver's framer and checker.

The expected streams are built here from the PRBS generator and the marker alone, set by
set, so the source, the framer and the checks are each held to a plain construction.
"""

from __future__ import annotations

import numpy as np
import pytest

from sitssim.phy.framing import MARKER, MARKER_SYMBOLS, frame_rows, payload
from sitssim.phy.pam4 import gray_decode, gray_encode
from sitssim.phy.prbs import prbs
from sitssim.phy.sequence_check import check_decisions
from sitssim.phy.training_source import PrbsTrainingSource


def framed_stream(order: int, sequence: int, sets: int, skip: int = 0) -> np.ndarray:
    """Level indices of ``sets`` training sets (marker, then ``sequence`` PRBS symbols, the
    PRBS running on across sets), the first ``skip`` symbols dropped."""
    symbols = gray_encode(prbs(order, 2 * sequence * sets))
    parts = []
    for k in range(sets):
        parts += [MARKER, symbols[k * sequence : (k + 1) * sequence]]
    return np.concatenate(parts)[skip:]


def test_the_source_sends_each_transmitters_framed_prbs_from_its_own_phase() -> None:
    source = PrbsTrainingSource(31, np.random.default_rng(4), 3, 512)
    levels = np.concatenate([source((3, n)) for n in (5, 528, 37, 2000)], axis=1)
    decided = ((levels + 3) / 2).astype(np.uint8)
    period = 512 + MARKER_SYMBOLS
    sets = int(source.offsets.max()) // period + decided.shape[1] // period + 2
    stream = framed_stream(31, 512, sets)
    assert len(set(source.offsets)) == 3
    for row, offset in enumerate(source.offsets):
        np.testing.assert_array_equal(decided[row], stream[offset : offset + decided.shape[1]])


@pytest.mark.parametrize("sequence", [16, 256, 512, 1024])
@pytest.mark.parametrize("skip", [0, 7, 300])
def test_the_framer_observes_the_set_length_from_the_markers(sequence: int, skip: int) -> None:
    sets = 8 + skip // (sequence + MARKER_SYMBOLS) + 1
    row = framed_stream(31, sequence, sets, skip)
    (framing,) = frame_rows(row[None, :])
    assert framing.locked and framing.sequence_symbols == sequence
    assert framing.period == sequence + MARKER_SYMBOLS
    # With the markers cut out, the row is the PRBS as it was sent, from wherever the
    # row begins.
    bits = gray_decode(payload(row, framing))
    reference = prbs(31, 2 * sequence * sets)
    np.testing.assert_array_equal(bits, reference[reference.size - bits.size :])


def test_a_marker_lost_to_a_symbol_error_leaves_the_lattice_alone() -> None:
    row = framed_stream(31, 512, 8, 100).copy()
    second = int(
        np.flatnonzero(
            np.all(np.lib.stride_tricks.sliding_window_view(row, MARKER_SYMBOLS) == MARKER, axis=1)
        )[1]
    )
    row[second + 3] = 1
    (framing,) = frame_rows(row[None, :])
    assert framing.sequence_symbols == 512
    assert framing.markers == 7 - 1


def test_without_markers_the_framer_does_not_lock() -> None:
    rng = np.random.default_rng(3)
    rows = np.stack([gray_encode(prbs(31, 2 * 4096)), rng.integers(0, 4, 4096).astype(np.uint8)])
    assert [f.locked for f in frame_rows(rows)] == [False, False]
    # Two markers give one spacing: not enough to lock.
    two = framed_stream(31, 512, 2)[None, :]
    assert not frame_rows(two)[0].locked


def test_the_checks_read_length_and_order_off_the_symbols() -> None:
    rows = np.stack(
        [
            framed_stream(31, 512, 8, 40)[:4000],
            framed_stream(31, 256, 16, 40)[:4000],
            framed_stream(15, 512, 8, 40)[:4000],
            gray_encode(prbs(31, 8000)),
        ]
    )
    errored = rows[0].copy()
    # One step of one level is one bit error under Gray coding; none falls in a marker.
    sequence_positions = [p for p in (900, 2100, 3333) if (p + 40) % 528 >= MARKER_SYMBOLS]
    errored[sequence_positions] = np.where(
        errored[sequence_positions] < 3, errored[sequence_positions] + 1, 2
    )
    spec, short, prbs15, unframed, with_errors = check_decisions(np.vstack([rows, errored]))
    assert (spec.framed, spec.symbols_per_set, spec.detected_order) == (True, 512, 31)
    assert spec.locked and spec.locks == 1 and spec.errors == 0
    assert spec.sets == 7
    assert (short.framed, short.symbols_per_set, short.detected_order) == (True, 256, 31)
    assert (prbs15.symbols_per_set, prbs15.detected_order) == (512, 15) and not prbs15.locked
    assert (unframed.framed, unframed.symbols_per_set) == (False, 0)
    assert with_errors.errors == len(sequence_positions) and with_errors.detected_order == 31
