"""The L3 fabric judges on hand-built tables: the hop limit (7 links), the topology limits
(8 GPUs behind switches, 4 on a root complex, switch arbitration >= 35 ns) as parts, and the
TSO window (>= 2 × the farthest pair's p99 round trip + 150 ns).
"""

from __future__ import annotations

import math

import pytest
from spec.judge_tables import figures, judge, not_applicable, shown, table

# --- fabric.hop_limit -----------------------------------------------------------------

MESSAGES = ("msg_id", "hops", "path")


def _messages(hops: list[int]) -> dict:
    rows = [(10 + i, h, ">".join(f"n{k}" for k in range(h + 1))) for i, h in enumerate(hops)]
    return {"messages": table(MESSAGES, rows)}


def test_seven_hops_pass_and_every_longest_route_is_shown() -> None:
    verdict = judge("fabric.hop_limit", **_messages([2, 7, 4, 7]))
    assert figures(verdict) == ("pass", 7.0, "<=", 7.0, "hops", "measured")
    assert shown(verdict) == [("messages", [11, 13], 2)]
    assert verdict.detail == (
        "longest route taken: n0>n1>n2>n3>n4>n5>n6>n7 (0 messages over the limit)"
    )


def test_eight_hops_fail_and_every_message_over_is_shown() -> None:
    verdict = judge("fabric.hop_limit", **_messages([8, 7, 9, 8]))
    assert figures(verdict) == ("fail", 9.0, "<=", 7.0, "hops", "measured")
    assert shown(verdict) == [("messages", [10, 12, 13], 3)]
    assert verdict.detail.endswith("(3 messages over the limit)")


def test_hop_limit_without_messages_is_not_applicable() -> None:
    verdict = judge("fabric.hop_limit", **_messages([]))
    assert not_applicable(verdict, "no messages crossed the fabric")


# --- fabric.topology_limits -----------------------------------------------------------

NODES = ("node_id", "node", "kind", "level", "arbitration_ns")
SWITCHED, DIRECT = "gpus_switched", "gpus_direct_rc"


def _fabric(
    gpus: int,
    switches: tuple[float, ...] = (),
    root_complex: bool = False,
    live: int | None = None,
) -> dict:
    """``gpus`` GPUs (ids 10..), switches (ids 50.., level k+1) with these arbitrations, and
    the run's tables that show the first ``live`` GPUs trained and carrying traffic."""
    rows = [(10 + i, f"gpu{i}", "gpu", 0, math.nan) for i in range(gpus)]
    rows += [(50 + k, f"sw{k}", "switch", k + 1, a) for k, a in enumerate(switches)]
    if root_complex:
        rows.append((90, "rc", "root_complex", 0, math.nan))
    tables = {"nodes": table(NODES, rows)}
    if live is not None:
        tables |= _run_seen([f"gpu{i}" for i in range(live)])
    return tables


def _run_seen(gpus: list[str], trained: list[str] | None = None) -> dict:
    """Each GPU's link to sw0, L0 reached on those ``trained`` (default all), and one
    delivered message from each GPU to the next."""
    trained = gpus if trained is None else trained
    links = table(("link", "upstream", "downstream"), [(f"{g}-sw0", "sw0", g) for g in gpus])
    states = table(("link", "state"), [(f"{g}-sw0", "L0") for g in trained])
    messages = table(
        ("src", "dst", "t_deliver_ns"),
        [(g, gpus[(i + 1) % len(gpus)], 100.0) for i, g in enumerate(gpus)],
    )
    return {"phy_links": links, "link_states": states, "messages": messages}


def _parts(verdict) -> list[tuple]:
    return [(p.name, p.verdict, p.measured, p.op, p.limit, p.unit, p.basis) for p in verdict.parts]


def test_eight_gpus_behind_switches_at_35_ns_pass_on_three_parts() -> None:
    verdict = judge("fabric.topology_limits", **_fabric(8, (35.0, 40.0), live=8))
    assert figures(verdict) == ("pass", 8.0, "<=", 8.0, "GPUs", "measured")
    assert _parts(verdict) == [
        ("gpus_seen", "pass", 8.0, "<=", 8.0, "GPUs", "measured"),
        ("gpus_configured", "pass", 8.0, "<=", 8.0, "GPUs", "configured"),
        ("arbitration", "pass", 35.0, ">=", 35.0, "ns", "configured"),
    ]
    assert shown(verdict) == [("nodes", list(range(10, 18)), 8)]
    assert "8 GPUs trained (reached L0) and carried traffic in a switch-based fabric" in (
        verdict.detail
    )
    assert "; 8 GPUs configured (limit 8); switch arbitration >= 35 ns" in verdict.detail


def test_a_ninth_gpu_that_never_worked_fails_as_configured_only() -> None:
    verdict = judge("fabric.topology_limits", **_fabric(9, (40.0,), live=8))
    assert figures(verdict) == ("fail", 9.0, "<=", 8.0, "GPUs", "configured")
    assert [p[:3] for p in _parts(verdict)] == [
        ("gpus_seen", "pass", 8.0),
        ("gpus_configured", "fail", 9.0),
        ("arbitration", "pass", 40.0),
    ]
    assert shown(verdict) == [("nodes", list(range(10, 19)), 9)]
    assert "1 configured GPU(s) did not (gpu8)" in verdict.detail


def test_nine_working_gpus_fail_as_measured_and_show_their_rows_once() -> None:
    verdict = judge("fabric.topology_limits", **_fabric(9, (40.0,), live=9))
    assert figures(verdict) == ("fail", 9.0, "<=", 8.0, "GPUs", "measured")
    assert shown(verdict) == [("nodes", list(range(10, 19)), 9)]


@pytest.mark.parametrize(("idle", "listed"), [(4, "gpu1, gpu2, gpu3, gpu4)"), (5, ", ...)")])
def test_up_to_four_idle_gpus_are_named(idle: int, listed: str) -> None:
    verdict = judge("fabric.topology_limits", **_fabric(1 + idle, (40.0,), live=1))
    assert f"{idle} configured GPU(s) did not (gpu1, gpu2, gpu3, gpu4" in verdict.detail
    assert listed in verdict.detail


def test_a_switch_arbitrating_under_35_ns_fails_with_its_level() -> None:
    verdict = judge("fabric.topology_limits", **_fabric(4, (40.0, 34.0, 34.5, 35.0), live=4))
    assert figures(verdict) == ("fail", 34.0, ">=", 35.0, "ns", "configured")
    assert _parts(verdict)[2] == ("arbitration", "fail", 34.0, ">=", 35.0, "ns", "configured")
    assert shown(verdict) == [("nodes", [51, 52], 2)]
    assert "switch arbitration 34 ns at level(s) [2, 3] (at least 35 ns)" in verdict.detail


def test_both_failing_parts_show_their_rows() -> None:
    verdict = judge("fabric.topology_limits", **_fabric(9, (30.0,), live=9))
    assert shown(verdict) == [("nodes", list(range(10, 19)), 9), ("nodes", [50], 1)]


@pytest.mark.parametrize(("gpus", "verdict"), [(4, "pass"), (5, "fail")])
def test_a_root_complex_takes_at_most_four_gpus(gpus: int, verdict: str) -> None:
    judged = judge("fabric.topology_limits", **_fabric(gpus, root_complex=True, live=gpus))
    assert figures(judged) == (verdict, float(gpus), "<=", 4.0, "GPUs", "measured")
    assert [p[0] for p in _parts(judged)] == ["gpus_seen", "gpus_configured"]
    assert "in a direct root-complex fabric" in judged.detail


def test_a_switch_makes_the_fabric_switched_even_beside_a_root_complex() -> None:
    verdict = judge("fabric.topology_limits", **_fabric(6, (40.0,), root_complex=True, live=6))
    assert (verdict.verdict, verdict.limit) == ("pass", 8.0)


def test_without_delivered_traffic_only_the_configured_gpus_count() -> None:
    tables = _fabric(9, (40.0,), live=9)
    tables["messages"]["t_deliver_ns"] = math.nan
    verdict = judge("fabric.topology_limits", **tables)
    assert figures(verdict) == ("fail", 9.0, "<=", 8.0, "GPUs", "configured")
    assert [p[0] for p in _parts(verdict)] == ["gpus_configured", "arbitration"]
    assert "9 GPUs configured in a switch-based fabric; no message was delivered" in (
        verdict.detail
    )
    for missing in ("messages", "phy_links", "link_states"):
        tables = _fabric(9, (40.0,), live=9)
        del tables[missing]
        assert [p.name for p in judge("fabric.topology_limits", **tables).parts] == [
            "gpus_configured",
            "arbitration",
        ]


def test_a_gpu_is_seen_only_if_its_link_trained_and_it_carried_traffic() -> None:
    tables = _fabric(4, (40.0,))
    run = _run_seen(["gpu0", "gpu1", "gpu2"], trained=["gpu0", "gpu1"])
    run["messages"].loc[run["messages"]["src"] == "gpu0", "t_deliver_ns"] = math.nan
    verdict = judge("fabric.topology_limits", **tables, **run)
    # gpu0 still received gpu2's message; gpu2's link never trained; gpu3 did nothing.
    assert _parts(verdict)[0][:3] == ("gpus_seen", "pass", 2.0)
    assert shown(verdict) == [("nodes", [10, 11], 2)]


def test_a_fabric_of_neither_switches_nor_a_root_complex_is_not_applicable() -> None:
    verdict = judge("fabric.topology_limits", **_fabric(2, live=2))
    assert not_applicable(verdict, "a fabric with neither switches nor a root complex")


# --- fabric.tso_window ----------------------------------------------------------------

PROBES = ("probe_id", "src", "dst", "hops", "rtt_ns")


def _tso(window: float, probes: list[tuple]) -> dict:
    rows = [(10 + i, *p) for i, p in enumerate(probes)]
    return {
        "config": table(("tso_window_ns",), [(window,)]),
        "probes": table(PROBES, rows),
    }


# The farthest pairs are 4 hops apart: gpu0->gpu3's p99 of (400, 500) is 499 ns, gpu1->gpu3's
# of (450, 460) 459.9 ns; a nearer pair's slow probe and an unanswered one do not count.
FAR = [
    ("gpu0", "gpu3", 4, 400.0),
    ("gpu1", "gpu3", 4, 450.0),
    ("gpu0", "gpu3", 4, 500.0),
    ("gpu1", "gpu3", 4, 460.0),
    ("gpu0", "gpu1", 2, 5000.0),
    ("gpu2", "gpu3", 6, math.nan),
]


@pytest.mark.parametrize(("window", "verdict"), [(1148.0, "pass"), (1147.9, "fail")])
def test_the_tso_window_is_held_to_twice_the_farthest_p99_plus_150_ns(
    window: float, verdict: str
) -> None:
    judged = judge("fabric.tso_window", **_tso(window, FAR))
    assert figures(judged) == (verdict, 2 * 499.0 + 150, "<=", window, "ns", "measured")
    assert shown(judged) == [("probes", [12], 1)]
    assert judged.detail == (
        "required window = 2 × RTT_max + 150 ns, RTT_max = p99 round trip gpu0->gpu3 (4 hops "
        f"each way) = 499.0 ns over 2 probes (median 450.0 ns); configured window {window:g} ns"
    )


def test_the_slowest_far_pair_sets_the_window() -> None:
    probes = [*FAR, ("gpu1", "gpu3", 4, 900.0), ("gpu1", "gpu3", 4, 900.0)]
    judged = judge("fabric.tso_window", **_tso(2000.0, probes))
    # gpu1->gpu3: p99 of (450, 460, 900, 900) is 900 ns, shown by both of its 900 ns probes.
    assert (judged.verdict, judged.measured) == ("pass", 1950.0)
    assert shown(judged) == [("probes", [16, 17], 2)]


def test_tso_window_without_a_window_or_probes_is_not_applicable() -> None:
    assert not_applicable(
        judge("fabric.tso_window", **_tso(math.nan, FAR)),
        "no TSO window configured (root_complex.tso_window)",
    )
    unanswered = [("gpu0", "gpu3", 4, math.nan)]
    assert not_applicable(
        judge("fabric.tso_window", **_tso(1000.0, unanswered)),
        "no completed round-trip probes: add a 'probes' workload",
    )
