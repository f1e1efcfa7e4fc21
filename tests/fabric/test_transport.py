"""The L3 transport: FIFO ports, probes, conservation, link accounting."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sitssim.fabric.topology import build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate
from sitssim.stages.schedule import scenario_schedule

ScenarioData = dict[str, Any]


def _fifo_departures(arrivals: np.ndarray, service: np.ndarray) -> np.ndarray:
    """End of service of each message at a FIFO single-server port, in arrival order."""
    done = np.empty(len(arrivals))
    free = -np.inf
    for k, (arrival, s) in enumerate(zip(arrivals, service, strict=True)):
        free = max(arrival, free) + s
        done[k] = free
    return done


def _merge_scenario() -> ScenarioData:
    """Two sources with different message sizes sharing the switch's port towards ``g0``."""
    return {
        "name": "merge",
        "seed": 9,
        "duration": "30us",
        "topology": {
            "kind": "graph",
            "nodes": [{"id": "sw", "kind": "switch"}]
            + [{"id": n, "kind": "gpu"} for n in ("g0", "g1", "g2")],
            "edges": [
                {"a": "g1", "b": "sw"},
                {"a": "g2", "b": "sw", "link": "narrow"},
                {"a": "sw", "b": "g0"},
            ],
        },
        "links": {
            "default": {"rate": "64GT/s", "lanes": 16, "propagation": "7ns"},
            "narrow": {"rate": "64GT/s", "lanes": 4, "propagation": "3ns"},
        },
        "switch": {"arbitration": "45ns"},
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "pair",
                "src": "g1",
                "dst": "g0",
                "message_bytes": "4KiB",
                "load": 0.5,
            },
            {
                "kind": "synthetic",
                "pattern": "pair",
                "src": "g2",
                "dst": "g0",
                "message_bytes": "300B",
                "load": 0.8,
            },
        ],
    }


def test_ports_serve_in_arrival_order() -> None:
    """Recompute every delivery from injection times through two FIFO stages; they must agree."""
    result = simulate(scenario_from_data(_merge_scenario()))
    messages = result.tables["messages"].sort_values("msg_id")
    links = result.tables["links"].set_index("name")
    arbitration = result.tables["nodes"].set_index("node").loc["sw", "arbitration_ns"]

    at_switch = np.empty(len(messages))
    for src in ("g1", "g2"):
        own = (messages["src"] == src).to_numpy()
        first = links.loc[f"{src}>sw"]
        service = messages["bytes"].to_numpy()[own] / first["bytes_per_ns"]
        done = _fifo_departures(messages["t_inject_ns"].to_numpy()[own], service)
        at_switch[own] = done + first["propagation_ns"] + arbitration

    order = np.argsort(at_switch, kind="stable")
    last = links.loc["sw>g0"]
    service = messages["bytes"].to_numpy()[order] / last["bytes_per_ns"]
    expected = np.empty(len(messages))
    expected[order] = _fifo_departures(at_switch[order], service) + last["propagation_ns"]

    delivered = messages["t_deliver_ns"].to_numpy()
    np.testing.assert_allclose(delivered, expected, rtol=1e-12, atol=1e-9)
    # The shared port left messages in the order they reached the switch.
    assert np.all(np.diff(delivered[order]) > 0)
    # Both flows really competed: many messages waited at the shared port.
    waited = expected[order] - service - last["propagation_ns"] > at_switch[order] + 1e-6
    assert waited.mean() > 0.2


@pytest.fixture(scope="module")
def loaded_fat_tree(fat_tree_data: Callable[..., ScenarioData]) -> RunResult:
    data = fat_tree_data(load=0.7, duration="20us", probes="300ns")
    data["workloads"][1]["turnaround"] = "30ns"
    return simulate(scenario_from_data(data))


@pytest.fixture(scope="module")
def overloaded_nvswitch(fat_tree_data: Callable[..., ScenarioData]) -> RunResult:
    # NVLink planes give each GPU 18 links' bandwidth: big messages keep the count small.
    data = fat_tree_data(
        load=1.5, pattern="uniform_random", probes=None, duration="3us", message_bytes="16KiB"
    )
    data["topology"] = {"kind": "nvswitch", "gpus": 8}
    return simulate(scenario_from_data(data))


def _probe_pairs(result: RunResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    probes = result.tables["probes"]
    messages = result.tables["messages"].set_index("msg_id")
    return messages.loc[probes["probe_id"]], messages.loc[probes["completion_id"]]


def test_every_probe_request_gets_exactly_one_completion_back(loaded_fat_tree: RunResult) -> None:
    messages = loaded_fat_tree.tables["messages"]
    requests = messages[messages["kind"] == "probe_request"]
    completions = messages[messages["kind"] == "probe_completion"]
    assert len(requests) > 100
    assert sorted(completions["parent"]) == sorted(requests["msg_id"])
    request, completion = _probe_pairs(loaded_fat_tree)
    assert (completion["src"].to_numpy() == request["dst"].to_numpy()).all()
    assert (completion["dst"].to_numpy() == request["src"].to_numpy()).all()
    assert (completion["t_inject_ns"].to_numpy() >= request["t_deliver_ns"].to_numpy()).all()


def test_probe_rtt_is_at_least_both_zero_load_bounds_plus_turnaround(
    loaded_fat_tree: RunResult,
) -> None:
    turnaround = loaded_fat_tree.scenario.workloads[1].turnaround
    request, completion = _probe_pairs(loaded_fat_tree)
    floor = request["zero_load_ns"].to_numpy() + completion["zero_load_ns"].to_numpy() + turnaround
    rtt = loaded_fat_tree.tables["probes"]["rtt_ns"].to_numpy()
    assert np.all(rtt >= floor * (1 - 1e-9))
    # Under 70 % load a good share of round trips queue somewhere.
    assert np.mean(rtt > floor + 1.0) > 0.2


def test_probe_rtt_in_an_idle_fabric_is_exactly_the_bound(
    fat_tree_data: Callable[..., ScenarioData],
) -> None:
    data = fat_tree_data(load=0.01, duration="20us", probes="5us")
    data["workloads"] = data["workloads"][1:]
    data["workloads"][0]["turnaround"] = "30ns"
    result = simulate(scenario_from_data(data))
    request, completion = _probe_pairs(result)
    floor = request["zero_load_ns"].to_numpy() + completion["zero_load_ns"].to_numpy() + 30.0
    assert len(floor) == 4 * len(result.fabric.gpus)
    np.testing.assert_allclose(result.tables["probes"]["rtt_ns"], floor, rtol=1e-12)


@pytest.mark.parametrize("run", ["loaded_fat_tree", "overloaded_nvswitch"])
def test_messages_are_conserved(run: str, request: pytest.FixtureRequest) -> None:
    result: RunResult = request.getfixturevalue(run)
    messages = result.tables["messages"]
    assert messages["t_deliver_ns"].notna().all()
    assert (messages["t_deliver_ns"] >= messages["t_inject_ns"]).all()
    assert messages["msg_id"].is_unique

    fabric = build_fabric(result.scenario)
    nodes = sorted(fabric.graph)
    schedule = scenario_schedule(result.scenario, fabric, {n: i for i, n in enumerate(nodes)})
    scheduled = Counter(
        (nodes[s], nodes[d], int(k))
        for s, d, k in zip(schedule.src, schedule.dst, schedule.kind, strict=True)
    )
    injected = messages[messages["kind"] != "probe_completion"]
    recorded = Counter(
        (str(s), str(d), int(k != "data"))
        for s, d, k in zip(injected["src"], injected["dst"], injected["kind"], strict=True)
    )
    assert recorded == scheduled
    np.testing.assert_allclose(
        np.sort(injected["t_inject_ns"].to_numpy()), schedule.t_ns, rtol=1e-12
    )


@pytest.mark.parametrize("run", ["loaded_fat_tree", "overloaded_nvswitch"])
def test_link_bytes_are_the_bytes_of_the_messages_crossing_them(
    run: str, request: pytest.FixtureRequest
) -> None:
    result: RunResult = request.getfixturevalue(run)
    messages = result.tables["messages"]
    crossing: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for path, size in zip(messages["path"].astype(str), messages["bytes"], strict=True):
        nodes = path.split(">")
        for a, b in pairwise(nodes):
            crossing[f"{a}>{b}"] += int(size)
            count[f"{a}>{b}"] += 1
    links = result.tables["links"]
    assert dict(zip(links["name"], links["bytes"], strict=True)) == {
        name: crossing.get(name, 0) for name in links["name"]
    }
    assert dict(zip(links["name"], links["messages"], strict=True)) == {
        name: count.get(name, 0) for name in links["name"]
    }


@pytest.mark.parametrize("run", ["loaded_fat_tree", "overloaded_nvswitch"])
def test_utilisation_is_busy_time_over_simulated_time_and_at_most_one(
    run: str, request: pytest.FixtureRequest
) -> None:
    result: RunResult = request.getfixturevalue(run)
    links = result.tables["links"]
    np.testing.assert_allclose(links["busy_ns"], links["bytes"] / links["bytes_per_ns"], rtol=1e-9)
    np.testing.assert_allclose(
        links["utilisation"], links["busy_ns"] / result.simulated_ns, rtol=1e-12
    )
    assert (links["utilisation"] <= 1.0).all()
    assert links["utilisation"].max() > 0.3


def test_overload_drives_the_busiest_port_close_to_saturation(
    overloaded_nvswitch: RunResult,
) -> None:
    assert overloaded_nvswitch.tables["links"]["utilisation"].max() > 0.9
