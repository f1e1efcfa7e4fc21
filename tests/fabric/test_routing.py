"""Routing: shortest paths, deterministic, ties spread over spines / planes.

The router reads next-hop tables built once per destination; ``_ReferenceRouter`` below
is the per-pair ``all_shortest_paths`` router they replaced, kept here as the oracle the
tables must reproduce route for route and id for id.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from itertools import pairwise, permutations
from typing import Any

import networkx as nx
import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from sitssim.fabric.route_tables import RouteTables
from sitssim.fabric.routing import Route, Router
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate
from sitssim.stages.base import empty_schedule

ScenarioData = dict[str, Any]


def _ring() -> dict[str, Any]:
    """Six switches in a ring, a GPU on each: opposite GPUs have two tied shortest paths."""
    switches = [f"s{i}" for i in range(6)]
    return {
        "kind": "graph",
        "nodes": [{"id": s, "kind": "switch"} for s in switches]
        + [{"id": f"g{i}", "kind": "gpu"} for i in range(6)],
        "edges": [{"a": s, "b": switches[(i + 1) % 6]} for i, s in enumerate(switches)]
        + [{"a": f"g{i}", "b": s} for i, s in enumerate(switches)],
    }


TOPOLOGIES: dict[str, dict[str, Any]] = {
    "fat_tree": {"kind": "fat_tree", "gpus": 8, "levels": 2, "radix": 4, "spines": 4},
    "tree": {"kind": "fat_tree", "gpus": 8, "levels": 3, "radix": 2},
    "direct_rc": {"kind": "direct_rc", "gpus": 4},
    "nvswitch": {"kind": "nvswitch", "gpus": 8},
    "ring": _ring(),
}


def _fabric(topology: dict[str, Any]) -> Fabric:
    return build_fabric(scenario_from_data({"name": "r", "duration": "1us", "topology": topology}))


def _all_routes(router: Router, fabric: Fabric, repeat: int = 1) -> list[Route]:
    endpoints = [*fabric.gpus, *([fabric.root] if fabric.root else [])]
    return [router.route(s, d) for s, d in permutations(endpoints, 2) for _ in range(repeat)]


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_routes_are_shortest_paths_over_real_channels(name: str) -> None:
    fabric = _fabric(TOPOLOGIES[name])
    router = Router(fabric)
    for route in _all_routes(router, fabric, repeat=3):
        src, dst = route.nodes[0], route.nodes[-1]
        assert route.hops == nx.shortest_path_length(fabric.graph, src, dst)
        assert len(set(route.nodes)) == len(route.nodes)
        for (a, b), c in zip(pairwise(route.nodes), route.channels, strict=True):
            channel = fabric.channels[c]
            assert (channel.src, channel.dst) == (a, b)


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_routes_are_the_same_in_every_run(name: str) -> None:
    first = _all_routes(Router(_fabric(TOPOLOGIES[name])), _fabric(TOPOLOGIES[name]), repeat=5)
    second = _all_routes(Router(_fabric(TOPOLOGIES[name])), _fabric(TOPOLOGIES[name]), repeat=5)
    assert [r.nodes for r in first] == [r.nodes for r in second]


_ROUTES_IN_A_FRESH_PROCESS = """
import json, sys
from itertools import permutations
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import build_fabric
from sitssim.scenario import scenario_from_data
out = {}
for name, topology in json.loads(sys.stdin.read()).items():
    data = {"name": "r", "duration": "1us", "topology": topology}
    fabric = build_fabric(scenario_from_data(data))
    router = Router(fabric)
    out[name] = [router.route(s, d).nodes for s, d in permutations(fabric.gpus, 2) for _ in "abc"]
print(json.dumps(out))
"""


def test_routes_do_not_depend_on_string_hashing() -> None:
    """Another interpreter with another hash seed picks the same routes, message by message."""
    env = {**os.environ, "PYTHONHASHSEED": "20260"}
    done = subprocess.run(
        [sys.executable, "-c", _ROUTES_IN_A_FRESH_PROCESS],
        input=json.dumps(TOPOLOGIES),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    theirs = json.loads(done.stdout)
    for name, topology in TOPOLOGIES.items():
        fabric = _fabric(topology)
        router = Router(fabric)
        ours = [
            list(router.route(s, d).nodes) for s, d in permutations(fabric.gpus, 2) for _ in "abc"
        ]
        assert theirs[name] == ours


@pytest.mark.parametrize("name", ["fat_tree", "tree", "direct_rc", "ring"])
def test_pinned_routes_do_not_depend_on_query_order(name: str) -> None:
    fabric = _fabric(TOPOLOGIES[name])
    pairs = list(permutations(fabric.gpus, 2))
    forward = Router(fabric)
    backward = Router(fabric)
    chosen = {p: forward.route(*p).nodes for p in pairs}
    assert {p: backward.route(*p).nodes for p in reversed(pairs)} == chosen
    # A pinned pair keeps its path, so its messages stay in order.
    assert all(forward.route(*p).nodes == chosen[p] for p in pairs)


def test_fat_tree_spreads_cross_leaf_pairs_evenly_over_spines() -> None:
    fabric = _fabric(TOPOLOGIES["fat_tree"])
    router = Router(fabric)
    spines = [s for s in fabric.switches if fabric.graph.nodes[s]["level"] == 2]
    used: Counter[str] = Counter()
    for s, d in permutations(fabric.gpus, 2):
        route = router.route(s, d)
        if route.hops == 4:
            used[route.nodes[2]] += 1
        else:
            # Same leaf: the message turns at the leaf and never climbs to a spine.
            assert route.hops == 2
    assert set(used) == set(spines)
    assert max(used.values()) - min(used.values()) <= 1


def test_ring_sends_opposite_pairs_both_ways_round() -> None:
    fabric = _fabric(TOPOLOGIES["ring"])
    router = Router(fabric)
    routes = [router.route(f"g{i}", f"g{(i + 3) % 6}") for i in range(6)]
    assert all(r.hops == 5 for r in routes)
    clockwise = sum(r.nodes[2] == f"s{(i + 1) % 6}" for i, r in enumerate(routes))
    assert 0 < clockwise < 6


def test_nvswitch_stripes_a_pairs_messages_over_planes_by_bandwidth() -> None:
    fabric = _fabric(TOPOLOGIES["nvswitch"])
    router = Router(fabric)
    planes = fabric.switches
    bandwidth = {p: fabric.channels[fabric.channel_index[("gpu0", p)]].bytes_per_ns for p in planes}
    total = sum(bandwidth.values())
    calls = 180
    for dst in fabric.gpus[1:]:
        used = Counter(router.route("gpu0", dst).nodes[1] for _ in range(calls))
        assert set(used) == set(planes)
        for p in planes:
            assert abs(used[p] - calls * bandwidth[p] / total) <= 1


def test_nvswitch_run_loads_planes_in_proportion_to_their_bandwidth(
    fat_tree_data: Callable[..., ScenarioData],
) -> None:
    data = fat_tree_data(load=0.5, probes=None, duration="2us", message_bytes="8KiB")
    data["topology"] = TOPOLOGIES["nvswitch"]
    links = simulate(scenario_from_data(data)).tables["links"]
    uplinks = links[links["src"].str.startswith("gpu")]
    by_plane = uplinks.groupby("dst")[["bytes", "bytes_per_ns"]].sum()
    share = by_plane["bytes"] / by_plane["bytes"].sum()
    expected = by_plane["bytes_per_ns"] / by_plane["bytes_per_ns"].sum()
    assert share.to_numpy() == pytest.approx(expected.to_numpy(), abs=0.01)


# --- equivalence with the per-pair all_shortest_paths router ---------------------------


class _ReferenceRouter:
    """The router before next-hop tables: one ``all_shortest_paths`` search per pair,
    its paths sorted, pinned phase ``(index(s) + index(d)) mod k``, spray by smooth
    weighted round robin over bottleneck bandwidths."""

    def __init__(self, fabric: Fabric, spray: bool) -> None:
        self.fabric = fabric
        self.spray = spray
        self.order = {node: i for i, node in enumerate(sorted(fabric.graph))}
        self.by_nodes: dict[tuple[str, ...], tuple[int, tuple[int, ...]]] = {}
        self.routes: list[tuple[int, tuple[str, ...], tuple[int, ...]]] = []
        # Per pair: its routes, their weights and the round robin's credit.
        self.pairs: dict[tuple[str, str], tuple[list[int], list[float], list[float]]] = {}

    def _route(self, nodes: tuple[str, ...]) -> int:
        if nodes not in self.by_nodes:
            channels = tuple(self.fabric.channel_index[p] for p in pairwise(nodes))
            self.by_nodes[nodes] = (len(self.routes), channels)
            self.routes.append((len(self.routes), nodes, channels))
        return self.by_nodes[nodes][0]

    def _next(self, state: tuple[list[int], list[float], list[float]]) -> int:
        ids, weights, credit = state
        for i, w in enumerate(weights):
            credit[i] += w
        best = max(range(len(credit)), key=credit.__getitem__)
        credit[best] -= sum(weights)
        return ids[best]

    def route(self, src: str, dst: str) -> int:
        state = self.pairs.get((src, dst))
        if state is None:
            paths = sorted(tuple(p) for p in nx.all_shortest_paths(self.fabric.graph, src, dst))
            phase = (self.order[src] + self.order[dst]) % len(paths)
            if self.spray and len(paths) > 1:
                ids = [self._route(p) for p in paths]
                channels = self.fabric.channels
                weights = [min(channels[c].bytes_per_ns for c in self.routes[r][2]) for r in ids]
                state = (ids, weights, [0.0] * len(ids))
                for _ in range(phase):
                    self._next(state)
            else:
                state = ([self._route(paths[phase])], [1.0], [0.0])
            self.pairs[(src, dst)] = state
        return self._next(state)


def _assert_same_as_reference(
    fabric: Fabric, pairs: list[tuple[str, str]], spray: bool | None = None
) -> None:
    """Both routers answer ``pairs`` in this order alike, and number their routes alike."""
    router = Router(fabric, spray=spray)
    reference = _ReferenceRouter(fabric, spray=router.spray)
    got = [router.route(s, d).id for s, d in pairs]
    assert got == [reference.route(s, d) for s, d in pairs]
    assert [(r.id, r.nodes, r.channels) for r in router.routes] == reference.routes


def _shuffled_pairs(fabric: Fabric, repeat: int, seed: int) -> list[tuple[str, str]]:
    """Every ordered pair of endpoints ``repeat`` times, in an order that is not sorted
    (route ids follow first use, so the order is part of what is compared)."""
    endpoints = [*fabric.gpus, *([fabric.root] if fabric.root else [])]
    pairs = list(permutations(endpoints, 2)) * repeat
    random.Random(seed).shuffle(pairs)
    return pairs


@pytest.mark.parametrize(
    "topology",
    [
        {"kind": "fat_tree", "gpus": 8, "levels": 2, "radix": 4, "spines": 4},
        {"kind": "fat_tree", "gpus": 16, "levels": 2, "radix": 4, "spines": 3},
        {"kind": "fat_tree", "gpus": 32, "levels": 2, "radix": 8, "spines": 8},
        {"kind": "fat_tree", "gpus": 27, "levels": 3, "radix": 3, "spines": 4},
        {"kind": "fat_tree", "gpus": 8, "levels": 3, "radix": 2, "spines": 2},
        {"kind": "fat_tree", "gpus": 10, "levels": 2, "radix": 4, "spines": 5},
        {"kind": "fat_tree", "gpus": 8, "levels": 1, "radix": 8, "root_complex": False},
        {"kind": "fat_tree", "gpus": 12, "radix": 4, "spines": 2, "root_complex": False},
        {"kind": "direct_rc", "gpus": 6},
        TOPOLOGIES["ring"],
    ],
    ids=lambda t: "-".join(str(v) for v in t.values() if not isinstance(v, list)),
)
@pytest.mark.parametrize("spray", [None, True])
def test_pinned_and_sprayed_routes_match_the_per_pair_search(
    topology: dict[str, Any], spray: bool | None
) -> None:
    fabric = _fabric(topology)
    _assert_same_as_reference(fabric, _shuffled_pairs(fabric, repeat=3, seed=7), spray)


@pytest.mark.parametrize(
    "topology",
    [
        TOPOLOGIES["nvswitch"],
        {"kind": "nvswitch", "gpus": 6, "planes": 3, "links_per_gpu": 7},
        {"kind": "nvswitch", "gpus": 4, "planes": 6, "links_per_gpu": 18},
    ],
    ids=lambda t: "-".join(str(v) for v in t.values()),
)
def test_nvswitch_spray_sequences_match_the_per_pair_search(topology: dict[str, Any]) -> None:
    fabric = _fabric(topology)
    pairs = list(permutations(fabric.gpus, 2))
    rng = random.Random(3)
    # A few hundred messages of a few pairs, interleaved: each pair's rotation must carry
    # on where it stopped, whatever the other pairs did in between.
    messages = [rng.choice(pairs[:5]) for _ in range(400)] + _shuffled_pairs(fabric, 2, seed=5)
    _assert_same_as_reference(fabric, messages)


_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,5}", fullmatch=True)


@st.composite
def _graphs(draw: st.DrawFn) -> dict[str, Any]:
    """A connected networkx random graph whose nodes carry drawn names, so that sorted
    name order is unrelated to the order nodes were built in."""
    n = draw(st.integers(3, 14))
    seed = draw(st.integers(0, 2**32 - 1))
    g = nx.gnp_random_graph(n, draw(st.floats(0.1, 0.7)), seed=seed)
    components = [sorted(c) for c in nx.connected_components(g)]
    for component in components[1:]:
        g.add_edge(draw(st.sampled_from(components[0])), draw(st.sampled_from(component)))
    names = draw(st.lists(_NAME, min_size=n, max_size=n, unique=True))
    gpus = draw(st.sets(st.integers(0, n - 1), min_size=2))
    kinds = ["gpu" if i in gpus else "switch" for i in range(n)]
    if draw(st.booleans()):
        kinds[min(set(range(n)) - gpus, default=n - 1)] = "root_complex"
    return {
        "kind": "graph",
        "nodes": [{"id": names[i], "kind": kinds[i]} for i in range(n)],
        "edges": [
            {"a": names[a], "b": names[b], "links": draw(st.integers(1, 3))} for a, b in g.edges
        ],
    }


@given(topology=_graphs(), spray=st.sampled_from([None, True]), seed=st.integers(0, 99))
def test_random_graph_routes_match_the_per_pair_search(
    topology: dict[str, Any], spray: bool | None, seed: int
) -> None:
    fabric = _fabric(topology)
    _assert_same_as_reference(fabric, _shuffled_pairs(fabric, repeat=3, seed=seed), spray)


@given(topology=_graphs())
def test_next_hops_are_the_neighbours_one_step_closer(topology: dict[str, Any]) -> None:
    graph = _fabric(topology).graph
    tables = RouteTables(graph)
    for dst in graph:
        dist = nx.single_source_shortest_path_length(graph, dst)
        for node in graph:
            closer = sorted(m for m in graph[node] if dist[m] == dist[node] - 1)
            assert tables.next_hops(node, dst) == tuple(closer)
            assert tables.count(node, dst) == len(list(nx.all_shortest_paths(graph, node, dst)))


def test_kth_path_is_found_without_listing_the_paths_before_it() -> None:
    """A 40 x 40 grid has C(78, 39), about 2.7e22, shortest paths corner to corner: far
    too many to list, yet any one of them in sorted order is a walk of 78 steps."""
    graph = nx.relabel_nodes(nx.grid_2d_graph(40, 40), lambda v: f"n{v[0]:02d}.{v[1]:02d}")
    tables = RouteTables(graph)
    total = tables.count("n00.00", "n39.39")
    assert total == math.comb(78, 39)
    ranks = [0, 1, total // 3, total // 2, total - 2, total - 1]
    paths = [tables.path("n00.00", "n39.39", k) for k in ranks]
    assert paths == sorted(paths) and len(set(paths)) == len(paths)
    # The first in sorted order runs along the row ("n00.01" sorts before "n01.00").
    assert paths[0] == tuple(f"n00.{j:02d}" for j in range(40)) + tuple(
        f"n{i:02d}.39" for i in range(1, 40)
    )
    for path in paths:
        assert len(path) == 79 and all(graph.has_edge(a, b) for a, b in pairwise(path))
    assert tables.path("n00.00", "n39.39", total) == paths[0]


def test_kth_path_ranks_a_small_grid_like_sorting_all_of_them() -> None:
    graph = nx.relabel_nodes(nx.grid_2d_graph(4, 5), lambda v: f"n{v[0]}{v[1]}")
    tables = RouteTables(graph)
    for src, dst in [("n00", "n34"), ("n30", "n04"), ("n12", "n33"), ("n21", "n21")]:
        every = sorted(tuple(p) for p in nx.all_shortest_paths(graph, src, dst))
        assert tables.paths(src, dst) == every


def _crossed(fabric: Fabric, pairs: list[tuple[str, str]], spray: bool | None) -> list[list[int]]:
    """The channels each message of ``pairs`` crossed in the transport, in order, one
    message at a time, every hop routed by ``TableRouting``."""
    nodes = sorted(fabric.graph)
    t = Transport(simpy.Environment(), fabric, Router(fabric, spray), nodes, empty_schedule())
    crossed = []
    for src, dst in pairs:
        before = [p.messages for p in t.ports]
        msg = t.inject(t.node_id[src], t.node_id[dst], 64, 0, 0, 0)
        t.run()
        used = [c for c, p in enumerate(t.ports) if p.messages > before[c]]
        # One message alone: the ports it used, in the order it left them.
        crossed.append(sorted(used, key=lambda c: t.ports[c].last_start))
        assert not math.isnan(t.t_deliver[msg])
    return crossed


@pytest.mark.parametrize(
    ("name", "spray"),
    [("fat_tree", None), ("tree", None), ("direct_rc", None), ("ring", True), ("nvswitch", None)],
)
def test_each_hop_routed_from_the_tables_follows_the_routers_path(
    name: str, spray: bool | None
) -> None:
    """The transport routes hop by hop from the next-hop tables and the rank drawn at the
    source; message by message, what it crossed is the path the router hands out (pinned
    pairs, and sprayed pairs' rotation), and the route ids it reports are those paths'."""
    fabric = _fabric(TOPOLOGIES[name])
    rng = random.Random(11)
    pairs = [rng.choice(list(permutations(fabric.gpus, 2))) for _ in range(60)]
    router = Router(fabric, spray)
    expected = [list(router.route(s, d).channels) for s, d in pairs]
    assert _crossed(fabric, pairs, spray) == expected
    if name in ("ring", "nvswitch"):
        # Sprayed pairs really rotate: the walk would also pass if every message took one path.
        assert len({tuple(c) for c in expected}) > len(set(pairs))


@pytest.mark.parametrize("name", ["fat_tree", "nvswitch", "ring"])
def test_route_ids_number_routes_in_order_of_each_pairs_first_message(name: str) -> None:
    """Messages in a shuffled pair order with random ranks: the ids a fresh router gives
    them all at once are those of a router asked message by message (pairs met first get
    the lowest ids; a sprayed pair's rank picks among its routes; a pinned pair's rank is
    ignored)."""
    fabric = _fabric(TOPOLOGIES[name])
    gpus = sorted(n for n in fabric.graph if fabric.graph.nodes[n]["kind"] == "gpu")
    number = {n: i for i, n in enumerate(sorted(fabric.graph))}
    rng = random.Random(7)
    pairs = list(permutations(gpus, 2))
    msgs = [rng.choice(pairs) for _ in range(400)]
    src = [number[a] for a, _ in msgs]
    dst = [number[b] for _, b in msgs]
    one_by_one = Router(fabric)
    rank, expected, sprayed = [], [], False
    for a, b in msgs:
        routes = one_by_one.selector(a, b).routes
        many = len(routes) > 1
        sprayed |= many
        # A sprayed pair's rank is within its routes; a pinned pair's any number at all.
        k = rng.randrange(len(routes) if many else 8)
        rank.append(k)
        expected.append(routes[k].id if many else routes[0].id)
    assert list(Router(fabric).route_ids(src, dst, rank)) == expected
    assert sprayed == (name == "nvswitch")  # only NVSwitch sprays
