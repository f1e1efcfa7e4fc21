"""A verdict of several parts (``Clause.part``, ``Clause.verdict_on_parts``): each part is
judged by its own limit, the verdict fails if any part does and leads with the first
failing part, and only such a verdict prints ``parts`` in report.json."""

from __future__ import annotations

import pytest

from sitssim.spec.catalogue import CLAUSES
from sitssim.spec.clause import Clause, Limit

CLAUSE = Clause(
    "test.two_parts",
    "L2",
    "§0",
    "Loses nothing, and is deep enough.",
    limits={"lost": Limit("<=", "words", 0.0), "depth": Limit(">=", "entries")},
)


def _parts(lost: float, depth: float, formula: float):
    return (
        CLAUSE.part("lost", measured=lost, basis="measured"),
        CLAUSE.part("depth", measured=depth, value=formula, basis="configured"),
    )


@pytest.mark.parametrize(
    ("lost", "depth", "verdict", "head"),
    [
        (0, 218, "pass", ("lost", 0.0, "measured")),
        (0, 215, "fail", ("depth", 215.0, "configured")),
        (5, 218, "fail", ("lost", 5.0, "measured")),
        (5, 192, "fail", ("lost", 5.0, "measured")),
    ],
)
def test_the_verdict_leads_with_the_first_failing_part(
    lost: float, depth: float, verdict: str, head: tuple[str, float, str]
) -> None:
    parts = _parts(lost, depth, 218.0)
    judged = CLAUSE.verdict_on_parts(parts, detail="d")
    assert judged.verdict == verdict
    (shown,) = [p for p in parts if p.name == head[0]]
    assert (shown.name, judged.measured, judged.basis) == head
    assert (judged.limit, judged.op, judged.unit) == (shown.limit, shown.op, shown.unit)
    assert [p.verdict for p in parts] == [
        "fail" if lost > 0 else "pass",
        "fail" if depth < 218 else "pass",
    ]


def test_a_part_takes_its_limit_from_the_catalogue() -> None:
    part = CLAUSE.part("depth", measured=217, value=218, basis="configured", name="depth_ss")
    assert (part.name, part.op, part.limit, part.unit, part.verdict) == (
        "depth_ss",
        ">=",
        218.0,
        "entries",
        "fail",
    )
    with pytest.raises(ValueError, match="formula"):
        CLAUSE.part("depth", measured=217, basis="configured")
    with pytest.raises(ValueError, match="at least one part"):
        CLAUSE.verdict_on_parts([])


def test_only_a_verdict_of_parts_prints_them() -> None:
    with_parts = CLAUSE.verdict_on_parts(_parts(0, 218, 218.0)).to_dict()
    assert [p["name"] for p in with_parts["parts"]] == ["lost", "depth"]
    assert list(with_parts) == [
        "id",
        "layer",
        "verdict",
        "measured",
        "op",
        "limit",
        "unit",
        "basis",
        "parts",
        "evidence",
        "detail",
    ]
    plain = CLAUSES["fabric.hop_limit"].verdict_on("hops", "pass", measured=4.0).to_dict()
    assert "parts" not in plain
