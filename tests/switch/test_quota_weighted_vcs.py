"""Quota-weighted VC arbitration (``switch.vc_arbiter: quota_weighted``).

At an input of an input-queued switch, the VCs whose heads want a granted output share it
by the slots the input port's quota table gives each VC: with two backlogged tenants on
VCs of their own, weighted 48 : 16, the first crosses three times in four; in turn
(``round_robin``), once in two.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sitssim.errors import InputError
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate


def two_tenants(vc_arbiter: str, table: dict[str, list[int]]) -> dict[str, Any]:
    """s0 -> sw -> r0, the output at half the input's rate, tenants a and b each offering
    80 % of the input link: both VCs stay backlogged at the switch's input."""
    return {
        "name": "quota_weighted",
        "duration": "20us",
        "tenants": [{"name": "a"}, {"name": "b"}],
        "topology": {
            "kind": "graph",
            "nodes": [
                {"id": "s0", "kind": "gpu"},
                {"id": "r0", "kind": "gpu"},
                {"id": "sw", "kind": "switch"},
            ],
            "edges": [{"a": "s0", "b": "sw"}, {"a": "sw", "b": "r0", "link": "narrow"}],
        },
        "links": {
            "default": {"rate": "64GT/s", "lanes": 16, "propagation": "5ns"},
            "narrow": {"rate": "64GT/s", "lanes": 8, "propagation": "5ns"},
        },
        "switch": {
            "model": "input_queued",
            "input_buffer": 1_000_000,
            "vc_arbiter": vc_arbiter,
            "vc_quota": {"table": table},
        },
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "pair",
                "src": "s0",
                "dst": "r0",
                "arrivals": "periodic",
                "message_bytes": "256B",
                "load": 0.8,
                "tenant": tenant,
            }
            for tenant in ("a", "b")
        ],
    }


def share_of_a(vc_arbiter: str, table: dict[str, list[int]]) -> float:
    """Tenant a's share of the cells delivered while both VCs were backlogged: from 5 to
    15 us of the 20 us of traffic (the backlogs drain after it, one VC alone at the end)."""
    messages = simulate(scenario_from_data(two_tenants(vc_arbiter, table))).tables["messages"]
    assert messages["t_deliver_ns"].notna().all()
    t = messages["t_deliver_ns"]
    middle = messages[(t >= 5_000) & (t < 15_000)]
    assert set(middle["vc"]) == {0, 1} and len(middle) > 1000
    return float(np.mean(middle["tenant"] == "a"))


@pytest.mark.parametrize(
    ("vc_arbiter", "expected"), [("quota_weighted", 0.75), ("round_robin", 0.5)]
)
def test_backlogged_vcs_share_an_output_by_their_slots(vc_arbiter: str, expected: float) -> None:
    table = {"a": [48, 0], "b": [0, 16]}
    assert share_of_a(vc_arbiter, table) == pytest.approx(expected, abs=0.01)


def test_a_vc_without_slots_at_its_input_waits_for_the_slotted_ones_and_is_not_lost() -> None:
    # The default table puts b on VC 1, but the switch's port towards s0 gives VC 1 no slot:
    # while a (VC 0) always has a head for the output, b's cells wait; they cross, all of
    # them, once a's backlog is gone.
    data = two_tenants("quota_weighted", {"a": [48, 0], "b": [0, 16]})
    data["switch"]["vc_quota"]["ports"] = [{"switch": "sw", "peer": "s0", "table": {"a": [48]}}]
    messages = simulate(scenario_from_data(data)).tables["messages"]
    assert messages["t_deliver_ns"].notna().all()
    assert set(messages.loc[messages["tenant"] == "b", "vc"]) == {1}
    t = messages["t_deliver_ns"]
    middle = messages[(t >= 5_000) & (t < 15_000)]
    assert len(middle) > 1000 and (middle["tenant"] == "a").all()
    a_done = t[messages["tenant"] == "a"].max()
    b_times = t[messages["tenant"] == "b"]
    # Only the few b cells that crossed before a's backlog built up come before a is done.
    assert (b_times > a_done).mean() > 0.95


@pytest.mark.parametrize(
    "switch",
    [
        {"vc_arbiter": "quota_weighted"},
        {
            "vc_arbiter": "quota_weighted",
            "model": "output_queued",
            "vc_quota": {"table": {"a": [8]}},
        },
    ],
)
def test_quota_weighting_needs_a_table_and_an_input_queued_switch(switch: dict[str, Any]) -> None:
    data = two_tenants("round_robin", {"a": [8]})
    data["switch"] = {"model": "input_queued", **switch}
    if "vc_quota" not in switch:
        data["switch"].pop("vc_quota", None)
    with pytest.raises(InputError, match="quota_weighted VC arbitration needs") as caught:
        scenario_from_data(data)
    assert caught.value.field == "switch.vc_arbiter"
