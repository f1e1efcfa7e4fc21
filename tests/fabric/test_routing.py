"""Routing (issue 2, item 4): shortest paths, deterministic, ties spread over spines / planes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from itertools import pairwise, permutations
from typing import Any

import networkx as nx
import pytest

from sitssim.fabric.routing import Route, Router
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate

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
