"""Hypothesis checks of the L3 clauses `fabric.hop_limit` and `fabric.tso_window`.

Over random small tree and chain topologies (2-10 nodes, GPUs at the leaves,
switches inside, sometimes a root complex), random link profiles, message
sizes and loads:

* every message's recorded hop count is the length of its route and of the
  (unique) tree path between its endpoints, and no message beats its
  zero-load latency;
* `fabric.hop_limit` fails exactly when some message crossed more than 7 links;
* `fabric.tso_window` agrees with 2 × (farthest GPU's p99 round trip) + 150 ns
  recomputed from the probes table and the graph.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
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


@st.composite
def tree_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    # Sampled rather than integers(): long chains, the interesting ones, stay as likely as short.
    n = draw(st.sampled_from(range(2, 11)))
    if draw(st.booleans()):
        parents = list(range(n - 1))
    else:
        parents = [draw(st.integers(0, i - 1)) for i in range(1, n)]
    edges = [(i + 1, p) for i, p in enumerate(parents)]
    degree = np.bincount(np.array(edges).ravel(), minlength=n)
    names = [f"n{i}" for i in range(n)]
    kinds = ["gpu" if degree[i] == 1 else "switch" for i in range(n)]
    nodes = [{"id": names[i], "kind": kinds[i]} for i in range(n)]
    if draw(st.booleans()):
        nodes.append({"id": "host", "kind": "root_complex"})
        edges.append((len(names), draw(st.integers(0, n - 1))))
        names.append("host")

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
                {"a": names[a], "b": names[b], "link": f"p{k}"}
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


def _verdict(result: RunResult, clause: str) -> Verdict:
    (found,) = [v for v in result.verdicts if v.id == clause]
    return found


@given(tree_scenarios())
def test_hops_latency_and_hop_limit(data: dict[str, Any]) -> None:
    result = simulate(scenario_from_data(data))
    messages = result.tables["messages"]
    graph = result.fabric.graph
    paths = messages["path"].astype(str)

    assert (messages["hops"] == paths.str.count(">")).all()
    for (src, dst), hops in messages.groupby(["src", "dst"], observed=True)["hops"]:
        assert (hops == nx.shortest_path_length(graph, src, dst)).all()
    assert (messages["latency_ns"] >= messages["zero_load_ns"] * (1 - ORACLE_RTOL)).all()

    verdict = _verdict(result, "fabric.hop_limit")
    assert verdict.verdict == ("fail" if messages["hops"].max() > 7 else "pass")


@given(tree_scenarios())
def test_tso_verdict_matches_the_formula(data: dict[str, Any]) -> None:
    result = simulate(scenario_from_data(data))
    verdict = _verdict(result, "fabric.tso_window")
    probes = result.tables["probes"].dropna(subset=["rtt_ns"])
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
    limit = 2 * rtt_max + 150.0
    window = result.scenario.root_complex.tso_window
    assert verdict.limit == pytest.approx(limit, rel=1e-12)
    assert verdict.verdict == ("pass" if window >= limit else "fail")
