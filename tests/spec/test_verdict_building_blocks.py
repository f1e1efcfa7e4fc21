"""The pieces every judge is built of, held to what they promise: a limit's worst value, the
catalogue's index, a verdict as report.json prints it, the registry's binding and its
flow-level n/a, and the conformance matrix's rows, each on data made here.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sitssim.spec import conformance
from sitssim.spec.catalogue import CATALOGUE, CLAUSES, _none_over, index
from sitssim.spec.clause import Clause, Limit
from sitssim.spec.conformance import BY_CLAUSE, Failure, MatrixRow
from sitssim.spec.context import RunContext
from sitssim.spec.registry import bind_judges, fidelity_of, judge_all
from sitssim.spec.verdict import Evidence, Part, Verdict, evidence
from sitssim.spec.worst import worst_rows

# --- limits ---------------------------------------------------------------------------

T, F = True, False


@pytest.mark.parametrize(
    ("limit", "values", "value", "worst"),
    [
        (Limit("<=", "ns", 5.0), [3.0, 7.0, 1.0], None, 1),
        (Limit("<", "ns", 5.0), [3.0, 7.0, 1.0], None, 1),
        (Limit(">=", "ns", 35.0), [50.0, 30.0, 40.0], None, 1),
        (Limit(">", "ns", 35.0), [50.0, 30.0, 40.0], None, 1),
        # The farthest either way from an equality, a constant's or a formula's.
        (Limit("==", "GBd", 32.0), [33.0, 30.0, 32.5], None, 1),
        (Limit("==", "GBd"), [33.0, 30.0, 32.5], 32.0, 1),
        (Limit("==", "GBd"), [33.0, 36.0, 32.5], 35.0, 2),
    ],
)
def test_the_worst_value_is_the_farthest_towards_or_past_the_limit(
    limit: Limit, values: list[float], value: float | None, worst: int
) -> None:
    assert int(limit.worst(values, value).argmax()) == worst
    rows = pd.DataFrame({"x": values}, index=[7, 8, 9])
    assert worst_rows(rows, "x", limit, value).worst.name == 7 + worst


def test_limits_hold_and_break_by_their_operator_and_a_missing_value_breaks_none() -> None:
    for op, holds in (("<=", [T, T, F]), ("<", [T, F, F]), (">=", [F, T, T]), (">", [F, F, T])):
        limit = Limit(op, "x", 2.0)
        assert [bool(limit.holds(v)) for v in (1.0, 2.0, 3.0)] == holds
        assert [bool(limit.breaks(v)) for v in (1.0, 2.0, 3.0)] == [not h for h in holds]
        assert not limit.breaks(math.nan) and not limit.holds(math.nan)
    assert [bool(Limit("==", "x", 2.0).breaks(v)) for v in (1.0, 2.0, 3.0)] == [T, F, T]


def test_a_formula_limit_takes_the_run_s_value() -> None:
    assert Limit(">=", "ns").holds(10.0, 10.0) and Limit(">=", "ns").breaks(9.0, 10.0)
    with pytest.raises(ValueError, match="is a formula of the run: pass its value"):
        Limit(">=", "ns").holds(10.0)
    with pytest.raises(ValueError, match="a constant limit takes no value from the judge"):
        Limit(">=", "ns", 1.0).breaks(10.0, 10.0)


# --- the catalogue --------------------------------------------------------------------


def test_a_count_clause_allows_none_of_what_it_counts() -> None:
    assert _none_over("frames") == {"count": Limit("<=", "frames", 0.0)}


def test_the_catalogue_is_indexed_by_id_in_its_order() -> None:
    indexed = index(CATALOGUE)
    assert list(indexed) == [c.id for c in CATALOGUE]
    assert all(indexed[c.id] is c for c in CATALOGUE)
    assert indexed == CLAUSES


# --- verdicts -------------------------------------------------------------------------


CLAUSE = Clause("link.test", "L2", "§0", "a test", limits={"x": Limit("<=", "ns", 5.0)})


def test_a_verdict_carries_its_clause_s_id_and_layer() -> None:
    made = CLAUSE.verdict_on("x", "pass", measured=4.0, basis="measured")
    assert (made.id, made.layer, made.limit, made.op, made.unit) == (
        "link.test",
        "L2",
        5.0,
        "<=",
        "ns",
    )
    assert CLAUSE.not_applicable("why") == Verdict("link.test", "L2", "n/a", detail="why")


def test_a_verdict_prints_as_report_json_holds_it() -> None:
    part = Part("x", "fail", 7.0, "<=", 5.0, "ns", "measured")
    verdict = Verdict(
        "link.test",
        "L2",
        "fail",
        measured=7.0,
        limit=5.0,
        unit="ns",
        basis="measured",
        evidence=(Evidence("cdc", (3, 4), 9),),
        detail="d",
        parts=(part,),
    )
    assert verdict.to_dict() == {
        "id": "link.test",
        "layer": "L2",
        "verdict": "fail",
        "measured": 7.0,
        "op": "<=",
        "limit": 5.0,
        "unit": "ns",
        "basis": "measured",
        "parts": [
            {
                "name": "x",
                "verdict": "fail",
                "measured": 7.0,
                "op": "<=",
                "limit": 5.0,
                "unit": "ns",
                "basis": "measured",
            }
        ],
        "evidence": [{"table": "cdc", "rows": [3, 4], "total": 9}],
        "detail": "d",
    }


def test_evidence_keeps_the_first_twenty_ids_and_counts_them_all() -> None:
    shown = evidence("t", range(100, 125))
    assert (shown.rows, shown.total) == (tuple(range(100, 120)), 25)


# --- the registry ---------------------------------------------------------------------


def test_a_bound_judge_is_handed_its_own_clause() -> None:
    clauses = {"link.test": CLAUSE}
    bound = bind_judges(clauses, [{"link.test": lambda clause, ctx: clause.not_applicable("")}])
    assert bound["link.test"](RunContext(tables={})).id == "link.test"


@pytest.mark.parametrize(
    ("config", "fidelity"),
    [
        (None, "packet"),
        (pd.DataFrame({"tso_window_ns": [1.0]}), "packet"),
        (pd.DataFrame({"fidelity": ["flow", "packet"]}), "flow"),
        (pd.DataFrame({"fidelity": ["packet"]}), "packet"),
    ],
)
def test_the_run_s_fidelity_is_its_config_s(config: pd.DataFrame | None, fidelity: str) -> None:
    tables = {} if config is None else {"config": config}
    assert fidelity_of(RunContext(tables=tables)) == fidelity


def _quiet_run(fidelity: str) -> RunContext:
    """A run with nothing in it: every judge has its n/a to give."""
    return RunContext(
        tables={
            "config": pd.DataFrame({"fidelity": [fidelity], "tso_window_ns": [math.nan]}),
            "messages": pd.DataFrame({"msg_id": [], "hops": [], "path": []}),
            "nodes": pd.DataFrame({"kind": ["gpu"]}),
            "probes": pd.DataFrame({"rtt_ns": []}),
        }
    )


@pytest.mark.parametrize("fidelity", ["packet", "flow"])
def test_a_flow_level_run_leaves_the_packet_level_clauses_n_a(fidelity: str) -> None:
    verdicts = judge_all(_quiet_run(fidelity))
    assert [v.id for v in verdicts] == list(CLAUSES)
    assert all(v.verdict == "n/a" for v in verdicts)
    for clause, verdict in zip(CLAUSES.values(), verdicts, strict=True):
        flow_na = f"a flow-level run (fidelity: flow) does not model {clause.packet_facts}"
        assert (verdict.detail == flow_na) == (fidelity == "flow" and bool(clause.packet_facts))
    tso = verdicts[list(CLAUSES).index("fabric.tso_window")]
    if fidelity == "packet":
        assert tso.detail == "no TSO window configured (root_complex.tso_window)"


# --- the conformance matrix -----------------------------------------------------------

WITNESSES = {
    "scenarios/violations/one.yaml": {"a.x": Failure("emergent", "x broke")},
    "scenarios/violations/two.yaml": {
        "a.x": Failure("faulty device", "x again"),
        "a.y": Failure("misconfiguration", "y too"),
    },
    "scenarios/violations/three.yaml": {
        "a.y": Failure("emergent", "y"),
        "a.z": Failure("emergent", "z"),
        "a.w": Failure("emergent", "w"),
    },
}


@pytest.fixture
def witnesses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conformance, "FAILURES", WITNESSES)


@pytest.mark.usefixtures("witnesses")
def test_a_clause_s_failing_witnesses_and_what_else_they_fail() -> None:
    assert list(conformance.failing("a.x")) == [
        "scenarios/violations/one.yaml",
        "scenarios/violations/two.yaml",
    ]
    assert conformance.failing("a.x")["scenarios/violations/two.yaml"].kind == "faulty device"
    assert conformance.also_fails("scenarios/violations/two.yaml", "a.x") == {"a.y": "y too"}
    assert conformance.multi_clause_witnesses() == {
        "scenarios/violations/two.yaml": {"a.x": "x again", "a.y": "y too"},
        "scenarios/violations/three.yaml": {"a.y": "y", "a.z": "z", "a.w": "w"},
    }


@pytest.mark.usefixtures("witnesses")
def test_a_matrix_row_names_witnesses_under_scenarios_with_their_kinds() -> None:
    row = MatrixRow(
        "a.x",
        "L9",
        "x holds",
        "measured",
        ("emergent", "faulty device"),
        ("test_x.py", "test_y.py"),
        ("scenarios/ok.yaml", "other/ok.yaml"),
        conformance.failing("a.x"),
    )
    assert row.cells(" / ") == (
        "a.x",
        "L9",
        "x holds",
        "measured",
        "emergent / faulty device",
        "test_x.py / test_y.py",
        "ok.yaml / other/ok.yaml",
        "violations/one.yaml / (emergent) / violations/two.yaml / (faulty device) / also fails a.y",
    )


def test_the_matrix_has_a_row_per_clause_from_the_catalogue_and_the_registry() -> None:
    rows = conformance.matrix()
    assert [r.clause for r in rows] == list(CLAUSES)
    for row, clause in zip(rows, CLAUSES.values(), strict=True):
        entry = BY_CLAUSE[clause.id]
        assert (row.layer, row.rule) == (clause.layer, clause.text)
        assert (row.basis, row.kinds, row.property_tests, row.passing) == (
            entry.basis,
            entry.kinds,
            entry.property_tests,
            entry.passing,
        )
        assert row.failing == conformance.failing(clause.id)
