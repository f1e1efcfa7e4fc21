"""TS1/TS2 ordered sets: the receiver's stamp checker, the cadence, the stamps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sitssim.fabric.clocks import DeviceClock
from sitssim.fabric.topology import Channel
from sitssim.link.flit import flit_time_ns
from sitssim.link.ordered_sets import (
    UnstampedSets,
    ordered_set_interval_ns,
    ordered_sets_table,
)
from sitssim.protocol.stamp_checker import CheckerState, Finding, StampChecker, check_directions


def _channel(cid: int, src: str, dst: str, lanes: int = 16, rate: float = 64.0) -> Channel:
    return Channel(
        id=cid,
        src=src,
        dst=dst,
        profile="default",
        rate_gts=rate,
        lanes=lanes,
        links=1,
        encoding="flit256",
        propagation_ns=5.0,
        bytes_per_ns=rate * lanes / 8,
    )


def _clocks(**ppm: float) -> dict[str, DeviceClock]:
    return {name: DeviceClock(name, 100.0 * i, [p]) for i, (name, p) in enumerate(ppm.items())}


# --- the checker -----------------------------------------------------------------


def test_checker_accepts_a_strictly_increasing_stamped_stream() -> None:
    checker = StampChecker()
    assert checker.state is CheckerState.AWAITING_FIRST
    findings = [checker.receive(s) for s in (1.0, 2.0, 2.5, 1e9)]
    assert findings == [Finding.OK] * 4
    assert checker.state is CheckerState.TRACKING
    assert checker.last_stamp == 1e9


@pytest.mark.parametrize("missing", [None, math.nan])
def test_a_set_without_a_stamp_is_flagged_and_keeps_the_reference(missing: float | None) -> None:
    checker = StampChecker()
    assert checker.receive(missing) is Finding.NO_STAMP
    assert checker.state is CheckerState.AWAITING_FIRST
    assert checker.receive(10.0) is Finding.OK
    assert checker.receive(missing) is Finding.NO_STAMP
    assert checker.last_stamp == 10.0
    # The next stamp is compared with the last stamp received, not with the gap.
    assert checker.receive(9.0) is Finding.NOT_MONOTONIC


def test_equal_stamps_are_not_strictly_monotonic() -> None:
    checker = StampChecker()
    assert [checker.receive(s) for s in (5.0, 5.0)] == [Finding.OK, Finding.NOT_MONOTONIC]


def test_one_backward_step_is_one_violation() -> None:
    """After a step back the new stamp is the reference, so the stream resumes cleanly."""
    stamps = [100.0, 200.0, 300.0, 50.0, 150.0, 250.0]
    findings = check_directions(["a>b"] * len(stamps), stamps)
    assert findings.count(Finding.NOT_MONOTONIC) == 1
    assert findings[3] is Finding.NOT_MONOTONIC


def test_directions_are_checked_independently() -> None:
    """Interleaved directions: each compares only with its own previous stamp."""
    directions = ["a>b", "b>a", "a>b", "b>a"]
    stamps = [1000.0, 5.0, 1001.0, 6.0]
    assert check_directions(directions, stamps) == [Finding.OK] * 4
    assert check_directions(["a>b"] * 4, stamps)[1] is Finding.NOT_MONOTONIC


# --- omissions ---------------------------------------------------------------------


def test_unstamped_at_hits_the_first_set_at_or_after_the_time() -> None:
    t = np.array([10.0, 20.0, 30.0, 40.0])
    assert np.flatnonzero(UnstampedSets(at_ns=20.0).mask(t)).tolist() == [1]
    assert np.flatnonzero(UnstampedSets(at_ns=21.0).mask(t)).tolist() == [2]
    assert not UnstampedSets(at_ns=41.0).mask(t).any()


def test_unstamped_every_hits_every_nth_set() -> None:
    t = np.arange(10, dtype=float)
    assert np.flatnonzero(UnstampedSets(every=3).mask(t)).tolist() == [2, 5, 8]
    assert UnstampedSets(every=1).mask(t).all()


# --- the table -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lanes", "rate", "flits"), [(16, 64.0, 740), (8, 64.0, 740), (16, 32.0, 74)]
)
def test_sets_go_out_at_the_flit_mode_cadence(lanes: int, rate: float, flits: int) -> None:
    ch = _channel(0, "a", "b", lanes=lanes, rate=rate)
    interval = ordered_set_interval_ns(ch, flits)
    assert interval == pytest.approx(flits * flit_time_ns(lanes, rate))
    table = ordered_sets_table([ch], _clocks(a=0.0, b=0.0), flits, 0.0, 50 * interval, seed=3)
    gaps = np.diff(table["t_true_ns"].to_numpy())
    np.testing.assert_allclose(gaps, interval, rtol=1e-12)
    assert table["t_true_ns"].iloc[0] < interval
    assert table["t_true_ns"].iloc[-1] < 50 * interval <= table["t_true_ns"].iloc[-1] + interval
    assert table["seq"].tolist() == list(range(len(table)))
    assert table["kind"].tolist() == ["TS1", "TS2"] * (len(table) // 2) + ["TS1"] * (len(table) % 2)


def test_each_stamp_is_the_senders_clock_within_the_phy_uncertainty() -> None:
    channels = [_channel(0, "a", "b"), _channel(1, "b", "a")]
    clocks = _clocks(a=250.0, b=-250.0)
    u = 2.0
    table = ordered_sets_table(channels, clocks, 740, u, 100_000.0, seed=1)
    for direction, sender in (("a>b", "a"), ("b>a", "b")):
        rows = table[table["direction"] == direction]
        error = rows["stamp_ns"].to_numpy() - clocks[sender].read_many(rows["t_true_ns"].to_numpy())
        assert np.abs(error).max() <= u
        # The uncertainty is really applied (not all zero) and spread over its range.
        assert error.std() > u / 4
    assert set(table["link"]) == {"a-b"}
    assert table["os_id"].tolist() == list(range(len(table)))


def test_only_the_faulty_direction_loses_its_stamps() -> None:
    channels = [_channel(0, "a", "b"), _channel(1, "b", "a")]
    omissions = {("a", "b"): [UnstampedSets(every=7)]}
    table = ordered_sets_table(channels, _clocks(a=0.0, b=0.0), 740, 1.0, 60_000.0, 2, omissions)
    missing = table[table["stamp_ns"].isna()]
    assert set(missing["direction"]) == {"a>b"}
    assert ((missing["seq"] + 1) % 7 == 0).all()
    assert len(missing) == (table["direction"] == "a>b").sum() // 7
