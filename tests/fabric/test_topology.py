"""Topology builders: fat tree, direct RC, NVSwitch, explicit graphs."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import combinations
from typing import Any

import networkx as nx
import pytest

from sitssim.fabric.topology import Fabric, build_fabric, plane_link_counts
from sitssim.scenario import scenario_from_data

ScenarioData = dict[str, Any]


def _fabric(topology: dict[str, Any], **extra: Any) -> Fabric:
    return build_fabric(
        scenario_from_data({"name": "t", "duration": "1us", "topology": topology, **extra})
    )


def _switches_at(fabric: Fabric, level: int) -> list[str]:
    return [s for s in fabric.switches if fabric.graph.nodes[s]["level"] == level]


def _single_link_bandwidth(profile: dict[str, Any]) -> float:
    """Payload bandwidth of one link of ``profile``, measured on a two-GPU graph."""
    fabric = _fabric(
        {
            "kind": "graph",
            "nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}],
            "edges": [{"a": "a", "b": "b"}],
        },
        links={"default": profile},
    )
    return fabric.channels[0].bytes_per_ns


FAT_TREES = [
    # (gpus, levels, radix, spines)
    (8, 2, 4, 4),
    (8, 2, 4, 1),
    (4, 2, 4, 1),
    (8, 3, 2, 1),
    (16, 2, 4, 1),
    (4, 1, 4, 1),
    (6, 2, 4, 2),
    (12, 2, 4, 1),
    (27, 3, 3, 3),
]


@pytest.mark.parametrize(("gpus", "levels", "radix", "spines"), FAT_TREES)
def test_fat_tree_shape(gpus: int, levels: int, radix: int, spines: int) -> None:
    topo = {"kind": "fat_tree", "gpus": gpus, "levels": levels, "radix": radix, "spines": spines}
    fabric = _fabric(topo)
    g = fabric.graph

    expected_counts = [math.ceil(gpus / radix**level) for level in range(1, levels + 1)]
    if spines > 1:
        expected_counts[-1] = spines
    assert [len(_switches_at(fabric, lv)) for lv in range(1, levels + 1)] == expected_counts
    assert len(fabric.gpus) == gpus
    assert g.number_of_nodes() == gpus + sum(expected_counts) + 1

    # Every node below the top has one uplink, or one per spine just under the spines.
    below_spines = expected_counts[-2] if levels > 1 else gpus
    uplinks = gpus + sum(expected_counts[:-1]) + (spines - 1) * below_spines
    assert g.number_of_edges() == uplinks + 1
    if spines == 1:
        assert nx.is_tree(g)

    def up(node: str) -> list[str]:
        level = g.nodes[node].get("level", 0)
        return [n for n in g[node] if g.nodes[n].get("level", 0) == level + 1]

    def down(node: str) -> list[str]:
        level = g.nodes[node]["level"]
        return [n for n in g[node] if g.nodes[n].get("level", 0) == level - 1 and n != "rc0"]

    for gpu in fabric.gpus:
        assert g.degree(gpu) == 1
    for sw in fabric.switches:
        level = g.nodes[sw]["level"]
        assert 1 <= len(down(sw)) <= radix
        if level < levels:
            assert len(up(sw)) == (spines if level == levels - 1 else 1)
    assert list(g["rc0"]) == [f"sw{levels}.0"]
    assert fabric.root == "rc0"

    # Two GPUs meet at their lowest common switch: the farthest pair is 2 x levels apart
    # once the GPUs outgrow one subtree below the top.
    distances = [nx.shortest_path_length(g, a, b) for a, b in combinations(fabric.gpus, 2)]
    spans_top = gpus > radix ** (levels - 1)
    assert (max(distances) == 2 * levels) == spans_top
    assert max(distances) <= 2 * levels
    assert min(distances) == 2


def test_fat_tree_without_root_complex() -> None:
    fabric = _fabric({"kind": "fat_tree", "gpus": 8, "root_complex": False})
    assert fabric.root is None
    assert {fabric.node_kind(n) for n in fabric.graph} == {"gpu", "switch"}


def test_direct_rc_is_a_star_around_the_root_complex() -> None:
    fabric = _fabric({"kind": "direct_rc", "gpus": 4}, root_complex={"arbitration": "27ns"})
    g = fabric.graph
    assert fabric.root == "rc0"
    assert sorted(g["rc0"]) == sorted(fabric.gpus)
    assert all(g.degree(gpu) == 1 for gpu in fabric.gpus)
    assert len(fabric.channels) == 2 * len(fabric.gpus)
    assert fabric.node_latency_ns["rc0"] == 27.0
    assert fabric.switches == []


def test_nvswitch_splits_eighteen_links_five_four_four_five() -> None:
    # The HGX H100 baseboard wiring the builder models.
    assert plane_link_counts(18, 4) == [5, 4, 4, 5]


@pytest.mark.parametrize(("links", "planes"), [(18, 4), (12, 4), (7, 3), (9, 2), (5, 5), (19, 4)])
def test_plane_link_counts_spread_every_link_evenly(links: int, planes: int) -> None:
    counts = plane_link_counts(links, planes)
    assert len(counts) == planes
    assert sum(counts) == links
    assert max(counts) - min(counts) <= 1
    assert min(counts) >= 1


def test_nvswitch_trunks_carry_links_times_one_links_bandwidth() -> None:
    profile = {"rate": "64GT/s", "lanes": 2, "encoding": "flit256"}
    per_link = _single_link_bandwidth(profile)
    fabric = _fabric(
        {"kind": "nvswitch", "gpus": 8, "planes": 4, "links_per_gpu": 18},
        links={"default": profile},
    )
    counts = plane_link_counts(18, 4)
    g = fabric.graph
    planes = fabric.switches
    assert len(planes) == 4
    assert g.number_of_edges() == 8 * 4
    for gpu in fabric.gpus:
        assert sorted(g[gpu]) == planes
        for p, plane in enumerate(planes):
            for pair in ((gpu, plane), (plane, gpu)):
                channel = fabric.channels[fabric.channel_index[pair]]
                assert channel.links == counts[p]
                assert channel.bytes_per_ns == pytest.approx(counts[p] * per_link, rel=1e-12)
    # Every GPU reaches every other through any plane in two hops.
    for plane in planes:
        assert sorted(g[plane]) == sorted(fabric.gpus)


def test_graph_builds_what_it_declares() -> None:
    profile = {"rate": "32GT/s", "lanes": 8, "encoding": "128b130b", "length": "1m"}
    fabric = _fabric(
        {
            "kind": "graph",
            "nodes": [
                {"id": "g0", "kind": "gpu"},
                {"id": "g1", "kind": "gpu"},
                {"id": "leaf", "kind": "switch", "level": 1},
                {"id": "core", "kind": "switch", "level": 2},
                {"id": "host", "kind": "root_complex"},
            ],
            "edges": [
                {"a": "g0", "b": "leaf"},
                {"a": "g1", "b": "leaf", "link": "far"},
                {"a": "leaf", "b": "core", "links": 3},
                {"a": "core", "b": "host"},
            ],
        },
        links={"default": profile, "far": {**profile, "length": "2m"}},
        switch={"arbitration": ["40ns", "60ns"]},
        root_complex={"arbitration": "25ns"},
    )
    per_link = _single_link_bandwidth(profile)
    assert fabric.kind == "graph"
    assert fabric.gpus == ["g0", "g1"]
    assert fabric.root == "host"
    assert sorted(map(sorted, fabric.graph.edges)) == [
        ["core", "host"],
        ["core", "leaf"],
        ["g0", "leaf"],
        ["g1", "leaf"],
    ]
    by_name = {c.name: c for c in fabric.channels}
    assert len(by_name) == 8
    assert by_name["leaf>core"].bytes_per_ns == pytest.approx(3 * per_link, rel=1e-12)
    assert by_name["core>leaf"].links == 3
    assert by_name["g0>leaf"].bytes_per_ns == pytest.approx(per_link, rel=1e-12)
    # Flight time follows the cable length.
    assert by_name["g1>leaf"].propagation_ns == pytest.approx(2 * by_name["g0>leaf"].propagation_ns)
    assert fabric.node_latency_ns == {
        "g0": 0.0,
        "g1": 0.0,
        "leaf": 40.0,
        "core": 60.0,
        "host": 25.0,
    }


@pytest.mark.parametrize(
    ("rate", "lanes", "encoding"),
    [("64GT/s", 16, "flit256"), ("32GT/s", 4, "128b130b"), ("8GT/s", 1, "8b10b")],
)
def test_channel_bandwidth_scales_with_rate_and_lanes(rate: str, lanes: int, encoding: str) -> None:
    base = _single_link_bandwidth({"rate": rate, "lanes": lanes, "encoding": encoding})
    doubled_rate = _single_link_bandwidth(
        {"rate": f"{2 * float(rate[:-4]):g}GT/s", "lanes": lanes, "encoding": encoding}
    )
    doubled_lanes = _single_link_bandwidth({"rate": rate, "lanes": 2 * lanes, "encoding": encoding})
    raw = _single_link_bandwidth({"rate": rate, "lanes": lanes, "encoding": "none"})
    assert doubled_rate == pytest.approx(2 * base)
    assert doubled_lanes == pytest.approx(2 * base)
    # A line code only ever takes bandwidth away; the raw link carries rate x lanes bits.
    assert base < raw
    assert raw == pytest.approx(float(rate[:-4]) * lanes / 8)


def test_builder_output_is_stable_across_builds(
    fat_tree_data: Callable[..., ScenarioData],
) -> None:
    first = build_fabric(scenario_from_data(fat_tree_data()))
    second = build_fabric(scenario_from_data(fat_tree_data()))
    assert first.channels == second.channels
    assert sorted(first.graph.edges) == sorted(second.graph.edges)


# --- crossbar -------------------------------------------------------------------------


@pytest.mark.parametrize("ports", [1, 3, 8])
def test_a_crossbar_puts_separate_senders_and_receivers_on_one_switch(ports: int) -> None:
    from sitssim.fabric.topology import CROSSBAR_SWITCH, crossbar_ends

    fabric = _fabric(
        {"kind": "crossbar", "ports": ports, "link": "bench"},
        links={"bench": {"rate": "32GT/s", "lanes": 8}},
    )
    senders, receivers = crossbar_ends(fabric)
    assert senders == [f"in{i}" for i in range(ports)]
    assert receivers == [f"out{j}" for j in range(ports)]
    # Senders first in GPU order, so a pattern over GPU indices meets them first.
    assert fabric.gpus == senders + receivers
    assert fabric.switches == [CROSSBAR_SWITCH]
    assert fabric.graph.nodes[CROSSBAR_SWITCH]["level"] == 1
    assert fabric.root is None
    g = fabric.graph
    # Every GPU has exactly one link, to the switch: no GPU is both a sender and a receiver.
    assert {frozenset(e) for e in g.edges} == {
        frozenset((n, CROSSBAR_SWITCH)) for n in senders + receivers
    }
    assert len(fabric.channels) == 4 * ports
    assert {c.profile for c in fabric.channels} == {"bench"}
    assert len({c.bytes_per_ns for c in fabric.channels}) == 1


def test_a_crossbar_needs_at_least_one_port_and_a_known_profile() -> None:
    from sitssim.errors import InputError

    with pytest.raises(InputError) as caught:
        _fabric({"kind": "crossbar", "ports": 0})
    assert caught.value.field == "topology.ports"
    with pytest.raises(InputError) as caught:
        _fabric({"kind": "crossbar", "ports": 2, "link": "fast"})
    assert caught.value.field == "topology.link"
    assert "unknown link profile 'fast'" in str(caught.value)
