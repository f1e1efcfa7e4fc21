"""Topology builders: a scenario's ``topology`` section becomes a ``Fabric``.

A fabric is an undirected networkx graph of nodes (``gpu``, ``switch``,
``root_complex``) whose edges are links, plus the list of *channels*: one per
link direction, each an output port with its own queue in the transport.
Parallel links between the same two nodes (an NVSwitch plane reached by five
NVLinks) are one trunk channel whose bandwidth is the sum of its members.

Node names are stable and sortable: ``gpu0``…, ``rc0``, ``sw<level>.<index>``
for fat-tree switches, ``nvs<plane>`` for NVSwitch planes; a crossbar's senders
``in<i>``, receivers ``out<j>`` and switch ``xbar``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_args

import networkx as nx

from sitssim.link.encoding import payload_efficiency
from sitssim.scenario import (
    Crossbar,
    DirectRC,
    FatTree,
    GraphTopology,
    LinkProfile,
    NVSwitchFabric,
    Scenario,
    Topology,
)

# Signal velocity in a PCB / twinax link (about 0.67 c): 5 ns per metre.
NS_PER_METRE = 5.0
# Flight time assumed when a profile gives neither propagation nor length.
DEFAULT_PROPAGATION_NS = 5.0


@dataclass(frozen=True)
class Channel:
    """One direction of a link: an output port at ``src`` feeding ``dst``."""

    id: int
    src: str
    dst: str
    profile: str
    rate_gts: float
    lanes: int
    links: int
    encoding: str
    propagation_ns: float
    bytes_per_ns: float

    @property
    def name(self) -> str:
        return f"{self.src}>{self.dst}"


@dataclass
class Fabric:
    kind: str
    graph: nx.Graph
    channels: list[Channel]
    node_latency_ns: dict[str, float]
    gpus: list[str]
    root: str | None
    channel_index: dict[tuple[str, str], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.channel_index = {(c.src, c.dst): c.id for c in self.channels}

    @property
    def switches(self) -> list[str]:
        return sorted(n for n, k in self.graph.nodes(data="kind") if k == "switch")

    def node_kind(self, node: str) -> str:
        return self.graph.nodes[node]["kind"]

    @functools.cached_property
    def injection_bytes_per_ns(self) -> dict[str, float]:
        """Bandwidth of every node's outgoing channels together, by node (one pass: a
        synthetic load is a share of it, asked for once per source)."""
        total: dict[str, float] = dict.fromkeys(self.graph, 0.0)
        for c in self.channels:
            total[c.src] += c.bytes_per_ns
        return total


def _flight_ns(profile: LinkProfile) -> float:
    if profile.propagation is not None:
        return profile.propagation
    if profile.length is not None:
        return profile.length * NS_PER_METRE
    return DEFAULT_PROPAGATION_NS


def gpu_name(i: int) -> str:
    return f"gpu{i}"


def _fat_tree(topo: FatTree, g: nx.Graph, scenario: Scenario) -> str | None:
    for i in range(topo.gpus):
        g.add_node(gpu_name(i), kind="gpu", index=i)
    below = [gpu_name(i) for i in range(topo.gpus)]
    for level in range(1, topo.levels + 1):
        top = level == topo.levels
        if top and topo.spines > 1:
            switches = [f"sw{level}.{j}" for j in range(topo.spines)]
            for j, sw in enumerate(switches):
                g.add_node(sw, kind="switch", level=level, index=j)
                for child in below:
                    g.add_edge(child, sw, profile=topo.link, links=1)
        else:
            count = -(-len(below) // topo.radix)
            switches = [f"sw{level}.{j}" for j in range(count)]
            for j, sw in enumerate(switches):
                g.add_node(sw, kind="switch", level=level, index=j)
                for child in below[j * topo.radix : (j + 1) * topo.radix]:
                    g.add_edge(child, sw, profile=topo.link, links=1)
        below = switches
    if not topo.root_complex:
        return None
    g.add_node("rc0", kind="root_complex", index=0)
    g.add_edge("rc0", below[0], profile=topo.link, links=1)
    return "rc0"


def _direct_rc(topo: DirectRC, g: nx.Graph, scenario: Scenario) -> str:
    g.add_node("rc0", kind="root_complex", index=0)
    for i in range(topo.gpus):
        g.add_node(gpu_name(i), kind="gpu", index=i)
        g.add_edge(gpu_name(i), "rc0", profile=topo.link, links=1)
    return "rc0"


def plane_link_counts(links_per_gpu: int, planes: int) -> list[int]:
    """Spread a GPU's links over planes; spare links go to the outer planes first.

    HGX H100 wires 18 NVLinks as 5-4-4-5 over four NVSwitches; this rule
    reproduces that layout and generalises it.
    """
    counts = [links_per_gpu // planes] * planes
    order = [i for pair in zip(range(planes), reversed(range(planes)), strict=True) for i in pair]
    seen: list[int] = []
    for i in order:
        if i not in seen:
            seen.append(i)
    for i in seen[: links_per_gpu % planes]:
        counts[i] += 1
    return counts


def _nvswitch(topo: NVSwitchFabric, g: nx.Graph, scenario: Scenario) -> None:
    counts = plane_link_counts(topo.links_per_gpu, topo.planes)
    for p in range(topo.planes):
        g.add_node(f"nvs{p}", kind="switch", level=1, index=p)
    for i in range(topo.gpus):
        g.add_node(gpu_name(i), kind="gpu", index=i)
        for p, n in enumerate(counts):
            g.add_edge(gpu_name(i), f"nvs{p}", profile=topo.link, links=n)


CROSSBAR_SWITCH = "xbar"


def crossbar_sender(i: int) -> str:
    return f"in{i}"


def crossbar_receiver(j: int) -> str:
    return f"out{j}"


def _crossbar(topo: Crossbar, g: nx.Graph, scenario: Scenario) -> None:
    # Senders and receivers are separate GPUs, so each switch port is only an input or
    # only an output: an N x N switch, as the head-of-line blocking benches take it. The
    # GPU index numbers senders first, so ``fabric.gpus`` lists them first.
    g.add_node(CROSSBAR_SWITCH, kind="switch", level=1, index=0)
    for first, role, name in (
        (0, "sender", crossbar_sender),
        (topo.ports, "receiver", crossbar_receiver),
    ):
        for i in range(topo.ports):
            node = name(i)
            g.add_node(node, kind="gpu", index=first + i, role=role)
            g.add_edge(node, CROSSBAR_SWITCH, profile=topo.link, links=1)


def crossbar_ends(fabric: Fabric) -> tuple[list[str], list[str]]:
    """A crossbar fabric's sender and receiver GPUs, each in port order."""
    roles = fabric.graph.nodes(data="role")
    return (
        [g for g in fabric.gpus if roles[g] == "sender"],
        [g for g in fabric.gpus if roles[g] == "receiver"],
    )


def _graph(topo: GraphTopology, g: nx.Graph, scenario: Scenario) -> str | None:
    gpu_index = 0
    for i, node in enumerate(topo.nodes):
        if node.id in g:
            raise scenario.error(("topology", "nodes", i, "id"), f"duplicate node id {node.id!r}")
        attrs: dict = {"kind": node.kind}
        if node.kind == "switch":
            attrs["level"] = node.level
        if node.kind == "gpu":
            attrs["index"] = gpu_index
            gpu_index += 1
        g.add_node(node.id, **attrs)
    for i, edge in enumerate(topo.edges):
        for end in ("a", "b"):
            name = getattr(edge, end)
            if name not in g:
                raise scenario.error(
                    ("topology", "edges", i, end), f"edge to undeclared node {name!r}"
                )
        if edge.a == edge.b:
            raise scenario.error(("topology", "edges", i), f"self-loop on {edge.a!r}")
        if g.has_edge(edge.a, edge.b):
            raise scenario.error(
                ("topology", "edges", i),
                f"duplicate edge {edge.a}-{edge.b}; use 'links' for parallel links",
            )
        g.add_edge(edge.a, edge.b, profile=edge.link, links=edge.links)
    for i, node in enumerate(topo.nodes):
        if node.kind == "gpu" and g.degree(node.id) == 0:
            raise scenario.error(("topology", "nodes", i), f"GPU {node.id!r} has no link")
    if gpu_index == 0:
        raise scenario.error(("topology", "nodes"), "a fabric needs at least one GPU")
    gpus = [n for n, k in g.nodes(data="kind") if k == "gpu"]
    component = nx.node_connected_component(g, gpus[0])
    stranded = sorted(n for n in g if n not in component)
    if stranded:
        raise scenario.error(
            ("topology", "edges"), f"nodes not connected to {gpus[0]!r}: {', '.join(stranded)}"
        )
    roots = sorted(n for n, k in g.nodes(data="kind") if k == "root_complex")
    return roots[0] if roots else None


# Each topology kind's builder: it adds the nodes (kind gpu, switch with its level, or
# root_complex) and edges (profile, links) to the graph, and returns the root complex the
# GPUs' host traffic goes to (None: none). ``scenario`` is for located errors.
TopologyBuilder = Callable[[Any, nx.Graph, Scenario], "str | None"]
TOPOLOGY_BUILDERS: dict[type, TopologyBuilder] = {
    FatTree: _fat_tree,
    DirectRC: _direct_rc,
    NVSwitchFabric: _nvswitch,
    GraphTopology: _graph,
    Crossbar: _crossbar,
}
_missing = set(get_args(get_args(Topology)[0])) - set(TOPOLOGY_BUILDERS)
if _missing:
    raise TypeError(f"topology kinds without a builder: {sorted(t.__name__ for t in _missing)}")


def build_fabric(scenario: Scenario) -> Fabric:
    """Build the fabric graph and its channels; raise ``InputError`` on contradictions."""
    topo = scenario.topology
    g = nx.Graph()
    root = TOPOLOGY_BUILDERS[type(topo)](topo, g, scenario)

    latency: dict[str, float] = {}
    for node, data in g.nodes(data=True):
        if data["kind"] == "switch":
            latency[node] = scenario.switch.arbitration_ns(data["level"])
        elif data["kind"] == "root_complex":
            latency[node] = scenario.root_complex.arbitration
        else:
            latency[node] = 0.0

    channels: list[Channel] = []
    for a, b in sorted(tuple(sorted(e)) for e in g.edges):
        data = g.edges[a, b]
        profile = scenario.links[data["profile"]]
        links = data["links"]
        bytes_per_ns = (
            profile.rate * profile.lanes * links * payload_efficiency(profile.encoding) / 8.0
        )
        for src, dst in ((a, b), (b, a)):
            channels.append(
                Channel(
                    id=len(channels),
                    src=src,
                    dst=dst,
                    profile=data["profile"],
                    rate_gts=profile.rate,
                    lanes=profile.lanes,
                    links=links,
                    encoding=profile.encoding,
                    propagation_ns=_flight_ns(profile),
                    bytes_per_ns=bytes_per_ns,
                )
            )
    gpus = sorted(
        (n for n, k in g.nodes(data="kind") if k == "gpu"), key=lambda n: g.nodes[n]["index"]
    )
    return Fabric(
        kind=topo.kind,
        graph=g,
        channels=channels,
        node_latency_ns=latency,
        gpus=gpus,
        root=root,
    )
