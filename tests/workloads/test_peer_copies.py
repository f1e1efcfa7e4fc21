"""``kind: p2p``: copies between GPUs in stream order, in their engine's write packets."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from sitssim.errors import InputError
from sitssim.estimate import estimate
from sitssim.fabric.topology import build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate

FABRIC: dict[str, Any] = {
    "version": 1,
    "name": "p2p",
    "seed": 1,
    "duration": "1us",
    "topology": {"kind": "nvswitch", "gpus": 4, "planes": 2, "links_per_gpu": 4, "link": "nv"},
    "links": {"nv": {"rate": "64GT/s", "lanes": 3, "encoding": "flit256", "length": "25cm"}},
}


def scenario(**workload: Any) -> dict[str, Any]:
    data = copy.deepcopy(FABRIC)
    data["workloads"] = [
        {"kind": "p2p", "copy_cost": "2us", "pairs": [["gpu0", "gpu1"]], **workload}
    ]
    return data


def run(**workload: Any) -> RunResult:
    return simulate(scenario_from_data(scenario(**workload)))


def messages(result: RunResult) -> Any:
    table = result.tables["messages"]
    return table[table["kind"] == "peer_copy"]


def test_queued_copies_run_one_after_another_each_paying_its_start() -> None:
    result = run(runs=[{"bytes": "16B", "copies": 10}])
    row = result.tables["p2p"].iloc[0]
    sent = messages(result)
    assert len(sent) == 10
    # Each copy is one 32-byte message (16 data bytes behind a 16-byte header), sent 2 us
    # after the one before it landed.
    assert (sent["bytes"] == 32).all()
    flight = (sent["t_deliver_ns"] - sent["t_inject_ns"]).to_numpy()
    starts = sent["t_inject_ns"].to_numpy()
    assert np.allclose(np.diff(starts), 2000.0 + flight[:-1])
    assert row["time_per_copy_ns"] == pytest.approx(2000.0 + flight.mean())
    assert row["complete"]


def test_a_copy_engine_moves_more_data_per_link_byte_than_an_sm() -> None:
    # Small messages, so that the last of a copy leaves no link idle for long.
    size = {"bytes": "8MiB", "copies": 2}
    fine = {"copy_cost": "1ns", "max_message_bytes": "16KiB"}
    ce = run(runs=[size], **fine).tables["p2p"].iloc[0]
    sm = run(runs=[size], engine="sm", **fine).tables["p2p"].iloc[0]
    fabric = build_fabric(scenario_from_data(scenario(runs=[size])))
    per_gpu = fabric.injection_bytes_per_ns["gpu0"]
    # 256 data bytes per 272 on the wire against 128 per 144, within the fill and drain.
    assert ce["bandwidth_GBps"] == pytest.approx(per_gpu * 256 / 272, rel=0.03)
    assert sm["bandwidth_GBps"] == pytest.approx(per_gpu * 128 / 144, rel=0.03)
    assert sm["bandwidth_GBps"] < ce["bandwidth_GBps"]


def test_both_ways_at_once_doubles_the_bandwidth_on_full_duplex_links() -> None:
    one, both = (
        run(runs=[{"bytes": "8MiB", "copies": 2, "direction": d}]).tables["p2p"].iloc[0]
        for d in ("one_way", "both")
    )
    assert both["bandwidth_GBps"] == pytest.approx(2 * one["bandwidth_GBps"], rel=0.02)
    assert both["messages"] == 2 * one["messages"]


def test_pairs_and_runs_follow_one_another_gap_apart() -> None:
    result = run(
        gpus=None,
        pairs=None,
        runs=[{"bytes": "1KiB", "copies": 2}, {"bytes": "16B", "copies": 3}],
        gap="1us",
    )
    table = result.tables["p2p"]
    # Every ordered pair of the four GPUs, for each run in turn.
    assert len(table) == 2 * 12
    assert list(table["bytes"]) == [1024] * 12 + [16] * 12
    assert np.allclose(table["t_start_ns"].to_numpy()[1:], table["t_end_ns"].to_numpy()[:-1] + 1000)
    assert table["complete"].all()


def test_the_estimate_counts_the_messages_the_run_sends() -> None:
    data = scenario(runs=[{"bytes": "1MiB", "copies": 3, "direction": "both"}, {"bytes": "16B"}])
    sc = scenario_from_data(data)
    predicted = estimate(sc, build_fabric(sc)).messages
    assert predicted == len(messages(simulate(sc)))


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"pairs": [["gpu0", "gpu0"]]}, r"pairs\[0\].*two GPUs"),
        ({"gpus": ["gpu0"], "pairs": None}, r"gpus.*at least two"),
        ({"gpus": ["gpu0", "gpu1"]}, r"'gpus' or 'pairs'"),
        ({"runs": []}, r"runs"),
        ({"copy_cost": None}, r"copy_cost"),
    ],
)
def test_a_malformed_p2p_workload_is_refused_where_it_is_wrong(
    edit: dict[str, Any], match: str
) -> None:
    data = scenario(runs=[{"bytes": "16B"}])
    wl = data["workloads"][0]
    for key, value in edit.items():
        if value is None:
            wl.pop(key)
        else:
            wl[key] = value
    with pytest.raises(InputError, match=match):
        scenario_from_data(data)


def test_a_pair_naming_a_switch_is_refused_before_the_run() -> None:
    data = scenario(pairs=[["gpu0", "nvs0"]], runs=[{"bytes": "16B"}])
    with pytest.raises(InputError, match=r"pairs\[0\]\[1\].*not a GPU"):
        simulate(scenario_from_data(data))
