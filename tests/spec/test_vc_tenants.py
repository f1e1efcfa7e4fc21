"""The L4 clause switch.vc_tenants (``sitssim.spec.switch_clauses.vc_tenants``).

On real runs: the shipped witness ``nine_tenants`` deadlocks and fails, measured, with the
observed cycle of full buffers in its detail and its ``deadlocks`` row as evidence, the
pre-run cycle beside it; its twin ``nine_tenants_separate_vcs`` passes (read from its
golden report, which tests/test_shipped_scenarios.py keeps equal to a fresh run); a run
without request-and-completion traffic is n/a. On hand-made tables: the edge cases a
shipped run does not show.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from sitssim.scenario import load_scenario, scenario_from_data
from sitssim.simulation import RunResult, simulate
from sitssim.spec.catalogue import CLAUSES
from sitssim.spec.registry import RunContext, Verdict
from sitssim.spec.switch_clauses import NO_ANSWERS, vc_tenants
from sitssim.stages.tenant_requests import DEADLOCK_COLUMNS
from sitssim.workloads.tenant_requests import TENANT_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
CLAUSE = CLAUSES["switch.vc_tenants"]
CYCLE = "g0>sw VC0 -> sw>g1 VC0 -> g1>sw VC0 -> sw>g0 VC0 -> g0>sw VC0"


def clause_of(run: RunResult) -> Verdict:
    (verdict,) = [v for v in run.verdicts if v.id == CLAUSE.id]
    return verdict


@pytest.fixture(scope="module")
def deadlocked() -> RunResult:
    return simulate(load_scenario(ROOT / "scenarios" / "violations" / "nine_tenants.yaml"))


def test_the_deadlocked_witness_fails_measured_on_its_observed_cycle(
    deadlocked: RunResult,
) -> None:
    verdict = clause_of(deadlocked)
    assert (verdict.verdict, verdict.measured, verdict.limit) == ("fail", 1.0, 0.0)
    assert (verdict.unit, verdict.basis) == ("deadlocks", "measured")
    table = deadlocked.tables["deadlocks"]
    (observed,) = table.query("kind == 'observed'").itertuples()
    (possible,) = table.query("kind == 'possible'").itertuples()
    assert observed.buffers >= 2 and observed.cycle
    assert verdict.detail.startswith("stalled: no delivery after ")
    assert f"messages outstanding (watchdog at {observed.t_ns:g} ns): {observed.cycle};" in (
        verdict.detail
    )
    assert f"possible before the run: {possible.cycle}" in verdict.detail
    # The observed row first, then the pre-run one, then every tenant's row.
    tables = [(e.table, list(e.rows)) for e in verdict.evidence]
    tenants = deadlocked.tables["tenants"]
    assert tables == [
        ("deadlocks", [observed.deadlock_id]),
        ("deadlocks", [possible.deadlock_id]),
        ("tenants", list(range(len(tenants)))),
    ]
    timeouts = int(tenants["ack_timeouts"].sum())
    assert timeouts > 0
    assert f"9 tenants, {int(tenants['issued'].sum())} requests issued, {timeouts} ACK" in (
        verdict.detail
    )


def test_the_stall_is_seen_within_two_ack_timeouts_of_the_last_delivery(
    deadlocked: RunResult,
) -> None:
    (observed,) = deadlocked.tables["deadlocks"].query("kind == 'observed'").itertuples()
    timeout = deadlocked.scenario.workloads[0].ack_timeout
    assert timeout <= observed.t_ns - observed.last_delivery_ns < 2 * timeout
    messages = deadlocked.tables["messages"]
    assert observed.last_delivery_ns == messages["t_deliver_ns"].max()
    assert observed.outstanding == messages["t_deliver_ns"].isna().sum()


def test_the_twin_with_separate_vcs_passes_with_no_deadlock_and_no_timeout() -> None:
    report = json.loads(
        (ROOT / "tests" / "golden" / "violations" / "nine_tenants_separate_vcs.json").read_text()
    )
    (verdict,) = [c for c in report["clauses"] if c["id"] == CLAUSE.id]
    assert (verdict["verdict"], verdict["measured"], verdict["basis"]) == ("pass", 0.0, "measured")
    assert [e["table"] for e in verdict["evidence"]] == ["tenants"]
    assert "no cycle in the buffer dependency graph before the run" in verdict["detail"]
    assert " 0 ACK timeouts (0.00 %)" in verdict["detail"]
    tenants = report["metrics"]["tenants"]
    assert tenants["ack_timeouts"] == 0 and tenants["requests_issued"] > 0
    assert tenants["deadlocked_at_ns"] is None and tenants["deadlock_possible"] is False


def _multitenant(tenants: int, vcs_per_port: int) -> RunResult:
    def edit(data: dict) -> None:
        data["duration"] = "200ns"
        data["topology"] = {**data["topology"], "planes": 1, "links_per_gpu": 1}
        data["tenants"] = [{"name": f"t{k}"} for k in range(tenants)]
        data["switch"] = {**data["switch"], "vcs_per_port": vcs_per_port}

    return simulate(load_scenario(ROOT / "scenarios" / "nvswitch_multitenant.yaml", edit=edit))


def test_requests_on_another_tenants_completion_vc_make_a_possible_cycle_before_the_run() -> None:
    # Four tenants, 3 VCs each, dealt over 8: t3's requests ride VC 2 with t0's
    # completions. A refused request of t3 waits for any completion its target sends
    # (one answer queue), t0's on VC 2 among them, which wait behind t3's requests at the
    # next target: a cycle no single tenant's requests and completions close.
    shared = _multitenant(4, 8).tables["deadlocks"]
    (possible,) = shared.query("kind == 'possible'").itertuples()
    assert " VC2 -> " in possible.cycle
    # The same tenants with a VC per tenant and class: nothing to close a cycle.
    control = _multitenant(4, 12).tables["deadlocks"]
    assert control.query("kind == 'possible'").empty


def test_a_run_without_tenant_requests_is_not_applicable() -> None:
    run = simulate(
        scenario_from_data(
            {
                "name": "no_answers",
                "duration": "1us",
                "topology": {
                    "kind": "graph",
                    "nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}],
                    "edges": [{"a": "a", "b": "b"}],
                },
                "links": {"default": {"rate": "64GT/s", "lanes": 16}},
            }
        )
    )
    assert "deadlocks" not in run.tables and "tenants" not in run.tables
    verdict = clause_of(run)
    assert (verdict.verdict, verdict.detail) == ("n/a", NO_ANSWERS)


# --- hand-made tables ------------------------------------------------------------------


def deadlock_rows(*rows: tuple[str, float, float, int, int, str]) -> pd.DataFrame:
    return pd.DataFrame([(k, *row) for k, row in enumerate(rows)], columns=list(DEADLOCK_COLUMNS))


def tenant_rows(issued: int = 100, timeouts: int = 0) -> pd.DataFrame:
    row = {c: 0 for c in TENANT_COLUMNS}
    row.update(tenant="t0", offered=issued, issued=issued, ack_timeouts=timeouts)
    return pd.DataFrame([row], columns=list(TENANT_COLUMNS))


def judge(**tables: pd.DataFrame) -> Verdict:
    return vc_tenants(CLAUSE, RunContext(tables=tables))


POSSIBLE = ("possible", math.nan, math.nan, 0, 4, CYCLE)


def test_a_stall_with_no_cycle_among_the_blocked_buffers_still_fails_and_says_so() -> None:
    verdict = judge(
        deadlocks=deadlock_rows(POSSIBLE, ("observed", 3000.0, 1000.0, 7, 0, "")),
        tenants=tenant_rows(100, 7),
    )
    assert (verdict.verdict, verdict.measured, verdict.basis) == ("fail", 1.0, "measured")
    assert verdict.detail.startswith(
        "stalled: no delivery after 1000 ns with 7 messages outstanding (watchdog at 3000 "
        "ns): no cycle among the blocked buffers;"
    )
    assert "7 ACK timeouts (7.00 %)" in verdict.detail
    assert [(e.table, list(e.rows)) for e in verdict.evidence][:2] == [
        ("deadlocks", [1]),
        ("deadlocks", [0]),
    ]


def test_a_cycle_possible_before_the_run_alone_is_a_warning_not_a_failure() -> None:
    verdict = judge(deadlocks=deadlock_rows(POSSIBLE), tenants=tenant_rows())
    assert (verdict.verdict, verdict.measured) == ("pass", 0.0)
    assert f"possible before the run: {CYCLE}" in verdict.detail
    assert "stalled" not in verdict.detail
    assert [(e.table, list(e.rows)) for e in verdict.evidence] == [
        ("deadlocks", [0]),
        ("tenants", [0]),
    ]


def test_a_stall_without_a_pre_run_cycle_fails_and_says_none_was_possible() -> None:
    verdict = judge(
        deadlocks=deadlock_rows(("observed", 3000.0, 1000.0, 2, 4, CYCLE)),
        tenants=tenant_rows(),
    )
    assert verdict.verdict == "fail"
    assert f"(watchdog at 3000 ns): {CYCLE};" in verdict.detail
    assert "no cycle in the buffer dependency graph before the run" in verdict.detail


def test_no_request_issued_gives_no_division_by_zero() -> None:
    verdict = judge(deadlocks=deadlock_rows(), tenants=tenant_rows(0))
    assert verdict.verdict == "pass"
    assert "0 requests issued, 0 ACK timeouts (0.00 %)" in verdict.detail


@pytest.mark.parametrize("missing", ["deadlocks", "tenants"])
def test_either_table_missing_is_not_applicable(missing: str) -> None:
    tables = {"deadlocks": deadlock_rows(POSSIBLE), "tenants": tenant_rows()}
    del tables[missing]
    verdict = judge(**tables)
    assert (verdict.verdict, verdict.detail) == ("n/a", NO_ANSWERS)


def test_vc_reuse_from_the_quota_stage_is_reported() -> None:
    verdict = judge(
        deadlocks=deadlock_rows(),
        tenants=tenant_rows(),
        vc_quota_ports=pd.DataFrame({"vc_reuse": [1.0, 2.25, math.nan]}),
    )
    assert "VC reuse up to 2.25" in verdict.detail
