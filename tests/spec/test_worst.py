"""The shared "worst row against the limit" verdict, on hand-made tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sitssim.spec.clause import Clause, Limit
from sitssim.spec.worst import Worst, worst_row_verdict, worst_rows


def _clause(limit: Limit) -> Clause:
    return Clause("fabric.test", "L3", "§0", "a test clause", limits={"x": limit})


def _verdict(limit: Limit, values: list[float], **kwargs):
    rows = pd.DataFrame({"row_id": range(10, 10 + len(values)), "x": values})

    def detail(judged: Worst) -> str:
        return f"worst {judged.measured:g}, {len(judged.over)} over"

    return worst_row_verdict(
        _clause(limit),
        "x",
        rows,
        "x",
        table="t",
        ids="row_id",
        detail=detail,
        empty="none",
        **kwargs,
    )


def test_pass_measures_the_worst_row_and_shows_it() -> None:
    verdict = _verdict(Limit("<=", "ns", 5.0), [1.0, 4.0, 3.0])
    assert (verdict.verdict, verdict.measured, verdict.limit) == ("pass", 4.0, 5.0)
    assert (verdict.op, verdict.unit, verdict.basis) == ("<=", "ns", "measured")
    assert verdict.evidence[0].table == "t" and verdict.evidence[0].rows == (11,)
    assert verdict.detail == "worst 4, 0 over"


def test_fail_shows_every_row_over_the_limit_in_table_order() -> None:
    verdict = _verdict(Limit("<=", "ns", 5.0), [6.0, 1.0, 9.0, 5.0])
    assert (verdict.verdict, verdict.measured) == ("fail", 9.0)
    assert verdict.evidence[0].rows == (10, 12)
    assert verdict.detail == "worst 9, 2 over"


def test_a_value_at_a_strict_limit_breaks_it() -> None:
    verdict = _verdict(Limit("<", "ns", 1.2), [1.1, 1.2])
    assert verdict.verdict == "fail" and verdict.evidence[0].rows == (11,)


def test_for_a_lower_bound_the_worst_row_is_the_smallest() -> None:
    verdict = _verdict(Limit(">", "cycles", 8.5), [9.0, 8.75, 10.0])
    assert (verdict.verdict, verdict.measured, verdict.op) == ("pass", 8.75, ">")
    assert verdict.evidence[0].rows == (11,)
    failing = _verdict(Limit(">", "cycles", 8.5), [9.0, 8.5, 7.0])
    assert failing.verdict == "fail" and failing.evidence[0].rows == (11, 12)
    assert failing.measured == 7.0


def test_for_an_equality_the_worst_row_is_the_farthest() -> None:
    verdict = _verdict(Limit("==", "GBd", 32.0), [32.0, 31.0, 34.0])
    assert (verdict.verdict, verdict.measured) == ("fail", 34.0)
    assert verdict.evidence[0].rows == (11, 12)


def test_no_rows_is_not_applicable_with_the_reason() -> None:
    verdict = _verdict(Limit("<=", "ns", 5.0), [])
    assert (verdict.verdict, verdict.detail, verdict.evidence) == ("n/a", "none", ())


def test_ties_are_shown_only_when_asked() -> None:
    assert _verdict(Limit("<=", "hops", 7.0), [4.0, 2.0, 4.0]).evidence[0].rows == (10,)
    tied = _verdict(Limit("<=", "hops", 7.0), [4.0, 2.0, 4.0], show_ties=True)
    assert tied.evidence[0].rows == (10, 12) and tied.evidence[0].total == 2


def test_a_formula_s_limit_comes_from_the_run() -> None:
    verdict = _verdict(Limit("<=", "ns"), [100.0, 150.0], value=127.0)
    assert (verdict.verdict, verdict.limit) == ("fail", 127.0)
    with pytest.raises(ValueError, match="formula"):
        _verdict(Limit("<=", "ns"), [100.0])


def test_a_missing_value_breaks_no_inequality_and_a_missing_id_is_left_out() -> None:
    rows = pd.DataFrame({"id": [1.0, math.nan, 3.0], "x": [math.inf, math.inf, math.nan]})
    judged = worst_rows(rows, "x", Limit("<=", "µs", 200.0))
    assert list(judged.over.index) == [0, 1]
    assert judged.worst.name == 0
    verdict = worst_row_verdict(
        _clause(Limit("<=", "µs", 200.0)),
        "x",
        rows,
        "x",
        table="t",
        ids="id",
        detail=lambda _: "",
        empty="none",
    )
    assert verdict.evidence[0].rows == (1,) and verdict.evidence[0].total == 1
