"""Weighted ECMP (clause ``switch.ecmp_weight``): implicit weights, flow hashing, the
routing function on real fabrics.

The SPEC's three implicit weights come from the formula on a 100G port; a link trained
narrower or slower weighs less; the hash is the same in any interpreter; on a fabric, every
message is delivered along a shortest path, a flow's messages all take one path, flows split
over a group by weight (and evenly on a faulty device), the ranks ECMP records name the
paths the messages really crossed, and equal stage seeds polarise a second stage.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import networkx as nx
import pytest
import simpy
from scipy.stats import chisquare
from switch.test_input_queued import transport_of

from sitssim.fabric.messages import KIND_DATA
from sitssim.fabric.routing import Router, TableRouting
from sitssim.fabric.topology import build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import scenario_from_data
from sitssim.stages.base import empty_schedule
from sitssim.switch.ecmp import (
    EcmpRouting,
    ImplicitWeight,
    flow_hash,
    flow_key,
    implicit_weight,
    negotiated_if_speed_bps,
    stage_seed,
    weighted_member,
)

ALPHA = 1e-6
FIELDS = ("src", "dst", "workload")
LLDP_MS = {"m0": 0.3, "m1": 2.1, "m2": 5.6}


@pytest.mark.parametrize(("lldp_ms", "weight"), [(0.3, 100), (2.1, 96), (5.6, 89)])
@pytest.mark.parametrize(("lanes", "gt_per_lane"), [(4, 25.0), (2, 50.0), (1, 100.0)])
def test_a_100g_port_takes_the_spec_weights(
    lanes: int, gt_per_lane: float, lldp_ms: float, weight: int
) -> None:
    speed = negotiated_if_speed_bps(lanes, gt_per_lane)
    assert speed == 100_000_000_000
    assert implicit_weight(speed, lldp_ms) == weight
    assert ImplicitWeight(speed, lldp_ms).weight == weight


def test_the_weight_is_at_least_one_and_needs_sane_measurements() -> None:
    # 10G with 6 ms of LLDP delay: 10 - 12 would be negative.
    assert implicit_weight(negotiated_if_speed_bps(1, 10.0), 6.0) == 1
    # The delay's penalty is truncated, not rounded: 0.99 ms costs 1, 1.0 ms costs 2.
    assert implicit_weight(100_000_000_000, 0.99) == 99
    assert implicit_weight(100_000_000_000, 1.0) == 98
    for speed, lldp in [(-1, 0.3), (100_000_000_000, -0.1), (100_000_000_000, math.nan)]:
        with pytest.raises(ValueError, match="LLDP delay"):
            implicit_weight(speed, lldp)
    for lanes, rate in [(0, 64.0), (16, 0.0)]:
        with pytest.raises(ValueError, match="lanes"):
            negotiated_if_speed_bps(lanes, rate)


def three_ways(narrow_lanes: int = 16) -> Transport:
    """``s0 - a - {m0, m1, m2} - z - r0`` around input-queued switches; ``a-m2`` is the
    ``narrow`` link, trained to ``narrow_lanes`` lanes."""
    nodes = [{"id": n, "kind": "gpu"} for n in ("s0", "r0")]
    nodes += [{"id": n, "kind": "switch"} for n in ("a", "m0", "m1", "m2", "z")]
    edges = [{"a": "s0", "b": "a"}, {"a": "z", "b": "r0"}]
    for m in ("m0", "m1", "m2"):
        edges.append({"a": "a", "b": m, **({"link": "narrow"} if m == "m2" else {})})
        edges.append({"a": m, "b": "z"})
    return transport_of(nodes, edges, False, {"input_buffer": 4096}, lanes=narrow_lanes)


def with_ecmp(t: Transport, **options: Any) -> EcmpRouting:
    """Every node of ``t`` routed by ECMP over a fresh table routing of ``t``'s router."""
    columns = {"src": t.src, "dst": t.dst, "workload": t.workload}
    ecmp = EcmpRouting(TableRouting(t.router, t.src, t.dst), columns, fields=FIELDS, **options)
    ecmp.connect(t.ports)
    for node in t.node_objects:
        node.routing = ecmp
    return ecmp


def measured_weights(t: Transport) -> dict[tuple[str, str], ImplicitWeight]:
    """``a``'s members weighted from their channels' trained lanes and rate and an LLDP delay."""
    out = {}
    for m, lldp in LLDP_MS.items():
        ch = t.fabric.channels[t.fabric.channel_index[("a", m)]]
        out[("a", m)] = ImplicitWeight(negotiated_if_speed_bps(ch.lanes, ch.rate_gts), lldp)
    return out


def test_a_link_trained_to_fewer_lanes_or_a_lower_rate_weighs_less() -> None:
    full, narrow = measured_weights(three_ways()), measured_weights(three_ways(narrow_lanes=4))
    # Every link at 16 x 64 GT/s: 1024 Gbit/s each, less the delay's penalty.
    assert [w.weight for w in full.values()] == [1024, 1020, 1013]
    # a-m2 trained to 4 lanes: a quarter of the speed.
    assert narrow[("a", "m2")].if_speed_bps == 256_000_000_000
    assert narrow[("a", "m2")].weight == 256 - 11
    assert negotiated_if_speed_bps(16, 32.0) * 2 == negotiated_if_speed_bps(16, 64.0)
    assert implicit_weight(negotiated_if_speed_bps(16, 32.0), 0.3) == 512


_HASHES_IN_A_FRESH_PROCESS = """
import json
from sitssim.switch.ecmp import flow_hash, flow_key, stage_seed
keys = [flow_key(v) for v in ([0], [1, 2, 3], [3, 2, 1], [-1, 2**70])]
seeds = [stage_seed(s, n) for s in (0, 7) for n in ("sw1.0", "a")]
print(json.dumps({"keys": keys, "seeds": seeds, "hash": flow_hash(keys[1], seeds[0])}))
"""


def test_the_hash_is_the_same_in_an_interpreter_with_another_string_hash_seed() -> None:
    env = {**os.environ, "PYTHONHASHSEED": "20260"}
    done = subprocess.run(
        [sys.executable, "-c", _HASHES_IN_A_FRESH_PROCESS],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    theirs = json.loads(done.stdout)
    keys = [flow_key(v) for v in ([0], [1, 2, 3], [3, 2, 1], [-1, 2**70])]
    seeds = [stage_seed(s, n) for s in (0, 7) for n in ("sw1.0", "a")]
    assert theirs == {"keys": keys, "seeds": seeds, "hash": flow_hash(keys[1], seeds[0])}
    # The fields' order matters, and every key and seed is a 64-bit word.
    assert len(set(keys)) == len(keys) and len(set(seeds)) == len(seeds)
    assert all(0 <= x < 2**64 for x in keys + seeds)


def test_each_member_owns_its_weights_share_of_the_hash_space() -> None:
    cumulative = (1, 3, 6)
    # Member i owns hashes h with cumulative[i-1] <= h * 6 / 2**64 < cumulative[i].
    first_of = [-(-(k * 2**64) // 6) for k in (0, 1, 3)]
    for i, start in enumerate(first_of):
        assert weighted_member(start, cumulative) == i
        if start:
            assert weighted_member(start - 1, cumulative) == i - 1
    assert weighted_member(2**64 - 1, cumulative) == 2


def routes_of(t: Transport, ecmp: EcmpRouting) -> list[tuple[int, ...]]:
    """The channels of each message's path as its ECMP rank names it."""
    names, index = t.router.tables.names, t.fabric.channel_index
    paths = (
        t.router.tables.path(names[s], names[d], k)
        for s, d, k in zip(t.src, t.dst, ecmp.rank, strict=True)
    )
    return [tuple(map(index.__getitem__, pairwise(p))) for p in paths]


def flows_over_a(t: Transport, ecmp: EcmpRouting, flows: int, repeat: int) -> list[int]:
    """Inject ``repeat`` messages of each of ``flows`` flows from s0 to r0, run; the member of
    ``a`` (0, 1, 2 for m0, m1, m2) each flow took, after checking that all of a flow's
    messages took one route, a shortest one, and that the ports carried those routes."""
    s0, r0 = t.node_id["s0"], t.node_id["r0"]
    for _ in range(repeat):
        for f in range(flows):
            t.inject(s0, r0, 256, 0, KIND_DATA, f)
    t.run()
    assert not any(math.isnan(x) for x in t.t_deliver)
    routes = routes_of(t, ecmp)
    shortest = nx.shortest_path_length(t.fabric.graph, "s0", "r0")
    assert all(len(r) == shortest for r in routes)
    taken: dict[int, set[tuple[int, ...]]] = {}
    for m, route in enumerate(routes):
        taken.setdefault(t.workload[m], set()).add(route)
    per_flow = [taken[f] for f in range(flows)]
    assert all(len(r) == 1 for r in per_flow)
    used = Counter(c for r in routes for c in r)
    assert all(p.messages == used[c] for c, p in enumerate(t.ports))
    # The base drew a rank for every message, as it does alone.
    assert len(ecmp.base.rank) == len(t.src)
    members = [t.fabric.channel_index[("a", m)] for m in LLDP_MS]
    return [next(members.index(c) for c in r if c in members) for (r,) in per_flow]


def test_flows_split_over_a_group_by_their_implicit_weights() -> None:
    t = three_ways(narrow_lanes=4)
    weights = measured_weights(t)
    ecmp = with_ecmp(t, weights=weights, seed=5)
    flows = 900
    chosen = flows_over_a(t, ecmp, flows, repeat=2)
    w = [weights[("a", m)].weight for m in LLDP_MS]
    assert w == [1024, 1020, 245]
    counts = [chosen.count(i) for i in range(3)]
    assert chisquare(counts, [flows * x / sum(w) for x in w]).pvalue > ALPHA
    # ... and not evenly: the narrow member carries about a tenth.
    assert chisquare(counts).pvalue < ALPHA
    # Each choice is the pure function of the flow's fields, a's seed and the weights.
    s0, r0 = t.node_id["s0"], t.node_id["r0"]
    cumulative = (w[0], w[0] + w[1], sum(w))
    seed = stage_seed(5, "a")
    expected = [
        weighted_member(flow_hash(flow_key((s0, r0, f)), seed), cumulative) for f in range(flows)
    ]
    assert chosen == expected


@pytest.mark.parametrize("faulty", [{"ignore_weights": True}, {"faulty_nodes": {"a"}}])
def test_a_device_that_ignores_its_weights_splits_evenly(faulty: dict[str, Any]) -> None:
    t = three_ways(narrow_lanes=4)
    ecmp = with_ecmp(t, weights=measured_weights(t), seed=5, **faulty)
    flows = 900
    counts = Counter(flows_over_a(t, ecmp, flows, repeat=1))
    w = [1024, 1020, 245]
    assert chisquare([counts[i] for i in range(3)]).pvalue > ALPHA
    assert chisquare([counts[i] for i in range(3)], [flows * x / sum(w) for x in w]).pvalue < ALPHA


def test_a_faulty_node_elsewhere_leaves_the_weighted_group_alone() -> None:
    t = three_ways(narrow_lanes=4)
    weighted = flows_over_a(t, with_ecmp(t, weights=measured_weights(t), seed=5), 300, 1)
    t = three_ways(narrow_lanes=4)
    ecmp = with_ecmp(t, weights=measured_weights(t), seed=5, faulty_nodes={"z", "m0"})
    assert flows_over_a(t, ecmp, 300, 1) == weighted


def diamond() -> Transport:
    """``g0 - A - {B1, B2} - {C1, C2} - D - g1``, every B joined to every C: two
    consecutive ECMP stages (A, then B1 or B2) on the way from g0 to g1."""
    switches = ("A", "B1", "B2", "C1", "C2", "D")
    nodes = [{"id": "g0", "kind": "gpu"}, {"id": "g1", "kind": "gpu"}]
    nodes += [{"id": n, "kind": "switch"} for n in switches]
    edges = [{"a": "g0", "b": "A"}, {"a": "D", "b": "g1"}]
    edges += [{"a": "A", "b": b} for b in ("B1", "B2")]
    edges += [{"a": b, "b": c} for b in ("B1", "B2") for c in ("C1", "C2")]
    edges += [{"a": c, "b": "D"} for c in ("C1", "C2")]
    return transport_of(nodes, edges, False, {"input_buffer": 4096})


def second_stage_load(equal_stage_seeds: bool) -> dict[str, int]:
    t = diamond()
    ecmp = with_ecmp(t, seed=3, equal_stage_seeds=equal_stage_seeds)
    for f in range(800):
        t.inject(t.node_id["g0"], t.node_id["g1"], 256, 0, KIND_DATA, f)
    t.run()
    assert not any(math.isnan(x) for x in t.t_deliver)
    routes = routes_of(t, ecmp)
    used = Counter(c for r in routes for c in r)
    assert all(p.messages == used[c] for c, p in enumerate(t.ports))
    index = t.fabric.channel_index
    return {f"{b}>{c}": used[index[(b, c)]] for b in ("B1", "B2") for c in ("C1", "C2")}


def test_equal_stage_seeds_polarise_the_second_stage() -> None:
    # One seed everywhere: B1 and B2 hash a flow as A did, so each sends all it gets by
    # the member of the same position as A's choice, and the crossing links stay idle.
    polarised = second_stage_load(equal_stage_seeds=True)
    assert polarised["B1>C2"] == polarised["B2>C1"] == 0
    assert polarised["B1>C1"] > 300 and polarised["B2>C2"] > 300
    # A seed per stage: every second-stage link carries about a quarter.
    spread = second_stage_load(equal_stage_seeds=False)
    assert chisquare(list(spread.values())).pvalue > ALPHA


def test_the_ranks_ecmp_records_name_the_paths_messages_crossed(
    fat_tree_data: Callable[..., dict[str, Any]],
) -> None:
    """One message at a time on a fat tree (ideal output-queued switches), one leaf's
    uplinks weighted, the other's not: the channels each message crossed are its rank's,
    and a router that lists every tied path of a pair (spraying) names them by route id."""
    fabric = build_fabric(scenario_from_data(fat_tree_data()))
    router = Router(fabric, spray=True)
    t = Transport(simpy.Environment(), fabric, router, sorted(fabric.graph), empty_schedule())
    spines = [n for n in sorted(fabric.graph) if n.startswith("sw2.")]
    weights = {("sw1.0", s): w for s, w in zip(spines, (1, 2, 3, 4), strict=True)}
    ecmp = with_ecmp(t, weights=weights, seed=9)
    crossed = []
    # Four flows of each pair, so that every spine is some cross-leaf flow's choice.
    pairs = [(s, d) for s in fabric.gpus for d in [*fabric.gpus, "rc0"] if s != d]
    for f, (src, dst) in enumerate(pairs * 4):
        before = [p.messages for p in t.ports]
        t.inject(t.node_id[src], t.node_id[dst], 64, 0, KIND_DATA, f)
        t.run()
        used = [c for c, p in enumerate(t.ports) if p.messages > before[c]]
        crossed.append(tuple(sorted(used, key=lambda c: t.ports[c].last_start)))
    assert crossed == routes_of(t, ecmp)
    ids = router.route_ids(t.src, t.dst, ecmp.rank)
    assert crossed == [router.routes[i].channels for i in ids]
    # Cross-leaf messages took every spine from both leaves: the ranks were not all 0.
    leaf_to_spine = {fabric.channels[r[1]].name for r in crossed if len(r) == 4}
    assert leaf_to_spine == {f"{leaf}>{s}" for leaf in ("sw1.0", "sw1.1") for s in spines}


def test_a_bad_configuration_is_refused_when_built() -> None:
    t = three_ways()
    columns = {"src": t.src, "dst": t.dst, "workload": t.workload}

    def build(**options: Any) -> EcmpRouting:
        return EcmpRouting(TableRouting(t.router, t.src, t.dst), columns, **options)

    with pytest.raises(ValueError, match=r"group of a over m0, m1, m2: .* but not m2"):
        build(fields=FIELDS, weights={("a", "m0"): 3, ("a", "m1"): 4})
    with pytest.raises(ValueError, match="a>r0: no such channel"):
        build(fields=FIELDS, weights={("a", "r0"): 3})
    with pytest.raises(ValueError, match="must be >= 1"):
        build(fields=FIELDS, weights={("a", m): 0 for m in LLDP_MS})
    with pytest.raises(ValueError, match="no per-message column 'tenant'"):
        build()
    with pytest.raises(ValueError, match="at least one hashed field"):
        build(fields=())
    with pytest.raises(ValueError, match="faulty node 'q'"):
        build(fields=FIELDS, faulty_nodes={"q"})
    # A weight on a channel that is no group's member (z's only way to r0) is harmless.
    build(fields=FIELDS, weights={("z", "r0"): 3})
