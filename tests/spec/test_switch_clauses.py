"""The L4 clause switch.vc_quota, on both sides of each of its three limits.

The hand-made cases build each port's table through the switch-quota stage (its sections,
its devices, its tables) with no transport, so each one changes one thing against the
spec; the shipped witnesses then show the clause passing, failing on a misconfigured
table (configured) and failing on a faulty switch (measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from sitssim.config.vc_quota_config import QuotaRuntimeUpdateFault, QuotaUpdate, VcQuota
from sitssim.scenario import load_scenario
from sitssim.simulation import RunResult, simulate
from sitssim.spec.catalogue import CLAUSES
from sitssim.spec.registry import RunContext, Verdict
from sitssim.spec.switch_clauses import NO_TABLE, vc_quota
from sitssim.stages.switch_quota import QuotaPort, QuotaSection, QuotaStage, build_tables

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
CLAUSE = CLAUSES["switch.vc_quota"]
PORTS = [
    QuotaPort(1, "sw0", "gpu0", "gpu0-sw0"),
    QuotaPort(3, "sw0", "gpu1", "gpu1-sw0"),
    QuotaPort(5, "sw1", "gpu0", "gpu0-sw1"),
]
SEED_A = [16, 16, 16, 16, 0, 0, 0, 0]
SEED_B = [12, 12, 12, 12, 12]


def run_tables(
    table: dict[str, list[int]],
    *,
    vcs_per_port: int = 8,
    updates: Sequence[dict] = (),
    faulty: Sequence[str] = (),
    ports: dict | None = None,
    link_states: pd.DataFrame | None = None,
) -> dict[str, pd.DataFrame]:
    """The stage's tables for ``PORTS`` after a run whose only events are the links' L0
    entries (``link_states``; none given: no PHY, every port loads at 0) and ``updates``."""
    quota = VcQuota(table=table, updates=[QuotaUpdate(**u) for u in updates], **(ports or {}))
    section = QuotaSection(
        quota=quota,
        vcs_per_port=vcs_per_port,
        tenants=("A", "B", "C"),
        faults=tuple(
            (i, QuotaRuntimeUpdateFault(kind="quota_runtime_update", switch=s))
            for i, s in enumerate(faulty)
        ),
        duration=1e6,
    )
    stage = QuotaStage(PORTS, build_tables(section, PORTS), tuple(quota.updates))
    held = {} if link_states is None else {"link_states": link_states}
    return stage.tables(SimpleNamespace(tables=held))  # type: ignore[arg-type]


def judge(tables: dict[str, pd.DataFrame]) -> Verdict:
    return vc_quota(CLAUSE, RunContext(tables=tables))


def shown(verdict: Verdict, table: str) -> list[int]:
    (ev,) = [e for e in verdict.evidence if e.table == table]
    return list(ev.rows)


def test_the_seed_tenant_a_alone_fills_a_port_and_passes() -> None:
    verdict = judge(run_tables({"A": SEED_A}))
    assert (verdict.verdict, verdict.measured, verdict.limit) == ("pass", 64.0, 64.0)
    assert (verdict.unit, verdict.basis) == ("slots", "configured")
    assert "worst port sw0>gpu0 loaded 64 slots on 8 VCs" in verdict.detail
    assert "3 of 3 ports loaded" in verdict.detail
    # The worst port's row, and its 8 cells (one tenant, 8 VCs).
    assert shown(verdict, "vc_quota_ports") == [0]
    assert shown(verdict, "vc_quota") == list(range(8))


def test_the_seed_adding_tenant_b_exceeds_64_slots_and_fails_as_configured() -> None:
    verdict = judge(run_tables({"A": SEED_A, "B": SEED_B}))
    assert (verdict.verdict, verdict.measured, verdict.basis) == ("fail", 124.0, "configured")
    assert verdict.detail.startswith("3 ports over 64 slots")
    assert shown(verdict, "vc_quota_ports") == [0, 1, 2]


def test_one_slot_over_on_one_port_fails_that_port_only() -> None:
    tables = run_tables(
        {"A": [8] * 8},
        ports={"ports": [{"switch": "sw1", "peer": "gpu0", "table": {"A": [8] * 8, "B": [1]}}]},
    )
    verdict = judge(tables)
    assert (verdict.verdict, verdict.measured) == ("fail", 65.0)
    assert shown(verdict, "vc_quota_ports") == [2]
    assert "worst port sw1>gpu0" in verdict.detail
    # The worst port's cells are its own: two tenants on 8 VCs.
    cells = tables["vc_quota"]
    assert shown(verdict, "vc_quota") == cells.loc[cells["port_id"] == 2, "slot_id"].tolist()
    assert len(shown(verdict, "vc_quota")) == 16


def test_a_ninth_vc_fails_on_vcs_even_within_64_slots() -> None:
    verdict = judge(run_tables({"A": [4] * 9}))
    assert (verdict.verdict, verdict.measured, verdict.limit) == ("fail", 9.0, 8.0)
    assert (verdict.unit, verdict.basis) == ("VCs", "configured")
    assert "3 ports over 8 VCs" in verdict.detail


def test_a_port_of_nine_vcs_fails_even_with_a_narrower_table() -> None:
    verdict = judge(run_tables({"A": [8, 8]}, vcs_per_port=9))
    assert (verdict.verdict, verdict.measured, verdict.unit) == ("fail", 9.0, "VCs")


def test_eight_vcs_pass_on_the_vc_limit() -> None:
    verdict = judge(run_tables({"A": [1] * 8}, vcs_per_port=4))
    assert verdict.verdict == "pass"
    assert "on 8 VCs" in verdict.detail


def test_a_runtime_write_a_faulty_switch_applies_fails_as_measured() -> None:
    write = {"at": "500ns", "switch": "sw1", "tenant": "B", "slots": [4]}
    verdict = judge(run_tables({"A": [8] * 4}, updates=[write], faulty=["sw1"]))
    assert (verdict.verdict, verdict.measured, verdict.limit) == ("fail", 1.0, 0.0)
    assert (verdict.unit, verdict.basis) == ("updates", "measured")
    assert "1 write changed a running table on 1 port, the first at 500 ns" in verdict.detail
    assert "worst port sw1>gpu0 loaded 32 slots on 8 VCs, now 36 slots on 8 VCs for 2 tenants" in (
        verdict.detail
    )
    assert shown(verdict, "vc_quota_ports") == [2]
    assert shown(verdict, "vc_quota_updates") == [0]


def test_the_same_write_on_a_conforming_switch_is_refused_recorded_and_passes() -> None:
    write = {"at": "500ns", "switch": "sw0", "tenant": "B", "slots": [40, 40]}
    tables = run_tables({"A": [8] * 4}, updates=[write], faulty=["sw1"])
    verdict = judge(tables)
    assert (verdict.verdict, verdict.measured, verdict.basis) == ("pass", 32.0, "configured")
    assert "2 writes to running ports refused and recorded" in verdict.detail
    writes = tables["vc_quota_updates"]
    assert writes["applied"].tolist() == [False, False]
    assert writes["loaded"].tolist() == [True, True]
    assert writes["table_slot_sum"].tolist() == [32, 32]
    assert shown(verdict, "vc_quota_updates") == [0, 1]


def test_a_port_whose_link_never_trains_takes_writes_but_is_never_loaded_or_judged() -> None:
    # gpu0-sw0 reaches L0 at 2 us on the PHY clock, gpu1-sw0 at 5 us: traffic starts at
    # 5 us, so every link that trains is up by traffic time 0, and only a port whose link
    # never reaches L0 still takes writes.
    states = pd.DataFrame(
        {
            "link": ["gpu0-sw0", "gpu1-sw0", "gpu0-sw1"],
            "state": ["L0", "L0", "Detect.Quiet"],
            "t_enter_ns": [2000.0, 5000.0, 0.0],
        }
    )
    write = {"at": "100ns", "switch": "sw1", "tenant": "B", "slots": [99]}
    tables = run_tables({"A": [8] * 4}, updates=[write], link_states=states)
    ports = tables["vc_quota_ports"]
    assert ports["loaded"].tolist() == [True, True, False]
    assert ports["loaded_at_ns"].tolist()[:2] == [-3000.0, 0.0]
    assert tables["vc_quota_updates"]["applied"].tolist() == [True]
    verdict = judge(tables)
    # The unloaded port's 131 slots were never loaded at link training: not judged.
    assert (verdict.verdict, verdict.measured) == ("pass", 32.0)
    assert "2 of 3 ports loaded" in verdict.detail


def test_no_port_that_reaches_l0_means_nothing_loaded_to_judge() -> None:
    states = pd.DataFrame({"link": ["gpu0-sw0"], "state": ["Detect.Quiet"], "t_enter_ns": [0.0]})
    verdict = judge(run_tables({"A": SEED_A, "B": SEED_B}, link_states=states))
    assert verdict.verdict == "n/a"
    assert "none of 3 switch ports reached L0" in verdict.detail


def test_a_run_without_a_quota_table_is_not_applicable_with_its_old_words() -> None:
    verdict = judge({})
    assert (verdict.verdict, verdict.detail) == ("n/a", NO_TABLE)


# --- the shipped witnesses -------------------------------------------------------------


@pytest.fixture(scope="module")
def example() -> RunResult:
    return simulate(load_scenario(SCENARIOS / "nvswitch_tenants_quota.yaml"))


def _verdict(result: RunResult) -> Verdict:
    (found,) = [v for v in result.verdicts if v.id == "switch.vc_quota"]
    return found


def test_the_multi_tenant_nvswitch_example_passes_every_clause(example: RunResult) -> None:
    verdict = _verdict(example)
    assert (verdict.verdict, verdict.measured, verdict.basis) == ("pass", 64.0, "configured")
    assert example.failed == []
    ports = example.tables["vc_quota_ports"]
    assert len(ports) == 32 and ports["loaded"].all()
    assert (ports["vc_reuse"] == 1.0).all()
    # Both tenants' traffic ran.
    assert set(example.tables["messages"]["tenant"].unique()) == {"A", "B"}
    writes = example.tables["vc_quota_updates"]
    assert len(writes) == 1 and not writes["applied"].any()


def test_the_over_quota_witness_fails_on_slots_as_configured() -> None:
    result = simulate(load_scenario(SCENARIOS / "violations" / "vc_overquota.yaml"))
    verdict = _verdict(result)
    assert (verdict.verdict, verdict.measured, verdict.basis) == ("fail", 124.0, "configured")
    assert [v.id for v in result.failed] == ["switch.vc_quota"]
    assert shown(verdict, "vc_quota_ports") == list(range(20))
    # A and B share VCs 0-3 and B has VC 4 alone: 9 tenant-VC pairs on 5 VCs.
    assert (result.tables["vc_quota_ports"]["vc_reuse"] == 9 / 5).all()


def test_the_runtime_update_witness_fails_on_writes_as_measured() -> None:
    result = simulate(load_scenario(SCENARIOS / "violations" / "vc_quota_runtime_update.yaml"))
    verdict = _verdict(result)
    assert (verdict.verdict, verdict.measured, verdict.basis) == ("fail", 8.0, "measured")
    assert [v.id for v in result.failed] == ["switch.vc_quota"]
    writes = result.tables["vc_quota_updates"]
    applied = writes[writes["applied"]]
    assert set(applied["switch"]) == {"nvs1"} and len(applied) == 8
    assert set(writes.loc[~writes["applied"], "switch"]) == {"nvs0"}
    assert (applied["table_slot_sum"] == 96).all()
    ports = result.tables["vc_quota_ports"]
    changed = ports[ports["updates_applied_loaded"] > 0]
    assert set(changed["switch"]) == {"nvs1"}
    assert (changed["loaded_slot_sum"] == 64).all() and (changed["slot_sum"] == 96).all()
