"""The ECMP stage (clause ``switch.ecmp_weight``): LLDP-measured weights, ECMP routing in
the transport, the ``ecmp`` table, and the scenario's ECMP and vendor fields.

The weights are built from what the control-plane run measured (a vendor's delay moves the
weight, the fabric's share shows in the delay), the data run is routed by them (every
message on a shortest path; the route ids name the channels the ports really carried; a
flow keeps one path), and bad ECMP input is refused on one located line.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import networkx as nx
import pytest
import simpy
from located_errors import MARK, assert_located

from sitssim.config.ecmp_config import TRANSPORT_FIELDS
from sitssim.fabric.routing import Router, TableRouting
from sitssim.fabric.topology import build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import load_scenario
from sitssim.simulation import RunResult, simulate
from sitssim.stages.base import empty_schedule
from sitssim.switch.ecmp import EcmpRouting, QueuePairs
from sitssim.switch.lldp import measure_lldp

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "scenarios" / "ecmp_multivendor.yaml"
TEXT = SHIPPED.read_text(encoding="utf-8")


def small(tmp_path: Path, text: str = TEXT, name: str = "small.yaml") -> Path:
    """The shipped scenario cut to 8 us of traffic: a few thousand messages."""
    path = tmp_path / name
    path.write_text(text.replace("duration: 128us", "duration: 8us"), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return simulate(load_scenario(small(tmp_path_factory.mktemp("ecmp"))))


def test_the_hashable_fields_are_the_transports_per_message_columns() -> None:
    fabric = build_fabric(load_scenario(SHIPPED))
    router = Router(fabric)
    t = Transport(simpy.Environment(), fabric, router, sorted(fabric.graph), empty_schedule())
    for name in TRANSPORT_FIELDS:
        assert isinstance(getattr(t, name), list), name


def test_weights_are_the_formula_of_what_the_probes_measured(run: RunResult) -> None:
    table = run.tables["ecmp"].set_index("link")
    a = table.loc[["a>m0", "a>m1", "a>m2"]]
    assert a["weight"].tolist() == [100, 96, 89]
    assert (a["if_speed_bps"] == 128e9).all() and (a["lldp_probes"] == 4).all()
    # Measured: the vendor's processing plus the fabric's delay both ways, never the
    # profile's figure read back.
    extra_ms = a["lldp_ms"].to_numpy() - [14.2, 16.2, 19.7]
    assert (extra_ms > 0).all() and (extra_ms < 1e-3).all()
    assert extra_ms.max() - extra_ms.min() < 1e-9  # the same links, the same fabric delay
    assert (a["basis"] == "measured").all()


def test_a_slower_control_plane_measures_longer_and_weighs_less(tmp_path: Path) -> None:
    faster = TEXT.replace(
        "vendor_c: {lldp_processing: 19.7ms}", "vendor_c: {lldp_processing: 5.6ms}"
    )
    assert faster != TEXT
    table = simulate(load_scenario(small(tmp_path, faster))).tables["ecmp"].set_index("link")
    # 128 Gbit/s less int(2 x 5.6001 ms) = 11.
    assert table.loc["a>m2", "weight"] == 117
    assert 5.6 < table.loc["a>m2", "lldp_ms"] < 5.601


def test_the_lldp_delay_includes_the_links_flight_both_ways(tmp_path: Path) -> None:
    fabric = build_fabric(load_scenario(small(tmp_path)))
    members = [("a", "m0")]
    near = measure_lldp(
        fabric, empty_schedule(), members, {"m0": 0.0}, probes=3, interval_ns=1e3, frame_bytes=64
    )
    # No processing at all: what is left is serialisation, 2 x 25 cm of flight and the
    # arbitration at each end, tens of nanoseconds, positive.
    assert 0 < near[("a", "m0")].mean_ms * 1e6 < 200
    assert near[("a", "m0")].probes == 3
    with pytest.raises(ValueError, match="m0"):
        measure_lldp(fabric, empty_schedule(), members, {}, probes=1, interval_ns=1, frame_bytes=64)


def test_every_message_takes_a_shortest_path_named_by_its_route(run: RunResult) -> None:
    messages = run.tables["messages"]
    assert messages["t_deliver_ns"].notna().all() and len(messages) > 1000
    g = run.fabric.graph
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    assert (
        messages["hops"].to_numpy()
        == [lengths[s][d] for s, d in zip(messages["src"], messages["dst"], strict=True)]
    ).all()
    # The ports counted what really crossed them; the route ids say which channels each
    # message crossed: the two agree channel by channel, on every member of a's group.
    links = run.tables["links"].set_index("link_id")["messages"]
    from_routes = run.tables["links_by_tenant"].groupby("link_id")["messages"].sum()
    assert from_routes.reindex(links.index, fill_value=0).tolist() == links.tolist()
    for member in ("a>m0", "a>m1", "a>m2"):
        assert links[run.fabric.channel_index[tuple(member.split(">"))]] > 100


def test_a_flow_keeps_one_path_and_flows_split_over_every_member(run: RunResult) -> None:
    messages = run.tables["messages"]
    paths: dict[tuple, set[int]] = defaultdict(set)
    transport_qp = QueuePairs(
        {"src": messages["src"].cat.codes.tolist(), "dst": messages["dst"].cat.codes.tolist()}
        | {"tenant": messages["tenant"].cat.codes.tolist()},
        2048,
    )
    for i, row in enumerate(messages.itertuples()):
        paths[(row.src, row.dst, row.tenant, transport_qp[i])].add(row.route)
    assert all(len(p) == 1 for p in paths.values())
    table = run.tables["ecmp"]
    a = table[table["node"] == "a"]
    assert a["flows"].sum() == len(paths) and (a["flows"] > 0).all()
    assert a["messages"].sum() == len(messages)


def test_queue_pairs_deal_a_connections_messages_round_robin() -> None:
    columns = {"src": [0, 0, 1, 0, 0], "dst": [2, 2, 2, 2, 2], "tenant": [0, 0, 0, 0, 1]}
    qp = QueuePairs(columns, 2)
    assert [qp[i] for i in range(5)] == [0, 1, 0, 0, 0]
    assert len(qp) == 5 and qp[1] == 1  # read again: the value drawn, not a new one


def test_without_ecmp_the_routing_and_the_tables_are_as_before(tmp_path: Path) -> None:
    plain = TEXT[: TEXT.index("  ecmp:")] + TEXT[TEXT.index("workloads:") :]
    result = simulate(load_scenario(small(tmp_path, plain)))
    assert "ecmp" not in result.tables and "ecmp" not in result.metrics
    verdict = next(v for v in result.verdicts if v.id == "switch.ecmp_weight")
    assert verdict.verdict == "n/a" and "no ECMP configured" in verdict.detail
    # Pinned: every message of a pair on one path.
    messages = result.tables["messages"]
    assert (messages.groupby(["src", "dst"], observed=True)["route"].nunique() == 1).all()


def test_the_routing_is_chosen_before_any_message(tmp_path: Path) -> None:
    fabric = build_fabric(load_scenario(small(tmp_path)))
    router = Router(fabric)
    t = Transport(simpy.Environment(), fabric, router, sorted(fabric.graph), empty_schedule())
    t.inject(0, 1, 64, 0, 0, 0)
    ecmp = EcmpRouting(TableRouting(router, t.src, t.dst), {"src": t.src}, fields=("src",))
    with pytest.raises(Exception, match="before any message"):
        t.route_by(ecmp)


def _marked(old: str, new: str) -> str:
    assert TEXT.count(old) == 1, old
    return TEXT.replace(old, f"{new}  {MARK}")


@pytest.mark.parametrize(
    ("old", "new", "field", "expect"),
    [
        (
            "    fields: [src, dst, tenant, qp]",
            "    fields: [src, dst, port]",
            "switch.ecmp.fields[2]",
            "'src'",
        ),
        (
            "    fields: [src, dst, tenant, qp]",
            "    fields: [src, dst, src]",
            "switch.ecmp.fields[2]",
            "listed twice",
        ),
        (
            "    - {id: m1, kind: switch, vendor: vendor_b}",
            "    - {id: m1, kind: switch, vendor: vendor_x}",
            "topology.nodes[11].vendor",
            "unknown vendor 'vendor_x'",
        ),
        (
            "    - {id: g0, kind: gpu}",
            "    - {id: g0, kind: gpu, vendor: vendor_a}",
            "topology.nodes[0].vendor",
            "only a switch",
        ),
        (
            "  vendor: vendor_a",
            "  vendor: nobody",
            "switch.vendor",
            "unknown vendor 'nobody'",
        ),
        (
            "    weights: implicit",
            "    weights: {a>m0: 3, a>m1: 2, a>m2: 1, a>h0: 4}",
            "switch.ecmp.weights['a>h0']",
            "no channel a>h0",
        ),
        (
            "    weights: implicit",
            "    weights: {a>m0: 3, g0>a: 2}",
            "switch.ecmp.weights['g0>a']",
            "no ECMP member",
        ),
        (
            "    weights: implicit",
            "    weights: {a>m0: 3, a>m1: 2}",
            "switch.ecmp.weights",
            "not for a>m2",
        ),
        (
            "    lldp_probes: 4",
            "    lldp_probes: 0",
            "switch.ecmp.lldp_probes",
            "",
        ),
    ],
)
def test_bad_ecmp_input_is_refused_on_one_located_line(
    tmp_path: Path, old: str, new: str, field: str, expect: str
) -> None:
    assert_located(tmp_path, _marked(old, new), field, expect)


def test_an_lldp_weighed_member_without_a_vendor_is_refused(tmp_path: Path) -> None:
    text = TEXT.replace("  vendor: vendor_a\n", "").replace("  ecmp:\n", f"  ecmp:  {MARK}\n")
    assert_located(tmp_path, text, "switch.ecmp", "member a of m0's ECMP group")
