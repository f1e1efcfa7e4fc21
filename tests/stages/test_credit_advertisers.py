"""``link_layer.credits.advertised_by``: only channels into the listed kinds of node are
flow-controlled (a bench's receivers never back-pressure); the default keeps every channel
credited, as before; a bad list is a located exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from located_errors import MARK, assert_located

from sitssim.fabric.topology import build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.stages.credits import build_credit_stage


def credited(topology: dict[str, Any], **credits: Any) -> list[str]:
    scenario = scenario_from_data(
        {
            "name": "t",
            "duration": "1us",
            "topology": topology,
            "link_layer": {"credits": {"header_credits": 8, **credits}},
        }
    )
    fabric = build_fabric(scenario)
    stage = build_credit_stage(scenario.link_layer.credits, fabric)
    return [fabric.channels[c.channel].name for c in stage.links if c is not None]


def test_only_channels_into_an_advertising_kind_carry_credits() -> None:
    names = credited({"kind": "crossbar", "ports": 2}, advertised_by=["switch"])
    assert names == ["in0>xbar", "in1>xbar", "out0>xbar", "out1>xbar"]
    names = credited({"kind": "crossbar", "ports": 2}, advertised_by=["gpu"])
    assert names == ["xbar>in0", "xbar>in1", "xbar>out0", "xbar>out1"]


def test_by_default_every_channel_carries_credits() -> None:
    fat_tree = {"kind": "fat_tree", "gpus": 4, "levels": 1}
    scenario = scenario_from_data({"name": "t", "duration": "1us", "topology": fat_tree})
    assert len(credited(fat_tree)) == len(build_fabric(scenario).channels)


def test_a_run_with_switch_credits_only_keeps_them_balanced() -> None:
    """The receivers' channels have no credit links, and at idle every credit is back."""
    from sitssim.simulation import simulate

    data = {
        "name": "t",
        "duration": "2us",
        "topology": {"kind": "crossbar", "ports": 2},
        "switch": {"model": "input_queued", "input_buffer": 8},
        "link_layer": {
            "credits": {
                "header_credits": 8,
                "data_credits": 128,
                "max_payload": "256B",
                "advertised_by": ["switch"],
            }
        },
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "uniform_random",
                "sources": ["in0", "in1"],
                "destinations": ["out0", "out1"],
                "arrivals": "periodic",
                "message_bytes": "256B",
                "load": 1.0,
            }
        ],
    }
    result = simulate(scenario_from_data(data))
    assert result.metrics["link_layer"]["credit_links"] == 4  # type: ignore[index]
    # Line-rate senders against FIFO inputs: the 8 credits ran out, so they were exercised.
    assert result.metrics["link_layer"]["credit_stalls"] > 0  # type: ignore[index]


BASE = (
    "version: 1\nname: bad\nduration: 1us\n"
    "topology: {kind: crossbar, ports: 2}\n"
    "link_layer:\n"
    "  credits:\n"
    "    header_credits: 8\n"
)

CASES = [
    pytest.param(
        BASE + "    advertised_by: [switch, nic]  " + MARK + "\n",
        "link_layer.credits.advertised_by[1]",
        "one of 'gpu', 'switch' or 'root_complex'",
        id="unknown-kind",
    ),
    pytest.param(
        BASE + "    advertised_by:\n      - switch\n      - switch  " + MARK + "\n",
        "link_layer.credits.advertised_by[1]",
        "'switch' is listed twice",
        id="twice",
    ),
    pytest.param(
        BASE + "    advertised_by: []  " + MARK + "\n",
        "link_layer.credits.advertised_by",
        "at least 1 item",
        id="empty",
    ),
]


@pytest.mark.parametrize(("text", "field", "expect"), CASES)
def test_a_bad_advertiser_list_is_located(
    tmp_path: Path, text: str, field: str, expect: str
) -> None:
    assert_located(tmp_path, text, field, expect)
