"""Fabric nodes and the per-hop routing function.

A node delivers what is addressed to it and hands anything else to the port its routing
function picks; the fabric's switches are built as the chosen switch model; the routing
function's candidates are the next-hop table's, and the port it picks is one of them, on
the path the router pinned for the pair.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import simpy

from sitssim.fabric.messages import KIND_DATA
from sitssim.fabric.nodes import Endpoint, Node, OutputQueuedSwitch
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import SwitchParams, scenario_from_data
from sitssim.stages.base import empty_schedule
from sitssim.switch.registry import SWITCH_MODELS


class Port:
    """Records what a node does with its ports."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def pass_through(self, msg: int, t_leave: float, now: float) -> None:
        self.calls.append(("pass_through", msg, t_leave, now))

    def send(self, msg: int, in_port: object) -> None:
        self.calls.append(("send", msg, in_port))


class Routing:
    def __init__(self, out: Port) -> None:
        self.out = out
        self.asked: list[tuple[Node, int, object]] = []

    def route(self, node: Node, msg: int, in_port: object) -> Port:
        self.asked.append((node, msg, in_port))
        return self.out

    def candidates(self, node: Node, msg: int) -> tuple[Port, ...]:
        return (self.out,)


@pytest.mark.parametrize("model", [Endpoint, OutputQueuedSwitch])
def test_a_node_delivers_its_own_messages_and_forwards_the_rest(model: type[Node]) -> None:
    env = simpy.Environment()
    env.run(until=12.5)
    out, came_over = Port(), Port()
    routing = Routing(out)
    delivered: list[int] = []
    # Message 0 is for node 3, message 1 for node 5.
    node = model(3, "sw", 40.0, routing, [3, 5], delivered.append, env)  # type: ignore[arg-type]
    node.arrive(0, came_over)  # type: ignore[arg-type]
    assert delivered == [0]
    assert came_over.calls == [("pass_through", 0, 12.5, 12.5)]
    assert routing.asked == [] and out.calls == []
    node.arrive(1, came_over)  # type: ignore[arg-type]
    assert delivered == [0]
    assert routing.asked == [(node, 1, came_over)]
    assert out.calls == [("send", 1, came_over)]
    node.inject(1)
    assert routing.asked[-1] == (node, 1, None)
    assert out.calls[-1] == ("send", 1, None)


def test_switches_are_built_as_the_chosen_model_and_gpus_as_endpoints(
    fat_tree_data: Callable[..., dict[str, Any]],
) -> None:
    class Marked(OutputQueuedSwitch):
        __slots__ = ()

    fabric = build_fabric(scenario_from_data(fat_tree_data()))
    nodes = sorted(fabric.graph)
    t = Transport(
        simpy.Environment(), fabric, Router(fabric), nodes, empty_schedule(), switch_model=Marked
    )
    kinds = {n: fabric.graph.nodes[n]["kind"] for n in nodes}
    for node in t.node_objects:
        assert type(node) is (Marked if kinds[node.name] == "switch" else Endpoint)
        assert node.latency_ns == fabric.node_latency_ns[node.name]
    assert SWITCH_MODELS["output_queued"](SwitchParams()) is OutputQueuedSwitch


def test_each_hop_picks_one_of_its_candidates_on_the_pinned_path(
    fat_tree_data: Callable[..., dict[str, Any]],
) -> None:
    fabric = build_fabric(scenario_from_data(fat_tree_data()))
    nodes = sorted(fabric.graph)
    router = Router(fabric)
    t = Transport(simpy.Environment(), fabric, router, nodes, empty_schedule())
    gpus = fabric.gpus
    src, dst = gpus[0], gpus[-1]
    msg = t.inject(t.node_id[src], t.node_id[dst], 256, 0, KIND_DATA, 0)
    path = router.routes[t.route_ids()[msg]]
    assert path.nodes[0] == src and path.nodes[-1] == dst
    channels = fabric.channels
    # Walk the path hop by hop, asking the routing function at each node.
    in_port = None
    for hop, node_name in enumerate(path.nodes[:-1]):
        node = t.node_objects[t.node_id[node_name]]
        candidates = t.routing.candidates(node, msg)
        expected = router.tables.next_hops(node_name, dst)
        assert [channels[p.channel].dst for p in candidates] == list(expected)
        if hop:
            chosen = t.routing.route(node, msg, in_port)
            assert chosen in candidates
            assert chosen.channel == path.channels[hop]
        in_port = t.ports[path.channels[hop]]
    # A leaf's uplinks are all candidates towards a GPU under another leaf.
    leaf = t.node_objects[t.node_id[path.nodes[1]]]
    assert len(t.routing.candidates(leaf, msg)) > 1
