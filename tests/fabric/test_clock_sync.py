"""Clock synchronisation and fences, and bad input in the clock sections.

Expected values come from the built fabric (arbitration latencies, routes) and from the
run's own tables (clock parameters, message latencies), never from constants.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.fabric.clock_sync import SyncedClock, offset_and_delay, sync_tree
from sitssim.fabric.clocks import DeviceClock
from sitssim.fabric.topology import build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate

runner = CliRunner()
QUIET = {"ppm": 0, "drift": {"kind": "none"}, "phy_uncertainty": "0ns"}


def _tree(clocks: dict[str, Any], load: float | None = None, duration: str = "30us") -> dict:
    """rc0 - sw (40 ns) - gpu0..gpu3 (one leaf switch), optional uniform traffic."""
    workloads = []
    if load is not None:
        workloads.append(
            {
                "kind": "synthetic",
                "pattern": "uniform_random",
                "message_bytes": "4KiB",
                "load": load,
            }
        )
    return {
        "name": "tree",
        "seed": 3,
        "duration": duration,
        "topology": {"kind": "fat_tree", "gpus": 4, "levels": 1, "radix": 4},
        "links": {"default": {"rate": "64GT/s", "lanes": 16, "length": "30cm"}},
        "switch": {"arbitration": "40ns"},
        "root_complex": {"arbitration": "20ns"},
        "workloads": workloads,
        "clocks": clocks,
    }


def _run(data: dict) -> RunResult:
    return simulate(scenario_from_data(data))


def _after(table: pd.DataFrame, t_ns: float) -> pd.DataFrame:
    return table[table["t_ns"] > t_ns]


# --- the sans-I/O core ---------------------------------------------------------------


def test_a_symmetric_exchange_recovers_the_offset_and_delay_exactly() -> None:
    offset, delay = 123.5, 47.0
    t1 = 1000.0
    t2 = t1 + delay + offset
    t3 = t2 + 30.0
    t4 = t3 + delay - offset
    assert offset_and_delay(t1, t2, t3, t4) == pytest.approx((offset, delay))


def test_an_asymmetric_exchange_is_off_by_half_the_asymmetry() -> None:
    offset, down, up = -50.0, 60.0, 20.0
    t1 = 0.0
    t2 = t1 + down + offset
    t3 = t2 + 5.0
    t4 = t3 + up - offset
    estimate, delay = offset_and_delay(t1, t2, t3, t4)
    assert estimate - offset == pytest.approx((down - up) / 2)
    assert delay == pytest.approx((down + up) / 2)


def test_a_synced_clock_reads_past_instants_with_the_correction_then_in_force() -> None:
    synced = SyncedClock(DeviceClock("d", 500.0, [0.0]))
    assert synced.read(100.0) == 600.0
    synced.correct(1_000.0, 480.0)
    synced.correct(2_000.0, 505.0)
    assert synced.read(999.0) == 1499.0
    assert synced.read(1_500.0) == 1_520.0
    assert synced.read(2_500.0) == 2_495.0
    with pytest.raises(ValueError, match="time order"):
        synced.correct(1_500.0, 0.0)


@pytest.mark.parametrize(
    "topology",
    [
        {"kind": "fat_tree", "gpus": 8, "levels": 2, "radix": 4, "spines": 4},
        {"kind": "nvswitch", "gpus": 8},
        {"kind": "direct_rc", "gpus": 4},
    ],
)
def test_the_sync_tree_follows_links_from_the_root(topology: dict) -> None:
    data = _tree(QUIET)
    data["topology"] = topology
    fabric = build_fabric(scenario_from_data(data))
    root, parent, depth = sync_tree(fabric)
    assert root == (fabric.root or fabric.gpus[0])
    assert set(parent) | {root} == set(fabric.graph)
    hops = nx.single_source_shortest_path_length(fabric.graph, root)
    for child, up in parent.items():
        assert fabric.graph.has_edge(child, up)
        assert depth[child] == depth[up] + 1 == hops[child]


# --- synchronisation in a run -----------------------------------------------------------


@pytest.fixture(scope="module")
def idle() -> RunResult:
    return _run(_tree({**QUIET, "initial_offset": "3us"}))


@pytest.fixture(scope="module")
def loaded() -> RunResult:
    return _run(_tree({**QUIET, "initial_offset": "3us"}, load=0.6))


def test_sync_leaves_half_the_arbitration_asymmetry_as_residual(idle: RunResult) -> None:
    """Without drift or stamp noise, each hop's estimate is off by half the difference of
    the two ends' arbitration; along the path that telescopes to root minus GPU."""
    fabric = idle.fabric
    latency = fabric.node_latency_ns
    sync = idle.tables["clock_sync"]
    clocks = idle.tables["clocks"].set_index("device")
    assert np.abs(clocks.loc[fabric.gpus, "initial_offset_ns"]).max() > 100.0
    settled = _after(sync, idle.scenario.clocks.sync_interval * 2)
    assert len(settled) > 0
    for gpu, rows in settled.groupby("gpu"):
        expected = (latency[fabric.root] - latency[gpu]) / 2
        np.testing.assert_allclose(rows["residual_ns"], expected, atol=1e-6)
        np.testing.assert_allclose(rows["offset_ns"] - rows["estimated_offset_ns"], expected)


def test_load_does_not_bias_sync_because_stamps_are_taken_at_egress(
    idle: RunResult, loaded: RunResult
) -> None:
    messages = loaded.tables["messages"]
    sync_msgs = messages[messages["kind"] == "clock_sync"]
    # The exchanges really queued behind traffic...
    assert (sync_msgs["latency_ns"] > sync_msgs["zero_load_ns"] + 1.0).mean() > 0.1
    # ...yet every settled residual is what the idle fabric gives.
    settled = _after(loaded.tables["clock_sync"], 2 * loaded.scenario.clocks.sync_interval)
    expected = _after(idle.tables["clock_sync"], 2 * idle.scenario.clocks.sync_interval)
    for gpu in loaded.fabric.gpus:
        residual = settled.loc[settled["gpu"] == gpu, "residual_ns"]
        assert len(residual) > 5
        np.testing.assert_allclose(
            residual, expected.loc[expected["gpu"] == gpu, "residual_ns"].iloc[0], atol=1e-6
        )


def test_drift_between_exchanges_is_all_that_remains_with_ppm(idle: RunResult) -> None:
    ppm = 300
    result = _run(_tree({**QUIET, "ppm": ppm, "initial_offset": "3us"}))
    fabric = result.fabric
    clocks = result.tables["clocks"].set_index("device")
    interval = result.scenario.clocks.sync_interval
    asymmetry = {
        g: (fabric.node_latency_ns[fabric.root] - fabric.node_latency_ns[g]) / 2
        for g in fabric.gpus
    }
    # Between exchanges a GPU drifts from the root by at most (ppm_gpu - ppm_root) per ns,
    # accumulated over its path (its parent drifts too): bound it by twice the spread.
    spread = (clocks["ppm"].max() - clocks["ppm"].min()) * 1e-6
    fences = result.tables["fences"]
    for gpu, rows in fences.groupby("gpu"):
        error = rows["residual_ns"] - asymmetry[gpu]
        assert np.abs(error).max() <= 2 * spread * (interval + 1000.0)
    assert np.abs(fences["residual_ns"] - fences["gpu"].map(asymmetry)).max() > 1e-3


def test_without_sync_the_offsets_stay_and_drift(idle: RunResult) -> None:
    result = _run(_tree({**QUIET, "ppm": 200, "initial_offset": "50ns", "sync": False}))
    clocks = result.tables["clocks"].set_index("device")
    sync = result.tables["clock_sync"]
    root = result.fabric.root
    assert (sync["estimated_offset_ns"] == 0).all()
    assert sync["path_delay_ns"].isna().all()
    assert (result.tables["messages"]["kind"] != "clock_sync").all()
    for gpu, rows in sync.groupby("gpu"):
        g, r = clocks.loc[gpu], clocks.loc[root]
        t = rows["t_ns"].to_numpy()
        expected = (
            g["initial_offset_ns"] - r["initial_offset_ns"] + (g["ppm"] - r["ppm"]) * 1e-6 * t
        )
        np.testing.assert_allclose(rows["residual_ns"], expected, rtol=1e-9, atol=1e-9)


# --- fences ----------------------------------------------------------------------------------


def test_fences_start_once_every_level_has_synchronised(idle: RunResult) -> None:
    config = idle.scenario.clocks
    fences = idle.tables["fences"]
    _, _, depth = sync_tree(idle.fabric)
    levels = max(depth[g] for g in idle.fabric.gpus)
    assert fences["t_issue_ns"].min() == pytest.approx((levels + 1) * config.sync_interval)
    issued = np.sort(fences["t_issue_ns"].unique())
    np.testing.assert_allclose(np.diff(issued), config.fence_interval)
    assert issued[-1] < idle.scenario.duration
    assert (fences.groupby("fence").size() == len(idle.fabric.gpus)).all()


def test_a_fence_arrives_with_its_message_and_is_read_on_the_gpus_clock(loaded: RunResult) -> None:
    fences = loaded.tables["fences"]
    messages = loaded.tables["messages"]
    sent = messages[messages["kind"] == "fence"].sort_values(["t_inject_ns", "dst"])
    arrivals = fences.sort_values(["t_issue_ns", "gpu"])
    np.testing.assert_allclose(arrivals["t_arrive_true_ns"], sent["t_deliver_ns"])
    assert (sent["latency_ns"] >= sent["zero_load_ns"] * (1 - 1e-9)).all()
    # Under load some fences wait behind data.
    assert (sent["latency_ns"] > sent["zero_load_ns"] + 1.0).any()
    # local - residual is the root's clock at the arrival: here the root complex's own clock.
    root = loaded.tables["clocks"].set_index("device").loc[loaded.fabric.root]
    root_time = root["initial_offset_ns"] + fences["t_arrive_true_ns"]
    np.testing.assert_allclose(fences["t_arrive_local_ns"] - fences["residual_ns"], root_time)


def test_a_root_gpu_receives_its_own_fence_at_once() -> None:
    data = _tree(QUIET)
    data["topology"] = {"kind": "nvswitch", "gpus": 4, "planes": 2, "links_per_gpu": 2}
    result = _run(data)
    fences = result.tables["fences"]
    own = fences[fences["gpu"] == "gpu0"]
    assert len(own) > 0
    assert (own["t_arrive_true_ns"] == own["t_issue_ns"]).all()
    assert (own["residual_ns"] == 0).all()
    assert (
        not (result.tables["messages"]["dst"].astype(str) == "gpu0")
        .loc[result.tables["messages"]["kind"] == "fence"]
        .any()
    )


def test_without_a_clocks_section_nothing_is_added() -> None:
    data = _tree(QUIET, load=0.2)
    del data["clocks"]
    result = _run(data)
    assert not {"ordered_sets", "clock_sync", "fences", "clocks"} & set(result.tables)
    assert set(result.tables["messages"]["kind"]) == {"data"}


# --- bad input ------------------------------------------------------------------------------

GOOD = """\
version: 1
name: clocks
duration: 20us
topology: {kind: fat_tree, gpus: 4, levels: 1, radix: 4}
clocks:
  sync: true
"""


@pytest.mark.parametrize(
    ("tail", "field", "expected"),
    [
        ("  ppm: -1  # <-\n", "clocks.ppm", "0 or more"),
        ("  sync_interval: 0us  # <-\n", "clocks.sync_interval", "positive"),
        ("  drift: {kind: sideways}  # <-\n", "clocks.drift.kind", "random_walk"),
        ("  ppb: 3  # <-\n", "clocks.ppb", "did you mean 'ppm'"),
        (
            "  ppm: 9990\n  drift:\n    kind: linear\n    ppm_per_ms: 1000  # <-\n",
            "clocks.drift.ppm_per_ms",
            "would reach",
        ),
        (
            "faults:\n  - {kind: clock_step_back, device: gpu9, at: 1us, step: 1us}  # <-\n",
            "faults[0].device",
            "unknown device 'gpu9'",
        ),
        (
            "faults:\n  - {kind: clock_step_back, device: gpu1, at: 20us, step: 1us}  # <-\n",
            "faults[0].at",
            "before the end of the run",
        ),
        (
            "faults:\n  - {kind: clock_step_back, device: gpu1, at: 1us, step: 0ns}  # <-\n",
            "faults[0].step",
            "positive",
        ),
        (
            "faults:\n  - {kind: ordered_set_without_stamp, device: gpu1, peer: gpu2, every: 3}"
            "  # <-\n",
            "faults[0].peer",
            "not linked",
        ),
        (
            "faults:\n  - {kind: ordered_set_without_stamp, device: gpu1, peer: sw1.0}  # <-\n",
            "faults[0]",
            "exactly one of 'at' or 'every'",
        ),
    ],
)
def test_bad_clock_input_is_rejected_with_its_line(
    tmp_path: Path, tail: str, field: str, expected: str
) -> None:
    text = GOOD + tail
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.endswith("# <-"))
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    for args in (["validate", str(path)], ["run", str(path), "--out", str(out)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        (message,) = result.stderr.strip().splitlines()
        assert message.startswith(f"error: {path}:{line}: {field}: "), message
        assert expected in message
        assert not out.exists()


def test_a_clock_fault_without_clocks_is_rejected(tmp_path: Path) -> None:
    text = GOOD.replace("clocks:\n  sync: true\n", "") + (
        "faults:\n  - kind: clock_step_back  # <-\n    device: gpu1\n    at: 1us\n    step: 1us\n"
    )
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert f"{path}:6: faults[0].kind: " in result.stderr
    assert "needs a 'clocks:' section" in result.stderr
