"""The switch-tables stage end to end: ``sitssim run`` writes the input-queued switches'
tables, their waves and their stalls, consistent with the run's other tables, and leaves
report.json as it would be without the stage."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner
from vcd_reading import vcd_changes

import sitssim.simulation as simulation
from sitssim.cli import app
from sitssim.results.report import report_json
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate
from sitssim.stages import switch_tables
from sitssim.stages.registry import STAGES

# Two tenants on VCs of their own, two header credits per (VC, class) everywhere: the
# switches' outputs stall for credit, on both VCs.
SCENARIO = {
    "name": "switch_tables",
    "seed": 3,
    "duration": "2us",
    "topology": {"kind": "nvswitch", "gpus": 4, "planes": 2, "links_per_gpu": 2},
    "links": {"default": {"rate": "64GT/s", "lanes": 2, "propagation": "5ns"}},
    "tenants": [{"name": "A"}, {"name": "B"}],
    "switch": {
        "model": "input_queued",
        "voq": True,
        "allocator": "islip",
        "vc_quota": {"table": {"A": [8, 0], "B": [0, 8]}},
    },
    "link_layer": {
        "credits": {
            "header_credits": 2,
            "data_credits": 64,
            "max_payload": "512B",
            "update_delay": "100ns",
        }
    },
    "workloads": [
        {
            "kind": "synthetic",
            "name": "hot",
            "tenant": "A",
            "pattern": "hotspot",
            "hotspot_fraction": 0.7,
            "message_bytes": "512B",
            "load": 0.6,
        },
        {
            "kind": "synthetic",
            "name": "spread",
            "tenant": "B",
            "pattern": "uniform_random",
            "message_bytes": "512B",
            "load": 0.4,
        },
    ],
}


def test_the_stage_comes_last_and_checks_nothing() -> None:
    assert STAGES[-1] is switch_tables.STAGE
    assert switch_tables.STAGE.checker is None


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("switch_tables")
    path = folder / "scenario.yaml"
    # JSON is YAML: the scenario file without a YAML writer.
    path.write_text(json.dumps(SCENARIO), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(folder / "out")])
    assert result.exit_code in (0, 1), result.output
    return folder / "out"


def _read(out: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(out / f"{name}.parquet")


def test_the_tables_agree_with_the_messages_and_the_credits(out: Path) -> None:
    messages = _read(out, "messages")
    delivered = messages[messages["t_deliver_ns"].notna()]
    assert len(delivered) == len(messages) > 100
    # Every GPU-to-GPU message crosses exactly one plane: one grant each.
    arbitration = _read(out, "switch_arbitration")
    assert arbitration["switch"].tolist() == ["nvs0", "nvs1"]
    assert arbitration["grants"].sum() == len(messages)
    assert (arbitration["unmatched_output"] > 0).all()
    assert arbitration["unmatched_credit"].sum() > 0
    vc = _read(out, "vc")
    assert vc["messages"].sum() == len(messages)
    assert vc["bytes"].sum() == messages["bytes"].sum()
    # Each VC carries its own tenant only, as the quota table deals them.
    taken = vc[vc["messages"] > 0]
    assert set(zip(taken["vc"], taken["tenants"], strict=True)) == {(0, "A"), (1, "B")}
    per_tenant = _read(out, "vc_tenants")
    assert per_tenant.groupby("tenant")["messages"].sum().to_dict() == (
        messages.groupby("tenant", observed=True).size().to_dict()
    )
    # Stalls at the switches' outputs, per port and VC, are the credits table's rows.
    credits = _read(out, "credits")
    links = _read(out, "links").set_index("link_id")
    at_switch = credits[credits["link_id"].map(links["src"]).str.startswith("nvs")]
    expected = (
        at_switch.assign(
            switch=at_switch["link_id"].map(links["src"]),
            port=at_switch["link_id"].map(links["dst"]),
        )
        .groupby(["switch", "port", "vc"])
        .size()
    )
    assert expected.sum() > 0 and set(expected.index.get_level_values("vc")) == {0, 1}
    got = vc.set_index(["switch", "port", "vc"])["credit_stalls"]
    assert got[got > 0].to_dict() == expected.to_dict()
    # Peaks from the series, within the credits that bound each buffer.
    series = _read(out, "vc_occupancy")
    keys = ["switch", "port", "vc", "t_ns"]
    assert series[keys].equals(series[keys].sort_values(keys).reset_index(drop=True))
    peaks = series.groupby(["switch", "port", "vc"])["instant_peak"].max()
    lanes = vc[vc["messages"] > 0].set_index(["switch", "port", "vc"])
    assert peaks.to_dict() == lanes["peak_occupancy"].to_dict()
    assert 1 <= peaks.max() <= 2


def _vcd_last_values(path: Path) -> tuple[set[str], dict[tuple[str, str], int]]:
    """The scopes of a VCD file, and the last value of each integer signal under
    ``switches.``."""
    changes = vcd_changes(path)
    last = {
        key: int(values[-1][1], 2)
        for key, values in changes.items()
        if key[0].startswith("switches.") and values
    }
    return {scope for scope, _ in changes}, last


def test_the_waves_hold_each_buffers_occupancy(out: Path) -> None:
    series = _read(out, "vc_occupancy")
    scopes, last = _vcd_last_values(out / "waves.vcd")
    expected = {
        (f"switches.{sw}", f"{port}_vc{vc}"): int(group["occupancy"].iloc[-1])
        for (sw, port, vc), group in series.groupby(["switch", "port", "vc"])
    }
    assert last == expected
    assert {"switches.nvs0", "switches.nvs1"} <= scopes
    # The PHY's signals are still there beside them.
    assert "links.gpu0-nvs0" in scopes


def test_the_trace_has_a_slice_per_stall_at_a_switch_output(out: Path) -> None:
    events = json.loads((out / "trace.json").read_text())["traceEvents"]
    credits = _read(out, "credits")
    links = _read(out, "links").set_index("link_id")
    at_switch = credits[credits["link_id"].map(links["src"]).str.startswith("nvs")]
    slices = [e for e in events if e.get("cat") == "credit_stall"]
    assert sorted(e["args"]["stall_id"] for e in slices) == sorted(at_switch["stall_id"])
    tracks = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    rows = credits.set_index("stall_id")
    for e in slices:
        row = rows.loc[e["args"]["stall_id"]]
        assert e["ts"] * 1e3 == pytest.approx(row["start_ns"])
        assert (e["ts"] + e["dur"]) * 1e3 == pytest.approx(row["end_ns"])
        assert tracks[(e["pid"], e["tid"])] == f"port {links.loc[row['link_id'], 'dst']}"


def test_the_stage_leaves_the_report_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = scenario_from_data({**SCENARIO, "duration": "500ns"})
    with_tables = simulate(scenario)
    assert "switch_arbitration" in with_tables.tables
    monkeypatch.setattr(simulation, "STAGES", STAGES[:-1])
    without = simulate(scenario)
    assert "switch_arbitration" not in without.tables
    assert report_json(with_tables) == report_json(without)


def test_a_run_without_input_queued_switches_has_none_of_the_tables() -> None:
    data = {**SCENARIO, "duration": "300ns", "switch": {"model": "output_queued"}}
    tables = simulate(scenario_from_data(data)).tables
    assert not {"vc", "vc_occupancy", "switch_arbitration"} & set(tables)
