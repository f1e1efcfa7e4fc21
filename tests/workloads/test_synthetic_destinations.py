"""``destinations`` on a ``uniform_random`` synthetic workload: every destination drawn
uniformly from the listed GPUs (less the source), located errors for bad lists, and
workloads without the field drawn exactly as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from located_errors import MARK, assert_located

from sitssim.fabric.topology import build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.stages.schedule import scenario_schedule


def schedule(topology: dict[str, Any], workload: dict[str, Any], seed: int = 3) -> Any:
    scenario = scenario_from_data(
        {
            "name": "t",
            "seed": seed,
            "duration": "20us",
            "topology": topology,
            "workloads": [
                {
                    "kind": "synthetic",
                    "pattern": "uniform_random",
                    "message_bytes": "256B",
                    "load": 0.5,
                    **workload,
                }
            ],
        }
    )
    fabric = build_fabric(scenario)
    node_id = {n: i for i, n in enumerate(sorted(fabric.graph))}
    return scenario_schedule(scenario, fabric, node_id), node_id


def test_destinations_are_drawn_uniformly_from_the_list_only() -> None:
    senders = [f"in{i}" for i in range(4)]
    receivers = [f"out{j}" for j in range(4)]
    sched, node_id = schedule(
        {"kind": "crossbar", "ports": 4}, {"sources": senders, "destinations": receivers}
    )
    names = {i: n for n, i in node_id.items()}
    dst = [names[d] for d in sched.dst.tolist()]
    assert {names[s] for s in sched.src.tolist()} == set(senders)
    assert set(dst) == set(receivers)
    # Uniform: each receiver's share within 5 standard deviations of 1/4.
    n = len(dst)
    for r in receivers:
        share = dst.count(r) / n
        assert abs(share - 0.25) < 5 * np.sqrt(0.25 * 0.75 / n), (r, share)


def test_a_source_in_the_list_never_sends_to_itself() -> None:
    sched, node_id = schedule(
        {"kind": "fat_tree", "gpus": 4, "levels": 1},
        {"sources": ["gpu0", "gpu1"], "destinations": ["gpu0", "gpu1", "gpu2"]},
    )
    src, dst = sched.src, sched.dst
    assert len(src) > 100
    assert not np.any(src == dst)
    gpu = {n: node_id[n] for n in ("gpu0", "gpu1", "gpu2", "gpu3")}
    assert set(dst[src == gpu["gpu0"]].tolist()) == {gpu["gpu1"], gpu["gpu2"]}
    assert gpu["gpu3"] not in set(dst.tolist())


def test_without_destinations_the_draw_is_the_one_every_gpu_had() -> None:
    # Listing every GPU is a different draw (it picks from the list, not by offset), so
    # the field's absence must keep the old path: the same seed gives the same schedule.
    topology = {"kind": "fat_tree", "gpus": 4, "levels": 1}
    plain, _ = schedule(topology, {})
    again, _ = schedule(topology, {})
    assert plain.dst.tolist() == again.dst.tolist()
    listed, _ = schedule(topology, {"destinations": ["gpu0", "gpu1", "gpu2", "gpu3"]})
    assert listed.t_ns.tolist() == plain.t_ns.tolist()
    assert listed.dst.tolist() != plain.dst.tolist()


BASE = (
    "version: 1\nname: bad\nduration: 1us\n"
    "topology: {kind: crossbar, ports: 2}\n"
    "workloads:\n"
    "  - kind: synthetic\n"
    "    message_bytes: 256B\n"
    "    load: 1.0\n"
)

CASES = [
    pytest.param(
        BASE + "    pattern: uniform_random\n    destinations: [out0, out9]  " + MARK + "\n",
        "workloads[0].destinations[1]",
        "unknown node 'out9'",
        id="unknown-node",
    ),
    pytest.param(
        BASE + "    pattern: uniform_random\n    destinations: [out0, xbar]  " + MARK + "\n",
        "workloads[0].destinations[1]",
        "'xbar' is a switch, not a GPU",
        id="a-switch",
    ),
    pytest.param(
        BASE + "    pattern: uniform_random\n    destinations:\n      - out0\n"
        "      - out0  " + MARK + "\n",
        "workloads[0].destinations[1]",
        "'out0' is listed twice",
        id="twice",
    ),
    pytest.param(
        BASE + "    pattern: tornado\n    destinations: [out0]  " + MARK + "\n",
        "workloads[0].destinations",
        "'destinations' belongs to pattern 'uniform_random'",
        id="other-pattern",
    ),
    pytest.param(
        BASE + "    pattern: uniform_random\n    destinations: []  " + MARK + "\n",
        "workloads[0].destinations",
        "at least 1 item",
        id="empty",
    ),
    pytest.param(
        BASE + "    pattern: uniform_random\n    sources: [in0]\n"
        "    destinations: [in0]  " + MARK + "\n",
        "workloads[0].destinations",
        "'in0' is a source too, and sends to no one else",
        id="only-itself",
    ),
]


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize(("text", "field", "expect"), CASES)
def test_bad_destinations_are_located(
    tmp_path: Path, text: str, field: str, expect: str, command: str
) -> None:
    assert_located(tmp_path, text, field, expect, command)
