"""waves.vcd's switch occupancy and trace.json's switch stalls, from hand-built tables."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from vcd_reading import vcd_changes

from sitssim.results.trace import write_trace
from sitssim.results.vcd import write_vcd


def _changes(path: Path) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """(scope, signal) -> [(time ps, value)] of a VCD file's signals under ``switches.``,
    and ``(scope, signal) -> []`` for every other signal."""
    return {
        key: [(t, int(v, 2)) for t, v in values] if key[0].startswith("switches.") else []
        for key, values in vcd_changes(path).items()
    }


def _occupancy() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "switch": ["sw1.0", "sw1.0", "sw1.0", "sw1.0", "nvs0"],
            "port": ["gpu0", "gpu0", "gpu0", "(management)", "gpu1"],
            "vc": [0, 0, 0, 1, 0],
            "t_ns": [1.0, 2.5, 4.0, 3.0, 2.0],
            "occupancy": [1, 2, 0, 1, 3],
            "instant_peak": [1, 2, 1, 1, 3],
        }
    )


def test_each_buffer_is_an_integer_signal_under_its_switch(tmp_path: Path) -> None:
    path = tmp_path / "waves.vcd"
    # No PHY tables: the switches alone are worth the file, on the traffic clock.
    assert write_vcd({"vc_occupancy": _occupancy()}, path)
    changes = _changes(path)
    # Time 0 holds the initial value; '.' and parentheses are not VCD name characters.
    assert changes[("switches.sw1_0", "gpu0_vc0")] == [(0, 0), (1000, 1), (2500, 2), (4000, 0)]
    assert changes[("switches.sw1_0", "management_vc1")] == [(0, 0), (3000, 1)]
    assert changes[("switches.nvs0", "gpu1_vc0")] == [(0, 0), (2000, 3)]
    assert "traffic clock" in path.read_text()


def test_the_occupancy_moves_onto_the_phy_clock_beside_the_links(tmp_path: Path) -> None:
    states = pd.DataFrame(
        {"state_id": [0], "link": ["gpu1-nvs0"], "state": ["L0"], "t_enter_ns": [0.0]}
    )
    path = tmp_path / "waves.vcd"
    assert write_vcd({"link_states": states, "vc_occupancy": _occupancy()}, path, 100.0)
    changes = _changes(path)
    assert changes[("switches.nvs0", "gpu1_vc0")] == [(0, 0), (102_000, 3)]
    assert ("links.gpu1-nvs0", "ltssm") in changes


def test_no_phy_and_no_switch_occupancy_writes_no_waves(tmp_path: Path) -> None:
    empty = _occupancy().iloc[:0]
    assert not write_vcd({"vc_occupancy": empty}, tmp_path / "waves.vcd")
    assert not write_vcd({}, tmp_path / "waves.vcd")
    assert not (tmp_path / "waves.vcd").exists()


def _stall_tables() -> dict[str, pd.DataFrame]:
    nodes = pd.DataFrame({"node": ["gpu0", "gpu1", "sw0"], "kind": ["gpu", "gpu", "switch"]})
    links = pd.DataFrame(
        {
            "link_id": [0, 1, 2, 3],
            "src": ["gpu0", "sw0", "gpu1", "sw0"],
            "dst": ["sw0", "gpu0", "sw0", "gpu1"],
        }
    )
    credits = pd.DataFrame(
        {
            "stall_id": [0, 1, 2, 3],
            "link_id": [0, 1, 3, 1],
            "link": ["gpu0>sw0", "sw0>gpu0", "sw0>gpu1", "sw0>gpu0"],
            "vc": [0, 1, 0, 0],
            "fc_class": ["P", "P", "NP", "Cpl"],
            "start_ns": [10.0, 20.0, 30.0, 1500.0],
            "end_ns": [15.0, 45.0, 31.0, 2500.0],
            "needed_hdr": [1, 1, 1, 1],
            "needed_data": [16, 16, 0, 0],
        }
    )
    return {"nodes": nodes, "links": links, "credits": credits}


def test_every_stall_at_a_switch_output_is_a_slice_on_its_ports_track(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    assert write_trace(_stall_tables(), path)
    events = json.loads(path.read_text())["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes == {0: "switch sw0"}
    tracks = {
        e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert tracks == {0: "port gpu0", 1: "port gpu1"}
    slices = [e for e in events if e["ph"] == "X"]
    # The GPU's own stall (link 0) is not a switch's; the others in table order.
    assert [e["args"]["stall_id"] for e in slices] == [1, 2, 3]
    assert [(e["tid"], e["ts"], e["dur"]) for e in slices] == [
        (0, pytest.approx(0.020), pytest.approx(0.025)),
        (1, pytest.approx(0.030), pytest.approx(0.001)),
        (0, pytest.approx(1.5), pytest.approx(1.0)),
    ]
    assert [e["name"] for e in slices] == [
        "credit stall VC1 P",
        "credit stall VC0 NP",
        "credit stall VC0 Cpl",
    ]


def test_stalls_only_at_gpus_write_no_trace(tmp_path: Path) -> None:
    tables = _stall_tables()
    tables["credits"] = tables["credits"].iloc[:1]
    assert not write_trace(tables, tmp_path / "trace.json")
    assert not (tmp_path / "trace.json").exists()
