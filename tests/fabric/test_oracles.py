"""The built-in oracles: bounds that no correct run can beat.

No message is faster than its zero-load latency; delivered throughput never
exceeds the throughput bound; the channel-load LP returns the offered load
when every channel has headroom and less when a channel is oversubscribed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from sitssim.scenario import scenario_from_data
from sitssim.simulation import ORACLE_RTOL, RunResult, simulate

ScenarioData = dict[str, Any]

RUNS: dict[str, dict[str, Any]] = {
    "uniform-0.3": {"pattern": "uniform_random", "load": 0.3},
    "tornado-0.9": {"pattern": "tornado", "load": 0.9},
    "permutation-0.6": {"pattern": "permutation", "load": 0.6},
    "bit_complement-1.5": {"pattern": "bit_complement", "load": 1.5},
    "uniform-1.5": {"pattern": "uniform_random", "load": 1.5},
    "hotspot-0.9": {"pattern": "hotspot", "load": 0.9, "hotspot": "gpu5"},
    # Each GPU has 18 NVLinks of bandwidth: big messages, short run, few messages.
    "nvswitch-uniform-1.5": {
        "pattern": "uniform_random",
        "load": 1.5,
        "probes": None,
        "message_bytes": "16KiB",
        "duration": "3us",
    },
    "direct_rc-shuffle-0.8": {"pattern": "shuffle", "load": 0.8},
}
TOPOLOGY = {
    "nvswitch-uniform-1.5": {"kind": "nvswitch", "gpus": 8},
    "direct_rc-shuffle-0.8": {"kind": "direct_rc", "gpus": 4},
}


def _window_rate(result: RunResult, column: str) -> float:
    """Bytes per ns of the messages whose ``column`` time falls inside the traffic phase."""
    messages = result.tables["messages"]
    window = result.scenario.duration
    return float(messages.loc[messages[column] <= window, "bytes"].sum()) / window


@pytest.fixture(scope="module")
def runs(fat_tree_data: Callable[..., ScenarioData]) -> dict[str, RunResult]:
    out = {}
    for name, params in RUNS.items():
        data = fat_tree_data(**params)
        if name in TOPOLOGY:
            data["topology"] = TOPOLOGY[name]
        out[name] = simulate(scenario_from_data(data))
    return out


@pytest.mark.parametrize("name", RUNS)
def test_no_message_beats_its_zero_load_latency(name: str, runs: dict[str, RunResult]) -> None:
    messages = runs[name].tables["messages"]
    assert len(messages) > 100
    latency = messages["latency_ns"].to_numpy()
    bound = messages["zero_load_ns"].to_numpy()
    assert np.all(latency >= bound * (1 - ORACLE_RTOL))
    assert runs[name].metrics["oracle_latency_violations"] == 0


@pytest.mark.parametrize("name", RUNS)
def test_delivered_throughput_never_exceeds_the_bound(
    name: str, runs: dict[str, RunResult]
) -> None:
    result = runs[name]
    bound = result.throughput
    delivered = _window_rate(result, "t_deliver_ns")
    assert result.metrics["delivered_GBps"] == pytest.approx(delivered, rel=1e-12)
    assert bound.offered_bytes_per_ns == pytest.approx(_window_rate(result, "t_inject_ns"))
    assert delivered <= bound.bound_bytes_per_ns * (1 + 1e-9)
    assert bound.bound_bytes_per_ns <= bound.offered_bytes_per_ns * (1 + 1e-9)
    # Scaling every flow down by the headroom is feasible, so the LP optimum is at least that.
    feasible = bound.offered_bytes_per_ns * min(1.0, bound.headroom)
    assert bound.bound_bytes_per_ns >= feasible * (1 - 1e-9)


def test_lp_bound_is_the_offered_load_when_every_channel_has_headroom(
    runs: dict[str, RunResult],
) -> None:
    bound = runs["uniform-0.3"].throughput
    assert bound.method == "channel-load LP"
    assert bound.headroom > 1
    assert bound.bound_bytes_per_ns == pytest.approx(bound.offered_bytes_per_ns, rel=1e-9)


@pytest.mark.parametrize("name", ["hotspot-0.9", "uniform-1.5", "bit_complement-1.5"])
def test_lp_bound_drops_below_offered_on_an_oversubscribed_channel(
    name: str, runs: dict[str, RunResult]
) -> None:
    result = runs[name]
    bound = result.throughput
    assert bound.headroom < 1
    assert bound.bound_bytes_per_ns < bound.offered_bytes_per_ns * 0.99
    # Overload is real: the fabric delivers less than was offered.
    assert _window_rate(result, "t_deliver_ns") < bound.offered_bytes_per_ns * 0.99


def test_hotspot_bottleneck_is_the_hotspots_ejection_channel(runs: dict[str, RunResult]) -> None:
    bound = runs["hotspot-0.9"].throughput
    assert bound.bottleneck_channel is not None
    assert bound.bottleneck_channel.endswith(">gpu5")


def test_lp_bound_of_two_flows_merging_onto_one_channel_is_that_channel(
    channel_bandwidth: Callable[[ScenarioData, str, str], float],
) -> None:
    names = ["g0", "g1", "g2"]
    data: ScenarioData = {
        "name": "merge",
        "seed": 4,
        "duration": "20us",
        "topology": {
            "kind": "graph",
            "nodes": [{"id": "sw", "kind": "switch"}] + [{"id": n, "kind": "gpu"} for n in names],
            "edges": [{"a": n, "b": "sw"} for n in names],
        },
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "pair",
                "src": src,
                "dst": "g0",
                "message_bytes": "1KiB",
                "load": 0.8,
            }
            for src in ("g1", "g2")
        ],
    }
    result = simulate(scenario_from_data(data))
    merged = channel_bandwidth(data, "sw", "g0")
    bound = result.throughput
    assert bound.offered_bytes_per_ns > merged
    assert bound.bound_bytes_per_ns == pytest.approx(merged, rel=1e-9)
    assert bound.bottleneck_channel == "sw>g0"
    assert bound.headroom == pytest.approx(merged / bound.offered_bytes_per_ns, rel=1e-9)


def test_zero_load_latency_of_a_two_hop_path_by_hand() -> None:
    # a -> sw: 32 GT/s x 8 lanes, no line code = 32 B/ns, 10 ns flight, then 50 ns arbitration.
    # sw -> b: 16 GT/s x 4 lanes, 8b10b = 6.4 B/ns, 25 ns flight; a GPU adds no arbitration.
    # 1 KiB: 1024/32 + 10 + 50 + 1024/6.4 + 25 = 32 + 10 + 50 + 160 + 25 = 277 ns.
    data: ScenarioData = {
        "name": "two_hop",
        "duration": "1us",
        "topology": {
            "kind": "graph",
            "nodes": [
                {"id": "a", "kind": "gpu"},
                {"id": "sw", "kind": "switch"},
                {"id": "b", "kind": "gpu"},
            ],
            "edges": [{"a": "a", "b": "sw", "link": "fast"}, {"a": "sw", "b": "b", "link": "slow"}],
        },
        "links": {
            "fast": {"rate": "32GT/s", "lanes": 8, "encoding": "none", "propagation": "10ns"},
            "slow": {"rate": "16GT/s", "lanes": 4, "encoding": "8b10b", "propagation": "25ns"},
        },
        "switch": {"arbitration": "50ns"},
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "pair",
                "src": src,
                "dst": dst,
                "message_bytes": "1KiB",
                "arrivals": "periodic",
                "interval": "1us",
            }
            for src, dst in (("a", "b"), ("b", "a"))
        ],
    }
    messages = simulate(scenario_from_data(data)).tables["messages"]
    assert sorted(zip(messages["src"], messages["hops"], strict=True)) == [("a", 2), ("b", 2)]
    np.testing.assert_allclose(messages["zero_load_ns"], 277.0, rtol=1e-12)
    # Alone in the fabric, each message takes exactly its bound.
    np.testing.assert_allclose(messages["latency_ns"], 277.0, rtol=1e-12)
