"""The timestamp and skew judges on hand-built tables: ``link.ts_injection`` on the ordered
sets as received (every set stamped, each stamp above the last on its direction) and
``fabric.skew_budget`` on fence arrivals against 85 + (n - 1)·12.5 + 42 ns for n GPUs.
"""

from __future__ import annotations

import math

import pytest
from spec.judge_tables import figures, judge, not_applicable, shown, table

from sitssim.spec.clock_clauses import max_allowed_skew

NO_CLOCKS = "no clocks modelled: add a 'clocks:' section to the scenario"

# --- link.ts_injection ----------------------------------------------------------------

SETS = ("os_id", "channel", "direction", "seq", "stamp_ns", "t_true_ns")


def _sets(rows: list[tuple]) -> dict:
    return {"ordered_sets": table(SETS, rows)}


# Two directions, recorded out of order: a>b's stamps step by 10, 4 and 6 ns, b>a's by 3.
SENT = [
    (12, 0, "a>b", 2, 114.0, 14.0),
    (10, 0, "a>b", 0, 100.0, 0.0),
    (20, 1, "b>a", 0, 50.0, 1.0),
    (11, 0, "a>b", 1, 110.0, 10.0),
    (13, 0, "a>b", 3, 120.0, 20.0),
    (21, 1, "b>a", 1, 53.0, 4.0),
]


def test_ts_injection_passes_and_shows_the_smallest_increment() -> None:
    verdict = judge("link.ts_injection", **_sets(SENT))
    assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "sets", "measured")
    assert shown(verdict) == [("ordered_sets", [21], 1)]
    assert verdict.detail == (
        "6 ordered sets (TS1/TS2) on 2 link directions, every one stamped and above the "
        "previous stamp; smallest increment 3.0 ns (b>a seq 1)"
    )


def test_a_direction_with_one_set_has_no_increment_to_show() -> None:
    verdict = judge("link.ts_injection", **_sets([(10, 0, "a>b", 0, 100.0, 0.0)]))
    assert (verdict.verdict, shown(verdict)) == ("pass", [("ordered_sets", [], 0)])


@pytest.mark.parametrize(
    ("stamp", "missing", "backwards"),
    [(math.nan, 1, 0), (110.0, 0, 1), (109.0, 0, 1)],
)
def test_a_set_unstamped_or_not_above_the_last_fails(
    stamp: float, missing: int, backwards: int
) -> None:
    """a>b seq 2 (id 12) carries ``stamp`` after 110 ns: none, equal, or below."""
    rows = [r if r[0] != 12 else (*r[:4], stamp, r[5]) for r in SENT]
    verdict = judge("link.ts_injection", **_sets(rows))
    assert figures(verdict) == ("fail", 1.0, "<=", 0.0, "sets", "measured")
    assert shown(verdict) == [("ordered_sets", [12], 1)]
    assert verdict.detail == (
        f"6 ordered sets (TS1/TS2) on 2 link directions: {missing} without a stamp, "
        f"{backwards} stamped at or below the previous stamp; first: a>b seq 2 at 14.0 ns"
    )


def test_the_first_bad_set_named_is_the_earliest_sent() -> None:
    rows = [
        (10, 0, "a>b", 0, math.nan, 30.0),
        (11, 0, "a>b", 1, 100.0, 40.0),
        (20, 1, "b>a", 0, 50.0, 1.0),
        (21, 1, "b>a", 1, 40.0, 5.0),
    ]
    verdict = judge("link.ts_injection", **_sets(rows))
    assert (verdict.measured, shown(verdict)) == (2.0, [("ordered_sets", [10, 21], 2)])
    assert verdict.detail.endswith("first: b>a seq 1 at 5.0 ns")


def test_of_sets_sent_at_once_the_first_direction_s_is_named() -> None:
    """A sender that stamps nothing, on three directions; b>a and c>a send first, at once."""
    sent = {
        "a>b": [13, 14, 19, 20, 24, 27, 28, 29],
        "b>a": [0, 20, 22],
        "c>a": [0, 2, 3, 9, 17, 21, 25],
    }
    rows = [
        (100 * ch + seq, ch, direction, seq, math.nan, float(t))
        for ch, (direction, times) in enumerate(sent.items())
        for seq, t in enumerate(times)
    ]
    verdict = judge("link.ts_injection", **_sets(rows))
    assert verdict.measured == 18.0
    assert verdict.detail.endswith(
        "18 without a stamp, 0 stamped at or below the previous stamp; first: b>a seq 0 at 0.0 ns"
    )


def test_ts_injection_without_sets_is_not_applicable() -> None:
    assert not_applicable(judge("link.ts_injection"), NO_CLOCKS)
    assert not_applicable(judge("link.ts_injection", **_sets([])), "no ordered set was sent")


# --- fabric.skew_budget ---------------------------------------------------------------


@pytest.mark.parametrize(("n", "budget"), [(1, 127.0), (2, 139.5), (4, 164.5), (8, 214.5)])
def test_the_skew_budget_grows_by_12_5_ns_a_gpu(n: int, budget: float) -> None:
    assert max_allowed_skew(n) == budget


def test_the_skew_budget_needs_a_gpu() -> None:
    with pytest.raises(ValueError, match="at least one GPU, got 0"):
        max_allowed_skew(0)


FENCES = ("arrival_id", "fence", "gpu", "t_arrive_local_ns", "residual_ns")


def _fences(*fences: list[tuple[float, float]], gpus: int = 4, messages=None) -> dict:
    """Fence k's arrivals as (local arrival time, residual offset), one GPU each, ids 10k.."""
    rows = [
        (10 * k + i, k, f"gpu{i}", t, residual)
        for k, arrivals in enumerate(fences)
        for i, (t, residual) in enumerate(arrivals)
    ]
    nodes = table(("kind",), [("gpu",)] * gpus + [("switch",), ("root_complex",)])
    tables = {"fences": table(FENCES, rows), "nodes": nodes}
    if messages is not None:
        tables["messages"] = table(("kind", "hops"), messages)
    return tables


# 4 GPUs: 164.5 ns. Fence 1 spreads 160.5 ns with a worst residual of 4 ns: exactly the budget.
WITHIN = [(100.0, 1.0), (150.0, -3.0), (180.0, 2.0), (200.0, 0.0)]
AT_BUDGET = [(0.0, 0.0), (10.0, -4.0), (20.0, 3.0), (160.5, 1.0)]
PARTIAL = [(0.0, 0.0), (900.0, 0.0), (50.0, 0.0)]  # reached three GPUs only


def test_a_skew_at_the_budget_passes_and_shows_the_worst_fence() -> None:
    verdict = judge("fabric.skew_budget", **_fences(WITHIN, AT_BUDGET, PARTIAL))
    assert figures(verdict) == ("pass", 164.5, "<=", 164.5, "ns", "measured")
    assert shown(verdict) == [("fences", [10, 11, 12, 13], 4)]
    assert "n = 4 GPUs, fences cross up to 0 hops" in verdict.detail
    assert "worst of 2 fences: #1 spread 160.5 ns + residual offset 4.0 ns" in verdict.detail
    assert verdict.detail.endswith("0 fences over budget")


def test_a_skew_past_the_budget_fails_and_shows_every_fence_over() -> None:
    over = [(0.0, 0.0), (10.0, -4.5), (20.0, 3.0), (160.5, 1.0)]
    verdict = judge("fabric.skew_budget", **_fences(over, WITHIN, AT_BUDGET, over))
    assert figures(verdict) == ("fail", 165.0, "<=", 164.5, "ns", "measured")
    assert shown(verdict) == [("fences", [0, 1, 2, 3, 30, 31, 32, 33], 8)]
    assert verdict.detail.endswith("2 fences over budget")


def test_of_fences_as_skewed_the_first_is_shown() -> None:
    """Fences 5 and 2 (recorded in that order) are as skewed: fence 2 comes first."""
    rows = [
        (10 * fence + i, fence, f"gpu{i}", t, residual)
        for fence in (5, 2)
        for i, (t, residual) in enumerate(WITHIN)
    ]
    nodes = table(("kind",), [("gpu",)] * 4)
    verdict = judge("fabric.skew_budget", fences=table(FENCES, rows), nodes=nodes)
    assert (verdict.measured, shown(verdict)) == (103.0, [("fences", [20, 21, 22, 23], 4)])


def test_the_budget_follows_the_gpu_count() -> None:
    """The same fences with 5 GPUs configured: none reached them all."""
    verdict = judge("fabric.skew_budget", **_fences(WITHIN, gpus=5))
    assert not_applicable(verdict, "no fence reached all 5 GPUs")
    three = judge("fabric.skew_budget", **_fences(PARTIAL, gpus=3))
    assert figures(three) == ("fail", 900.0, "<=", 152.0, "ns", "measured")


def test_the_hops_fences_cross_are_told() -> None:
    messages = [("fence", 3), ("write", 9), ("fence", 5), ("fence", 1)]
    verdict = judge("fabric.skew_budget", **_fences(WITHIN, messages=messages))
    assert "fences cross up to 5 hops" in verdict.detail
    unfenced = judge("fabric.skew_budget", **_fences(WITHIN, messages=[("write", 9)]))
    assert "fences cross up to 0 hops" in unfenced.detail


def test_skew_budget_without_fences_is_not_applicable() -> None:
    nodes = table(("kind",), [("gpu",)])
    assert not_applicable(judge("fabric.skew_budget", nodes=nodes), NO_CLOCKS)
    assert not_applicable(
        judge("fabric.skew_budget", fences=table(FENCES, []), nodes=nodes),
        "no fence was issued before the end of the traffic phase",
    )
