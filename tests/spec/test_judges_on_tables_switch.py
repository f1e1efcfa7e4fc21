"""The L4 switch judges on hand-built tables: ``switch.vc_quota`` (64 slots and 8 VCs per
port, configured; no write applied to a running port, measured), ``switch.vc_tenants`` (no
deadlock observed) and ``switch.ecmp_weight`` (each implicit weight is max(1, ifSpeed/1e9 -
int(2·lldp_ms)); each group splits its flows in proportion, by a chi-square test at 1e-6).
"""

from __future__ import annotations

import math

import pytest
from spec.judge_tables import figures, judge, not_applicable, shown, table

# --- switch.vc_quota ------------------------------------------------------------------

PORTS = (
    "port_id",
    "switch",
    "peer",
    "loaded",
    "loaded_slot_sum",
    "loaded_vcs",
    "slot_sum",
    "vcs",
    "tenants",
    "vc_reuse",
)
CELLS = ("slot_id", "port_id")
WRITES = ("update_id", "port_id", "t_ns", "applied", "loaded")
NO_TABLE = "no VC quota table configured (switch.vc_quota)"


def _quota(*ports: tuple, writes: tuple = ()) -> dict:
    """Ports as (loaded, slots, VCs) as loaded (ids 1, 2, ...: port k on sw0 to gpu{k}),
    each two quota cells (ids 10k, 10k + 1), and writes as (port, t_ns, applied, loaded)."""
    rows = [
        (k, "sw0", f"gpu{k}", loaded, slots, vcs, slots, vcs, 2, 1.5)
        for k, (loaded, slots, vcs) in enumerate(ports, start=1)
    ]
    cells = [(10 * k + j, k) for k in range(1, len(ports) + 1) for j in range(2)]
    updates = [(100 + i, *w) for i, w in enumerate(writes)]
    return {
        "vc_quota_ports": table(PORTS, rows),
        "vc_quota": table(CELLS, cells),
        "vc_quota_updates": table(WRITES, updates),
    }


def test_64_slots_on_8_vcs_pass_on_the_fullest_port() -> None:
    verdict = judge("switch.vc_quota", **_quota((True, 40, 4), (True, 64, 8), (False, 99, 12)))
    assert figures(verdict) == ("pass", 64.0, "<=", 64.0, "slots", "configured")
    assert shown(verdict) == [("vc_quota_ports", [2], 1), ("vc_quota", [20, 21], 2)]
    assert verdict.detail == (
        "worst port sw0>gpu2 loaded 64 slots on 8 VCs for 2 tenants, VC reuse 1.50; "
        "2 of 3 ports loaded at link training"
    )


def test_65_slots_fail_as_configured_on_every_port_over() -> None:
    verdict = judge("switch.vc_quota", **_quota((True, 65, 4), (True, 64, 8), (True, 124, 9)))
    assert figures(verdict) == ("fail", 124.0, "<=", 64.0, "slots", "configured")
    assert shown(verdict) == [("vc_quota_ports", [1, 3], 2), ("vc_quota", [30, 31], 2)]
    assert verdict.detail.startswith("2 ports over 64 slots; 1 port over 8 VCs; worst port")


def test_a_ninth_vc_within_64_slots_fails_on_vcs() -> None:
    verdict = judge("switch.vc_quota", **_quota((True, 64, 8), (True, 48, 9)))
    assert figures(verdict) == ("fail", 9.0, "<=", 8.0, "VCs", "configured")
    assert shown(verdict) == [("vc_quota_ports", [2], 1), ("vc_quota", [20, 21], 2)]
    assert verdict.detail.startswith("1 port over 8 VCs; worst port sw0>gpu2 loaded 48 slots")


def test_a_write_applied_to_a_running_port_fails_as_measured() -> None:
    writes = ((2, 500.0, True, True), (1, 400.0, False, True), (2, 900.0, True, True))
    verdict = judge("switch.vc_quota", **_quota((True, 64, 8), (True, 32, 4), writes=writes))
    assert figures(verdict) == ("fail", 2.0, "<=", 0.0, "updates", "measured")
    assert shown(verdict) == [
        ("vc_quota_ports", [2], 1),
        ("vc_quota", [20, 21], 2),
        ("vc_quota_updates", [100, 102], 2),
    ]
    assert verdict.detail.startswith(
        "2 writes changed a running table on 1 port, the first at 500 ns; worst port sw0>gpu2"
    )
    assert verdict.detail.endswith("1 write to running ports refused and recorded")


def test_the_first_running_write_names_the_port_shown() -> None:
    writes = ((2, 500.0, True, True), (1, 900.0, True, True))
    verdict = judge("switch.vc_quota", **_quota((True, 64, 8), (True, 32, 4), writes=writes))
    assert shown(verdict) == [
        ("vc_quota_ports", [1, 2], 2),
        ("vc_quota", [20, 21], 2),
        ("vc_quota_updates", [100, 101], 2),
    ]
    assert "2 writes changed a running table on 2 ports, the first at 500 ns" in verdict.detail


def test_an_over_quota_table_leads_over_a_running_write() -> None:
    writes = ((1, 500.0, True, True),)
    verdict = judge("switch.vc_quota", **_quota((True, 64, 8), (True, 32, 9), writes=writes))
    assert figures(verdict) == ("fail", 9.0, "<=", 8.0, "VCs", "configured")
    assert shown(verdict)[0] == ("vc_quota_ports", [1, 2], 2)


def test_writes_refused_or_made_before_loading_pass_and_refusals_are_shown() -> None:
    writes = ((1, 0.0, True, False), (2, 700.0, False, True), (1, 800.0, False, True))
    verdict = judge("switch.vc_quota", **_quota((True, 64, 8), (True, 32, 4), writes=writes))
    assert figures(verdict) == ("pass", 64.0, "<=", 64.0, "slots", "configured")
    assert shown(verdict)[2] == ("vc_quota_updates", [101, 102], 2)
    assert verdict.detail.endswith("2 writes to running ports refused and recorded")
    early = judge("switch.vc_quota", **_quota((True, 64, 8), writes=writes[:1]))
    assert len(early.evidence) == 2


def test_a_changed_table_and_unknown_reuse_are_described() -> None:
    tables = _quota((True, 64, 8))
    tables["vc_quota_ports"][["slot_sum", "vcs", "vc_reuse"]] = [[80, 8, math.nan]]
    verdict = judge("switch.vc_quota", **tables)
    assert "loaded 64 slots on 8 VCs, now 80 slots on 8 VCs for 2 tenants, VC reuse n/a" in (
        verdict.detail
    )
    tables["vc_quota_ports"][["slot_sum", "vcs"]] = [[64, 6]]
    assert "now 64 slots on 6 VCs" in judge("switch.vc_quota", **tables).detail


def test_vc_quota_with_no_port_loaded_is_not_applicable() -> None:
    verdict = judge("switch.vc_quota", **_quota((False, 64, 8), (False, 99, 9)))
    assert not_applicable(
        verdict, "none of 2 switch ports reached L0, so no quota table was loaded"
    )
    assert not_applicable(judge("switch.vc_quota"), NO_TABLE)


# --- switch.vc_tenants ----------------------------------------------------------------

DEADLOCKS = ("deadlock_id", "kind", "t_ns", "last_delivery_ns", "outstanding", "buffers", "cycle")
TENANTS = ("tenant", "issued", "ack_timeouts")
NO_ANSWERS = "no request-and-completion traffic (kind: tenant_requests)"
POSSIBLE = (5, "possible", math.nan, math.nan, 0, 3, "a -> b -> a")
OBSERVED = (6, "observed", 9000.0, 4000.0, 12, 2, "sw0.p1 -> sw1.p0 -> sw0.p1")


def _tenants(*deadlocks: tuple, issued=(60, 40), timeouts=(2, 1), reuse=None) -> dict:
    tables = {
        "deadlocks": table(DEADLOCKS, list(deadlocks)),
        "tenants": table(
            TENANTS,
            [(f"t{k}", i, t) for k, (i, t) in enumerate(zip(issued, timeouts, strict=True))],
        ),
    }
    if reuse is not None:
        tables["vc_quota_ports"] = table(("vc_reuse",), [(r,) for r in reuse])
    return tables


def test_no_deadlock_passes_and_shows_the_tenants() -> None:
    verdict = judge("switch.vc_tenants", **_tenants())
    assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "deadlocks", "measured")
    assert shown(verdict) == [("tenants", [0, 1], 2)]
    assert verdict.detail == (
        "2 tenants, 100 requests issued, 3 ACK timeouts (3.00 %); "
        "no cycle in the buffer dependency graph before the run"
    )


def test_a_possible_cycle_alone_is_a_warning_beside_a_pass() -> None:
    verdict = judge("switch.vc_tenants", **_tenants(POSSIBLE))
    assert figures(verdict)[:2] == ("pass", 0.0)
    assert shown(verdict) == [("deadlocks", [5], 1), ("tenants", [0, 1], 2)]
    assert verdict.detail.endswith("; possible before the run: a -> b -> a")


def test_an_observed_deadlock_fails_and_leads_the_detail() -> None:
    verdict = judge("switch.vc_tenants", **_tenants(POSSIBLE, OBSERVED))
    assert figures(verdict) == ("fail", 1.0, "<=", 0.0, "deadlocks", "measured")
    assert shown(verdict) == [
        ("deadlocks", [6], 1),
        ("deadlocks", [5], 1),
        ("tenants", [0, 1], 2),
    ]
    assert verdict.detail.startswith(
        "stalled: no delivery after 4000 ns with 12 messages outstanding (watchdog at "
        "9000 ns): sw0.p1 -> sw1.p0 -> sw0.p1; 2 tenants"
    )


def test_a_stall_with_no_cycle_among_the_blocked_buffers_says_so() -> None:
    stall = (6, "observed", 9000.0, 4000.0, 12, 0, "")
    verdict = judge("switch.vc_tenants", **_tenants(stall))
    assert verdict.verdict == "fail"
    assert "(watchdog at 9000 ns): no cycle among the blocked buffers" in verdict.detail


def test_vc_reuse_is_told_when_known_and_no_request_divides_by_nothing() -> None:
    verdict = judge("switch.vc_tenants", **_tenants(reuse=[1.0, 2.25, math.nan]))
    assert "; VC reuse up to 2.25;" in verdict.detail
    unknown = judge("switch.vc_tenants", **_tenants(reuse=[math.nan]))
    assert "VC reuse" not in unknown.detail
    idle = judge("switch.vc_tenants", **_tenants(issued=(0, 0), timeouts=(0, 0)))
    assert "0 requests issued, 0 ACK timeouts (0.00 %)" in idle.detail


@pytest.mark.parametrize("missing", ["deadlocks", "tenants"])
def test_vc_tenants_without_request_traffic_is_not_applicable(missing: str) -> None:
    tables = _tenants()
    del tables[missing]
    assert not_applicable(judge("switch.vc_tenants", **tables), NO_ANSWERS)


# --- switch.ecmp_weight ---------------------------------------------------------------

ECMP = (
    "ecmp_id",
    "group",
    "link",
    "weight",
    "basis",
    "lldp_ms",
    "lldp_probes",
    "if_speed_bps",
    "flows",
    "share",
    "expected_share",
)
G = 1e9
SHARES = (0.25, 0.25, 0.5)


def _member(group: str, weight: float, flows: int, share: float, **kw) -> dict:
    return {
        "group": group,
        "link": kw.get("link", f"{group}-m"),
        "weight": weight,
        "basis": kw.get("basis", "measured"),
        "lldp_ms": kw.get("lldp_ms", 0.1),
        "lldp_probes": kw.get("probes", 4),
        "if_speed_bps": kw.get("speed", weight * G),
        "flows": flows,
        "share": 0.0,
        "expected_share": share,
    }


def _ecmp(*members: dict) -> dict:
    rows = [(10 + i, *(m[c] for c in ECMP[1:])) for i, m in enumerate(members)]
    return {"ecmp": table(ECMP, rows)}


def _group(name: str, flows: tuple[int, int, int], first: int = 0) -> list[dict]:
    """Three members weighing 100, 100, 200 (shares 1/4, 1/4, 1/2) with these flows."""
    return [
        _member(name, w, f, s, link=f"{name}-m{first + k}")
        for k, (w, f, s) in enumerate(zip((100, 100, 200), flows, SHARES, strict=True))
    ]


def _p_two_dof(flows: tuple[int, int, int]) -> float:
    """Pearson's chi-square p-value for three members: exp(-X²/2) at two degrees of freedom."""
    total = sum(flows)
    stat = sum((f - total * s) ** 2 / (total * s) for f, s in zip(flows, SHARES, strict=True))
    return math.exp(-stat / 2)


def test_a_split_in_proportion_passes_on_its_p_value() -> None:
    flows = (40, 10, 50)  # X² = 18: p = e^-9
    verdict = judge("switch.ecmp_weight", **_ecmp(*_group("a", flows)))
    assert verdict.measured == pytest.approx(_p_two_dof(flows), rel=1e-9)
    assert figures(verdict)[2:] == (">=", 1e-6, "p-value", "measured")
    assert verdict.verdict == "pass"
    assert shown(verdict) == [("ecmp", [10, 11, 12], 3)]
    assert "worst group a split 100 flows" in verdict.detail
    assert "3 implicit weights = max(1, ifSpeed/1e9 - int(2 x LLDP ms))" in verdict.detail
    assert "negotiated speeds (100 to 200 Gbit/s)" in verdict.detail
    assert verdict.detail.endswith("at alpha 1e-06; 1 group tested")


def test_a_split_off_its_weights_fails_on_the_worst_group() -> None:
    bad, worse, fine = (60, 0, 40), (70, 0, 30), (25, 25, 50)
    members = _group("a", bad) + _group("b", fine, 3) + _group("c", worse, 6)
    verdict = judge("switch.ecmp_weight", **_ecmp(*members))
    assert (verdict.verdict, verdict.basis) == ("fail", "measured")
    assert verdict.measured == pytest.approx(_p_two_dof(worse), rel=1e-9)
    assert shown(verdict) == [("ecmp", [10, 11, 12, 16, 17, 18], 6)]
    assert verdict.detail.index("c split 100 flows") < verdict.detail.index("a split 100 flows")
    assert "3 groups tested" in verdict.detail and "worst group" not in verdict.detail


@pytest.mark.parametrize(
    ("speed", "lldp_ms", "weight"),
    [
        (100 * G, 0.49, 100),  # int(0.98) = 0
        (100 * G, 0.5, 99),  # int(1.0) = 1
        (100 * G, 1.6, 97),  # int(3.2) = 3
        (2.5 * G, 0.0, 2),  # whole Gbit/s
        (1 * G, 5.0, 1),  # max(1, 1 - 10)
    ],
)
def test_an_implicit_weight_is_the_formula_of_its_delay_and_speed(
    speed: float, lldp_ms: float, weight: int
) -> None:
    right = _member("a", weight, 50, 0.5, speed=speed, lldp_ms=lldp_ms)
    assert judge("switch.ecmp_weight", **_ecmp(right)).verdict == "pass"
    wrong = _member("a", weight + 1, 50, 0.5, speed=speed, lldp_ms=lldp_ms)
    verdict = judge("switch.ecmp_weight", **_ecmp(right, wrong))
    assert figures(verdict) == ("fail", 1.0, "<=", 0.0, "members", "measured")
    assert shown(verdict) == [("ecmp", [11], 1)]
    assert f"1 member weighed off the formula, e.g. a-m weight {weight + 1}" in verdict.detail


def test_of_two_passing_groups_the_lower_p_value_is_measured_and_shown() -> None:
    """b's split is further from its weights than a's; on a tie the first group recorded."""
    near, far = (30, 20, 50), (40, 10, 50)
    verdict = judge("switch.ecmp_weight", **_ecmp(*_group("a", near), *_group("b", far, 3)))
    assert verdict.measured == pytest.approx(_p_two_dof(far), rel=1e-9)
    assert shown(verdict) == [("ecmp", [13, 14, 15], 3)]
    tie = judge("switch.ecmp_weight", **_ecmp(*_group("b", near), *_group("a", near, 3)))
    assert shown(tie) == [("ecmp", [10, 11, 12], 3)]


def test_a_group_too_small_to_test_leaves_the_next_one_tested() -> None:
    small = [_member("s", 100, 4, 0.5, link="s0"), _member("s", 100, 4, 0.5, link="s1")]
    verdict = judge("switch.ecmp_weight", **_ecmp(*small, *_group("a", (40, 10, 50))))
    assert verdict.measured == pytest.approx(_p_two_dof((40, 10, 50)), rel=1e-9)
    assert verdict.detail.endswith("1 group tested, 1 not (under 5 expected flows on a member)")


def test_implicit_members_beside_an_explicit_one_are_held_to_the_formula() -> None:
    """An explicit 7 first, then an implicit 100 and an implicit 101 on 100 Gbit/s links."""
    members = [
        _member("a", 7, 25, 0.25, basis="configured", speed=100 * G, link="x"),
        _member("a", 100, 25, 0.25, link="a-m0"),
        _member("a", 101, 50, 0.5, link="a-m1", speed=100 * G),
    ]
    verdict = judge("switch.ecmp_weight", **_ecmp(*members))
    assert (verdict.verdict, verdict.measured, shown(verdict)) == (
        "fail",
        1.0,
        [("ecmp", [12], 1)],
    )


def test_one_answered_probe_makes_a_weight_measured() -> None:
    members = [_member("a", 100, 50, 0.5, probes=1), _member("a", 100, 50, 0.5, probes=1)]
    verdict = judge("switch.ecmp_weight", **_ecmp(*members))
    assert (verdict.verdict, verdict.basis) == ("pass", "measured")
    off = [_member("a", 100, 50, 0.5, probes=1), _member("a", 99, 50, 0.5, probes=1, speed=100 * G)]
    assert figures(judge("switch.ecmp_weight", **_ecmp(*off)))[:2] == ("fail", 1.0)
    assert judge("switch.ecmp_weight", **_ecmp(*off)).basis == "measured"


def test_a_member_without_a_measured_delay_is_off_the_formula() -> None:
    unanswered = _member("a", 100, 50, 0.5, lldp_ms=math.nan, probes=0)
    verdict = judge("switch.ecmp_weight", **_ecmp(_member("a", 100, 50, 0.5), unanswered))
    assert figures(verdict) == ("fail", 1.0, "<=", 0.0, "members", "configured")
    assert shown(verdict) == [("ecmp", [11], 1)]


def test_explicit_weights_are_not_held_to_the_formula() -> None:
    explicit = _member("a", 7, 50, 1.0, basis="configured", speed=100 * G)
    verdict = judge("switch.ecmp_weight", **_ecmp(explicit))
    assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "members", "configured")
    assert shown(verdict) == [("ecmp", [10], 1)]
    assert "implicit weight" not in verdict.detail


@pytest.mark.parametrize(("flows", "tested"), [((5, 5), True), ((5, 4), False)])
def test_a_group_is_tested_only_with_5_expected_flows_a_member(
    flows: tuple[int, int], tested: bool
) -> None:
    """Two members of equal weight: 10 flows expect 5 each; 9 flows expect 4.5."""
    members = [_member("a", 100, f, 0.5, link=f"m{k}") for k, f in enumerate(flows)]
    verdict = judge("switch.ecmp_weight", **_ecmp(*members))
    assert verdict.verdict == "pass"
    if tested:
        # X² = 0 or ... at one degree of freedom: p = erfc(sqrt(X²/2)).
        total = sum(flows)
        stat = sum((f - total / 2) ** 2 / (total / 2) for f in flows)
        assert verdict.measured == pytest.approx(math.erfc(math.sqrt(stat / 2)))
        assert figures(verdict)[2:4] == (">=", 1e-6)
    else:
        assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "members", "measured")
        assert verdict.detail.endswith(
            "0 groups tested, 1 not (under 5 expected flows on a member)"
        )
    assert shown(verdict) == [("ecmp", [10, 11], 2)]


def test_a_group_of_one_member_is_not_tested() -> None:
    verdict = judge("switch.ecmp_weight", **_ecmp(_member("a", 100, 500, 1.0)))
    assert figures(verdict)[:3] == ("pass", 0.0, "<=")
    assert "0 groups tested, 1 not" in verdict.detail


def test_ecmp_weight_without_groups_is_not_applicable() -> None:
    assert not_applicable(judge("switch.ecmp_weight"), "no ECMP configured (switch.ecmp)")
    assert not_applicable(
        judge("switch.ecmp_weight", ecmp=table(ECMP, [])),
        "ECMP configured, but no node has several shortest-path next hops: no group",
    )
