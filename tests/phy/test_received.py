"""Symbol stores of the training stream: per-row sums and sums over a shared sequence."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from sitssim.phy.channel import PAM4_LEVELS, ChannelProfile, pulse_response
from sitssim.phy.equalizer import PRESET_TABLE, EqProfile, level3_eq_detail
from sitssim.phy.received import SharedSymbolRows, SymbolRows, symbol_rows
from sitssim.phy.training_source import PrbsTrainingSource

CHANNEL = ChannelProfile(loss_db=9.0, snr_db=28.0, rj_rms_ui=0.02)


class _SharedLevels:
    """Rows reading one random level sequence from their own offsets, chunk by chunk."""

    def __init__(self, rng: np.random.Generator, batch: int) -> None:
        self.starts = rng.integers(0, 300, batch)
        self.starts -= self.starts.min()
        self._levels = PAM4_LEVELS[rng.integers(0, 4, 20_000)]
        self._at = 0

    def shared_rows(
        self, shape: tuple[int, int]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        n = shape[1]
        levels = self._levels[self._at : self._at + n + int(self.starts.max())]
        self._at += n
        return levels, self.starts

    def __call__(self, shape: tuple[int, int]) -> npt.NDArray[np.float64]:
        levels, starts = self.shared_rows(shape)
        return sliding_window_view(levels, shape[1])[starts]


def _taps(batch: int, phase_ui: float = 0.0) -> npt.NDArray[np.float64]:
    pulse = pulse_response(CHANNEL)
    phase = np.full(batch, phase_ui)
    return np.stack([pulse.cursors(phase), pulse.slope_cursors(phase)], axis=-1)


def test_a_shared_source_with_equal_taps_gets_the_shared_store_and_otherwise_the_row_store() -> (
    None
):
    source = _SharedLevels(np.random.default_rng(1), 6)
    taps = _taps(6)
    assert isinstance(symbol_rows(source, 6, taps, 2, 12), SharedSymbolRows)
    taps[3] = _taps(1, 0.1)[0]
    assert type(symbol_rows(source, 6, taps, 2, 12)) is SymbolRows
    assert type(symbol_rows(lambda shape: source(shape), 6, _taps(6), 2, 12)) is SymbolRows


def test_sums_over_the_shared_sequence_are_each_rows_own_sums_bit_for_bit() -> None:
    # Rows with different Tx presets, spans in several chunks, trimmed as the stream goes.
    batch, pre, post = 7, CHANNEL.n_pre, CHANNEL.n_post
    shared = SharedSymbolRows(
        _SharedLevels(np.random.default_rng(2), batch), batch, _taps(batch), pre, post
    )
    rows = SymbolRows(
        _SharedLevels(np.random.default_rng(2), batch), batch, _taps(batch), pre, post
    )
    presets = PRESET_TABLE[np.random.default_rng(3).integers(0, 11, batch)]
    lo = 0
    for hi in (700, 1250, 3000):
        for store in (shared, rows):
            store.extend(hi)
        np.testing.assert_array_equal(shared.rows(lo, hi), rows.rows(lo, hi))
        for tx in (presets, PRESET_TABLE[7]):
            got, expected = shared.sums(lo, hi, tx), rows.sums(lo, hi, tx)
            width = hi - lo - pre - post - 2
            for group, (a, b) in [(slice(0, 3), (0, width)), (slice(3, 7), (5, width - 40))]:
                for mine, theirs in zip(got(group, a, b), expected(group, a, b), strict=True):
                    assert mine.shape == (group.stop - group.start, b - a)
                    np.testing.assert_array_equal(mine, theirs)
        lo = hi - 300
        for store in (shared, rows):
            store.trim(lo)


@pytest.mark.parametrize(
    "eq",
    [EqProfile(), EqProfile(skip_phase3=True, initial_preset="Q1"), EqProfile(block_symbols=256)],
)
def test_level3_eq_on_a_prbs_source_is_the_same_whether_its_sums_are_shared_or_per_row(
    eq: EqProfile,
) -> None:
    def run(shared: bool) -> object:
        source = PrbsTrainingSource(31, np.random.default_rng(4), 10, eq.block_symbols - 16)
        plain = source if shared else (lambda shape: source(shape))
        return level3_eq_detail(CHANNEL, np.random.default_rng(5), 5, eq, symbol_source=plain)

    shared, per_row = run(True), run(False)
    assert shared.records == per_row.records
    np.testing.assert_array_equal(shared.final_output, per_row.final_output)
    np.testing.assert_array_equal(shared.final_sent, per_row.final_sent)
