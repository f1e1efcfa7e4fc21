"""The flow-level transport: max-min fair fluid flows on the packet transport's routes."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from sitssim.fabric.flow_transport import FlowTransport
from sitssim.fabric.messages import KIND_DATA
from sitssim.fabric.oracles import zero_load_latency_ns
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.stages.base import empty_schedule

SIZE = 65536


def _star() -> Fabric:
    """Two senders, g1 (wide) and g2 (wide), and g3 (narrow), into g0 through one switch."""
    return build_fabric(
        scenario_from_data(
            {
                "name": "star",
                "duration": "10us",
                "topology": {
                    "kind": "graph",
                    "nodes": [{"id": "sw", "kind": "switch"}]
                    + [{"id": n, "kind": "gpu"} for n in ("g0", "g1", "g2", "g3")],
                    "edges": [
                        {"a": "g1", "b": "sw"},
                        {"a": "g2", "b": "sw"},
                        {"a": "g3", "b": "sw", "link": "narrow"},
                        {"a": "sw", "b": "g0"},
                    ],
                },
                "links": {
                    "default": {"rate": "64GT/s", "lanes": 16, "propagation": "7ns"},
                    "narrow": {"rate": "64GT/s", "lanes": 4, "propagation": "3ns"},
                },
                "switch": {"arbitration": "45ns"},
            }
        )
    )


def _transport(cut_through_bytes: int = 0) -> FlowTransport:
    fabric = _star()
    nodes = sorted(fabric.graph)
    return FlowTransport(
        simpy.Environment(),
        fabric,
        Router(fabric),
        nodes,
        empty_schedule(),
        cut_through_bytes=cut_through_bytes,
    )


def _send_at(transport: FlowTransport, t_ns: float, src: str, dst: str, size: int) -> None:
    ids = transport.node_id

    def go(_event: object) -> None:
        transport.inject(ids[src], ids[dst], size, 0, KIND_DATA, 0)

    transport.env.timeout(t_ns).callbacks.append(go)


def _zero_load(transport: FlowTransport, msg: int) -> float:
    routes = transport.router.routes
    return float(
        zero_load_latency_ns(
            transport.fabric,
            routes,
            np.array([transport.route_ids()[msg]]),
            np.array([transport.size[msg]]),
            transport.cut_through,
        )[0]
    )


def _bw(transport: FlowTransport, a: str, b: str) -> float:
    return transport.fabric.channels[transport.fabric.channel_index[(a, b)]].bytes_per_ns


@pytest.mark.parametrize("cut_through", [0, 256])
def test_a_flow_alone_is_delivered_at_the_zero_load_latency(cut_through: int) -> None:
    transport = _transport(cut_through)
    _send_at(transport, 0.0, "g3", "g0", SIZE)
    transport.run()
    assert transport.t_deliver[0] == pytest.approx(_zero_load(transport, 0), rel=1e-12)


def test_two_connections_into_one_channel_share_it_equally() -> None:
    """Processor sharing between connections, not FIFO: both finish their bytes together,
    at twice one's time."""
    transport = _transport()
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    _send_at(transport, 0.0, "g2", "g0", SIZE)
    transport.run()
    bw = _bw(transport, "sw", "g0")
    tail = _zero_load(transport, 0) - SIZE / bw
    assert transport.t_deliver == pytest.approx([2 * SIZE / bw + tail] * 2, rel=1e-12)


def test_rates_are_recomputed_when_a_flow_arrives_and_when_one_leaves() -> None:
    """g1's flow runs alone at the full rate until g2's arrives, half its bytes sent; then
    each gets half the channel until g1's is done, and g2's finishes alone."""
    transport = _transport()
    bw = _bw(transport, "sw", "g0")
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    _send_at(transport, SIZE / (2 * bw), "g2", "g0", SIZE)
    transport.run()
    tail = _zero_load(transport, 0) - SIZE / bw
    assert transport.t_deliver[0] == pytest.approx(1.5 * SIZE / bw + tail, rel=1e-12)
    assert transport.t_deliver[1] == pytest.approx(2.0 * SIZE / bw + tail, rel=1e-12)


def test_a_narrow_flow_leaves_the_rest_of_the_shared_channel_to_the_wide_one() -> None:
    """g3's link is a quarter of the shared channel: g3 gets all of its own link, and g1 the
    three quarters of the shared channel it leaves (max-min, not an equal split)."""
    transport = _transport()
    _send_at(transport, 0.0, "g3", "g0", SIZE)
    _send_at(transport, 0.0, "g1", "g0", 3 * SIZE)
    transport.run()
    narrow, wide = _bw(transport, "g3", "sw"), _bw(transport, "sw", "g0")
    assert narrow == pytest.approx(wide / 4)
    tail_narrow = _zero_load(transport, 0) - SIZE / narrow
    tail_wide = _zero_load(transport, 1) - 3 * SIZE / wide
    assert transport.t_deliver[0] == pytest.approx(SIZE / narrow + tail_narrow, rel=1e-12)
    assert transport.t_deliver[1] == pytest.approx(3 * SIZE / (wide - narrow) + tail_wide, rel=1e-9)


def test_a_flow_through_a_channel_in_an_outage_waits_for_its_end() -> None:
    transport = _transport()
    channel = transport.fabric.channel_index[("g1", "sw")]
    transport.ports[channel].add_outage(100.0, 900.0)
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    transport.run()
    bw = _bw(transport, "g1", "sw")
    # 100 ns of bytes before the outage, the rest after it.
    assert transport.t_deliver[0] == pytest.approx(_zero_load(transport, 0) + 800.0, rel=1e-12)
    assert SIZE / bw > 100.0


def test_the_links_count_what_crossed_them_and_the_time_their_capacity_took() -> None:
    transport = _transport()
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    _send_at(transport, 5.0, "g2", "g0", 2 * SIZE)
    transport.run()
    shared = transport.ports[transport.fabric.channel_index[("sw", "g0")]]
    assert (shared.messages, shared.bytes) == (2, 3 * SIZE)
    assert shared.busy_ns == pytest.approx(3 * SIZE / _bw(transport, "sw", "g0"))
    assert transport.undelivered == 0


def test_a_connection_serves_its_messages_in_order() -> None:
    """Two messages on one route: the second waits for the first's last byte (FIFO), not
    half the channel each."""
    transport = _transport()
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    transport.run()
    bw = _bw(transport, "g1", "sw")
    tail = _zero_load(transport, 0) - SIZE / bw
    assert transport.t_deliver == pytest.approx([SIZE / bw + tail, 2 * SIZE / bw + tail], rel=1e-12)


def test_a_connection_holds_one_share_however_many_messages_wait_on_it() -> None:
    """g1's two messages and g2's one into g0: g1 and g2 each get half of the shared channel
    while both have a message (per message, g1 would get two thirds); g1's second message
    then runs alone."""
    transport = _transport()
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    _send_at(transport, 0.0, "g2", "g0", SIZE)
    transport.run()
    bw = _bw(transport, "sw", "g0")
    tail = _zero_load(transport, 0) - SIZE / bw
    first, second, other = transport.t_deliver
    assert first == pytest.approx(2 * SIZE / bw + tail, rel=1e-12)
    assert other == pytest.approx(2 * SIZE / bw + tail, rel=1e-12)
    assert second == pytest.approx(3 * SIZE / bw + tail, rel=1e-12)


def test_a_head_that_finishes_as_an_outage_begins_leaves_the_next_waiting() -> None:
    """The first message's last byte leaves exactly as the outage starts; the second makes
    no progress until the outage ends."""
    transport = _transport()
    bw = _bw(transport, "g1", "sw")
    channel = transport.fabric.channel_index[("g1", "sw")]
    transport.ports[channel].add_outage(SIZE / bw, SIZE / bw + 500.0)
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    _send_at(transport, 0.0, "g1", "g0", SIZE)
    transport.run()
    tail = _zero_load(transport, 0) - SIZE / bw
    assert transport.t_deliver[0] == pytest.approx(SIZE / bw + tail, rel=1e-12)
    assert transport.t_deliver[1] == pytest.approx(2 * SIZE / bw + 500.0 + tail, rel=1e-12)
