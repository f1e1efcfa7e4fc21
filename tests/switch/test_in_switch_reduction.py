"""The in-switch reduction core: a piece is summed once every GPU has contributed."""

from __future__ import annotations

import pytest

from sitssim.switch.in_switch_reduction import InSwitchReduction


def test_the_sum_is_ready_only_at_the_last_contribution_and_holds_every_mask() -> None:
    r = InSwitchReduction(3)
    assert r.contribute("a", 0b001, 100, 0.0) is None
    assert r.contribute("b", 0b001, 100, 1.0) is None
    assert r.contribute("a", 0b100, 100, 2.0) is None
    assert r.held_bytes == 300
    assert r.contribute("a", 0b010, 100, 3.0) == (3.0, 0b111)
    assert r.held_bytes == 100 and r.peak_held_bytes == 400


def test_pieces_wait_for_the_one_reduction_engine() -> None:
    r = InSwitchReduction(2, bytes_per_ns=10.0)
    r.contribute(1, 0b01, 500, 0.0)
    assert r.contribute(1, 0b10, 500, 0.0) == (100.0, 0b11)
    r.contribute(2, 0b01, 500, 10.0)
    # The engine is busy with piece 1 until 100 ns.
    assert r.contribute(2, 0b10, 500, 20.0) == (200.0, 0b11)


def test_a_contribution_arriving_twice_is_a_bug_not_a_sum() -> None:
    r = InSwitchReduction(3)
    r.contribute("a", 0b01, 8, 0.0)
    with pytest.raises(ValueError, match="twice"):
        r.contribute("a", 0b01, 8, 1.0)
