"""Hypothesis checks of the L3 clauses `fabric.hop_limit`, `fabric.tso_window` and
`fabric.topology_limits`.

Over random small tree and chain topologies (2-10 nodes, GPUs at the leaves,
switches inside, sometimes a root complex), random link profiles, message
sizes and loads:

* every message's recorded hop count is the length of its route and of the
  (unique) tree path between its endpoints, and no message beats its
  zero-load latency;
* `fabric.tso_window` agrees with 2 × (farthest GPU's p99 round trip) + 150 ns
  recomputed from the probes table and the graph.

Over trees built on a chain of 1-12 switches, so that about half have two GPUs more
than 7 links apart, `fabric.hop_limit` fails exactly when some message's endpoints are
more than 7 links apart in the graph. Over switch fat trees and direct root complexes of
sizes and arbitration latencies either side of the limits, `fabric.topology_limits`
agrees with the limits applied to the scenario as written and to the GPUs the run's
tables show training and carrying traffic.
"""

from __future__ import annotations

import itertools
from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from sitssim.scenario import scenario_from_data
from sitssim.simulation import ORACLE_RTOL, RunResult, simulate
from sitssim.spec.registry import Verdict

# Rough cap on messages per source, to keep every example in the tens of milliseconds.
MESSAGES_PER_SOURCE = 40

profiles = st.fixed_dictionaries(
    {
        "rate": st.sampled_from(["8GT/s", "16GT/s", "32GT/s", "64GT/s"]),
        "lanes": st.sampled_from([1, 2, 4, 8, 16]),
        "encoding": st.sampled_from(["flit256", "128b130b", "8b10b", "none"]),
        "propagation": st.integers(0, 50).map(lambda ns: f"{ns}ns"),
    }
)


def _tree_scenario(
    draw: st.DrawFn, nodes: list[dict[str, str]], edges: list[tuple[str, str]]
) -> dict[str, Any]:
    """A scenario on the tree ``nodes`` and ``edges``, with drawn link profiles, switch and
    root-complex latencies, TSO window and traffic (uniform random, and probes)."""
    link_set = draw(st.lists(profiles, min_size=1, max_size=3))
    edge_links = [draw(st.integers(0, len(link_set) - 1)) for _ in edges]
    size = draw(st.sampled_from([64, 256, 1024, 4096]))
    load = draw(st.floats(0.05, 1.3))
    fastest = max(float(p["rate"][:-4]) * p["lanes"] / 8 for p in link_set)
    duration = min(max(MESSAGES_PER_SOURCE * size / (load * fastest), 300.0), 30_000.0)
    return {
        "name": "random_tree",
        "seed": draw(st.integers(0, 2**16)),
        "duration": f"{duration:.1f}ns",
        "topology": {
            "kind": "graph",
            "nodes": nodes,
            "edges": [
                {"a": a, "b": b, "link": f"p{k}"}
                for (a, b), k in zip(edges, edge_links, strict=True)
            ],
        },
        "links": {f"p{k}": p for k, p in enumerate(link_set)},
        "switch": {"arbitration": f"{draw(st.integers(0, 100))}ns"},
        "root_complex": {
            "arbitration": f"{draw(st.integers(0, 100))}ns",
            "tso_window": f"{10 ** draw(st.floats(2.5, 5.5)):.1f}ns",
        },
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "uniform_random",
                "message_bytes": f"{size}B",
                "load": load,
            },
            {"kind": "probes", "interval": f"{duration / 12:.1f}ns", "turnaround": "10ns"},
        ],
    }


@st.composite
def tree_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    # Sampled rather than integers(): long chains, the interesting ones, stay as likely as short.
    n = draw(st.sampled_from(range(2, 11)))
    if draw(st.booleans()):
        parents = list(range(n - 1))
    else:
        parents = [draw(st.integers(0, i - 1)) for i in range(1, n)]
    links = [(i + 1, p) for i, p in enumerate(parents)]
    degree = np.bincount(np.array(links).ravel(), minlength=n)
    names = [f"n{i}" for i in range(n)]
    nodes = [{"id": names[i], "kind": "gpu" if degree[i] == 1 else "switch"} for i in range(n)]
    edges = [(names[a], names[b]) for a, b in links]
    if draw(st.booleans()):
        nodes.append({"id": "host", "kind": "root_complex"})
        edges.append(("host", names[draw(st.integers(0, n - 1))]))
    return _tree_scenario(draw, nodes, edges)


@st.composite
def chain_trees(draw: st.DrawFn) -> dict[str, Any]:
    """A chain of 1-12 switches with a GPU at each end (the chain's length + 1 links
    apart), up to three more GPUs and sometimes a root complex hung off chain switches,
    under light uniform random traffic (about 15 messages per GPU)."""
    length = draw(st.integers(1, 12))
    chain = [f"s{i}" for i in range(length)]
    gpus = ["g_head", "g_tail"] + [f"g{i}" for i in range(draw(st.integers(0, 3)))]
    nodes = [{"id": n, "kind": "switch"} for n in chain] + [{"id": g, "kind": "gpu"} for g in gpus]
    edges = [*itertools.pairwise(chain), ("g_head", chain[0]), ("g_tail", chain[-1])]
    edges += [(g, chain[draw(st.integers(0, length - 1))]) for g in gpus[2:]]
    if draw(st.booleans()):
        nodes.append({"id": "host", "kind": "root_complex"})
        edges.append(("host", chain[draw(st.integers(0, length - 1))]))
    return {
        "name": "chain_tree",
        "duration": "500ns",
        "topology": {
            "kind": "graph",
            "nodes": nodes,
            "edges": [{"a": a, "b": b} for a, b in edges],
        },
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "uniform_random",
                "arrivals": "periodic",
                "message_bytes": "256B",
                "interval": "32ns",
            }
        ],
    }


def _verdict(result: RunResult, clause: str) -> Verdict:
    (found,) = [v for v in result.verdicts if v.id == clause]
    return found


@given(tree_scenarios())
def test_hops_are_tree_paths_and_no_message_beats_its_zero_load_latency(
    data: dict[str, Any],
) -> None:
    result = simulate(scenario_from_data(data))
    messages = result.tables["messages"]
    graph = result.fabric.graph
    paths = messages["path"].astype(str)

    assert (messages["hops"] == paths.str.count(">")).all()
    for (src, dst), hops in messages.groupby(["src", "dst"], observed=True)["hops"]:
        assert (hops == nx.shortest_path_length(graph, src, dst)).all()
    assert (messages["latency_ns"] >= messages["zero_load_ns"] * (1 - ORACLE_RTOL)).all()


@settings(max_examples=25)
@given(chain_trees())
def test_hop_limit_fails_exactly_when_a_message_crossed_more_than_7_links(
    data: dict[str, Any],
) -> None:
    """fabric.hop_limit: the verdict is the limit applied to the longest distance, in the
    scenario's graph, between the two ends of any message; its measured value is that
    distance. The ci profile draws 17 trees whose messages all stay within 7 links and
    8 where some go farther."""
    result = simulate(scenario_from_data(data))
    messages = result.tables["messages"]
    graph = nx.Graph([(e["a"], e["b"]) for e in data["topology"]["edges"]])
    pairs = messages[["src", "dst"]].astype(str).drop_duplicates()
    farthest = max(nx.shortest_path_length(graph, a, b) for a, b in pairs.itertuples(index=False))
    verdict = _verdict(result, "fabric.hop_limit")
    assert verdict.measured == farthest
    assert verdict.verdict == ("fail" if farthest > 7 else "pass")
    event(verdict.verdict)


@settings(max_examples=25)
@given(tree_scenarios())
def test_tso_verdict_matches_the_formula(data: dict[str, Any]) -> None:
    """fabric.tso_window: the verdict is 2 × the farthest GPU's p99 round trip + 150 ns,
    recomputed from the probes and the graph, against the configured window. The ci profile
    draws 7 windows that hold, 18 that do not and 0 runs without a
    completed probe."""
    result = simulate(scenario_from_data(data))
    verdict = _verdict(result, "fabric.tso_window")
    probes = result.tables["probes"].dropna(subset=["rtt_ns"])
    event(verdict.verdict)
    if probes.empty:
        assert verdict.verdict == "n/a"
        return
    requester = str(probes["src"].iloc[0])
    distance = nx.single_source_shortest_path_length(result.fabric.graph, requester)
    hops = probes["dst"].astype(str).map(distance)
    farthest = probes[hops == hops.max()]
    rtt_max = max(
        np.quantile(group.to_numpy(), 0.99)
        for _, group in farthest.groupby("dst", observed=True)["rtt_ns"]
    )
    required = 2 * rtt_max + 150.0
    window = result.scenario.root_complex.tso_window
    assert verdict.measured == pytest.approx(required, rel=1e-12)
    assert verdict.limit == window
    assert verdict.verdict == ("pass" if window >= required else "fail")


@st.composite
def sized_fabrics(draw: st.DrawFn) -> dict[str, Any]:
    """A switch fat tree of 2-12 GPUs (one or two levels, 28-60 ns arbitration per level)
    or a direct root complex of 1-6, with uniform random traffic among the first 2 or more
    of its GPUs, or none."""
    if draw(st.booleans()):
        gpus = draw(st.integers(2, 12))
        levels = draw(st.sampled_from([1, 2]))
        topology = {
            "kind": "fat_tree",
            "gpus": gpus,
            "levels": levels,
            "radix": 4 if levels == 2 else max(gpus, 2),
        }
        switch = {"arbitration": [f"{draw(st.integers(28, 60))}ns" for _ in range(levels)]}
    else:
        gpus = draw(st.integers(1, 6))
        topology = {"kind": "direct_rc", "gpus": gpus}
        switch = {}
    workloads = []
    if gpus >= 2 and draw(st.integers(0, 4)):
        talking = [f"gpu{i}" for i in range(draw(st.integers(2, gpus)))]
        workloads.append(
            {
                "kind": "synthetic",
                "pattern": "uniform_random",
                "message_bytes": "256B",
                "load": 0.3,
                "sources": talking,
                "destinations": talking,
            }
        )
    return {
        "name": "sized",
        "duration": "1us",
        "topology": topology,
        "switch": switch,
        "workloads": workloads,
    }


def _seen_gpus(result: RunResult) -> set[str]:
    """GPUs at an end of a link that entered L0 and at an end of a delivered message."""
    states, links = result.tables["link_states"], result.tables["phy_links"]
    trained_links = set(states.loc[states["state"] == "L0", "link"])
    up = links[links["link"].isin(trained_links)]
    trained = set(up["upstream"]) | set(up["downstream"])
    messages = result.tables["messages"].dropna(subset=["t_deliver_ns"])
    return trained & (set(messages["src"]) | set(messages["dst"])) & set(result.fabric.gpus)


@settings(max_examples=20)
@given(sized_fabrics())
def test_topology_limits_verdict_matches_the_limits_applied_to_the_scenario(
    data: dict[str, Any],
) -> None:
    """fabric.topology_limits: fails exactly when the scenario as written has more GPUs
    than its shape allows (8 behind switches, 4 on a root complex) or a switch level
    arbitrating in under 35 ns; its measured part counts the GPUs the run's tables show
    training and carrying traffic, present only when a message was delivered. The ci
    profile draws 8 conforming fabrics and 12 that break one of its limits."""
    result = simulate(scenario_from_data(data))
    verdict = _verdict(result, "fabric.topology_limits")
    topology = data["topology"]
    switched = topology["kind"] == "fat_tree"
    limit = 8 if switched else 4
    arbitration = [float(a[:-2]) for a in data["switch"].get("arbitration", [])]
    breaks = topology["gpus"] > limit or any(a < 35 for a in arbitration)
    assert verdict.verdict == ("fail" if breaks else "pass")
    parts = {p.name: p for p in verdict.parts}
    assert parts["gpus_configured"].measured == topology["gpus"]
    assert parts["gpus_configured"].limit == limit
    if switched:
        assert parts["arbitration"].measured == min(arbitration)
    else:
        assert "arbitration" not in parts
    seen = _seen_gpus(result)
    delivered = result.tables["messages"]["t_deliver_ns"].notna().any()
    assert ("gpus_seen" in parts) == bool(delivered)
    if delivered:
        talking = set(data["workloads"][0]["sources"])
        assert seen <= talking
        assert parts["gpus_seen"].measured == len(seen)
    event(verdict.verdict)
