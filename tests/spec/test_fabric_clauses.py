"""The L3 clauses: fabric.hop_limit, fabric.topology_limits, fabric.tso_window.

Each clause is shown passing and genuinely failing. The TSO window failure is
emergent: the violation scenario holds at light load and breaks only because
load stretches the round trip.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from ruamel.yaml import YAML

from sitssim.scenario import load_scenario, scenario_from_data
from sitssim.simulation import RunResult, simulate
from sitssim.spec.registry import Verdict
from sitssim.spec.verdict import Part

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
FAT_TREE = SCENARIOS / "fat_tree_8gpu.yaml"
TSO_LOADED = SCENARIOS / "violations" / "tso_loaded.yaml"


def _verdict(result: RunResult, clause: str) -> Verdict:
    (found,) = [v for v in result.verdicts if v.id == clause]
    return found


def _rows(table: pd.DataFrame, id_column: str, verdict: Verdict, name: str) -> pd.DataFrame:
    """The rows of ``table`` that the verdict's evidence for ``name`` points at."""
    (ev,) = [e for e in verdict.evidence if e.table == name]
    return table[table[id_column].isin(ev.rows)]


def _data(path: Path) -> dict[str, Any]:
    return YAML(typ="safe").load(path.read_text())


def _chain(hops: int) -> dict[str, Any]:
    names = ["gpu0", *(f"sw{i}" for i in range(1, hops)), "gpu1"]
    return {
        "name": f"chain_{hops}",
        "duration": "3us",
        "topology": {
            "kind": "graph",
            "nodes": [{"id": n, "kind": "gpu" if n.startswith("gpu") else "switch"} for n in names],
            "edges": [{"a": a, "b": b} for a, b in itertools.pairwise(names)],
        },
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "uniform_random",
                "arrivals": "periodic",
                "message_bytes": "256B",
                "interval": "300ns",
            }
        ],
    }


def _structure_only(data: dict[str, Any]) -> RunResult:
    """Run a scenario with no traffic: enough for configuration clauses."""
    return simulate(scenario_from_data({**data, "workloads": []}))


@pytest.fixture(scope="module")
def shipped_fat_tree() -> RunResult:
    return simulate(load_scenario(FAT_TREE))


@pytest.fixture(scope="module")
def tso_loaded() -> RunResult:
    return simulate(load_scenario(TSO_LOADED))


@pytest.fixture(scope="module")
def tso_light() -> RunResult:
    data = _data(TSO_LOADED)
    (background,) = [w for w in data["workloads"] if w["kind"] == "synthetic"]
    background["load"] = 0.3
    return simulate(scenario_from_data(data))


# --- fabric.hop_limit ----------------------------------------------------------


def test_hop_limit_passes_on_the_fat_tree(shipped_fat_tree: RunResult) -> None:
    verdict = _verdict(shipped_fat_tree, "fabric.hop_limit")
    messages = shipped_fat_tree.tables["messages"]
    assert verdict.verdict == "pass"
    assert verdict.measured == messages["hops"].max()
    assert verdict.measured <= verdict.limit
    evidence = _rows(messages, "msg_id", verdict, "messages")
    assert len(evidence) > 0
    assert (evidence["hops"] == messages["hops"].max()).all()


@pytest.mark.parametrize(("hops", "expected"), [(7, "pass"), (8, "fail"), (9, "fail")])
def test_hop_limit_on_chains(hops: int, expected: str) -> None:
    result = simulate(scenario_from_data(_chain(hops)))
    verdict = _verdict(result, "fabric.hop_limit")
    messages = result.tables["messages"]
    assert verdict.verdict == expected
    assert verdict.measured == hops
    if expected == "fail":
        over = messages[messages["hops"] > verdict.limit]
        (ev,) = verdict.evidence
        assert ev.table == "messages"
        assert ev.total == len(over) == len(messages)
        assert set(ev.rows) <= set(over["msg_id"])
        assert "gpu0>" in verdict.detail


def test_hop_limit_is_not_applicable_without_traffic() -> None:
    result = _structure_only(_chain(9))
    assert _verdict(result, "fabric.hop_limit").verdict == "n/a"


# --- fabric.topology_limits ----------------------------------------------------


def _part(verdict: Verdict, name: str) -> Part:
    (found,) = [p for p in verdict.parts if p.name == name]
    return found


def _working_gpus(result: RunResult) -> set[str]:
    """GPUs at an end of a link that entered L0 and at an end of a delivered message,
    worked out here from the PHY's and the transport's tables."""
    states, links = result.tables["link_states"], result.tables["phy_links"]
    up = links.merge(states[states["state"] == "L0"][["link"]].drop_duplicates(), on="link")
    trained = set(up["upstream"]) | set(up["downstream"])
    messages = result.tables["messages"].dropna(subset=["t_deliver_ns"])
    return trained & (set(messages["src"]) | set(messages["dst"])) & set(result.fabric.gpus)


def test_topology_limits_pass_for_the_shipped_fat_tree(shipped_fat_tree: RunResult) -> None:
    """The GPU count the verdict leads with is the GPUs seen training and carrying traffic;
    the configured count and the arbitration stand beside it, each labelled configured."""
    verdict = _verdict(shipped_fat_tree, "fabric.topology_limits")
    assert verdict.verdict == "pass"
    seen = _part(verdict, "gpus_seen")
    assert seen.basis == "measured"
    assert seen.measured == len(_working_gpus(shipped_fat_tree)) == 8
    assert (verdict.measured, verdict.basis) == (seen.measured, "measured")
    assert _part(verdict, "gpus_configured").measured == len(shipped_fat_tree.fabric.gpus)
    arbitration = _part(verdict, "arbitration")
    assert (arbitration.measured, arbitration.basis) == (40.0, "configured")
    assert "configured, not measured" in verdict.detail


def test_an_idle_gpu_is_counted_as_configured_not_as_seen() -> None:
    """A GPU that carries nothing is not seen, yet still belongs to the fabric: the
    measured count drops while the configured count, and the verdict, do not."""
    data = _data(FAT_TREE)
    data["topology"].update(gpus=12, spines=1)
    data["duration"] = "3us"
    # Clock sync would reach every GPU: only the workload's traffic here.
    del data["clocks"]
    gpus = [f"gpu{i}" for i in range(12)]
    data["workloads"] = [
        {
            "kind": "synthetic",
            "pattern": "uniform_random",
            "message_bytes": "1KiB",
            "load": 0.3,
            "sources": gpus[:6],
            "destinations": gpus[:6],
        }
    ]
    result = simulate(scenario_from_data(data))
    verdict = _verdict(result, "fabric.topology_limits")
    seen, configured = _part(verdict, "gpus_seen"), _part(verdict, "gpus_configured")
    assert seen.measured == len(_working_gpus(result)) == 6
    assert seen.verdict == "pass"
    assert (configured.measured, configured.verdict) == (12, "fail")
    assert verdict.verdict == "fail"
    assert (verdict.measured, verdict.basis) == (12, "configured")
    assert "6 configured GPU(s) did not" in verdict.detail


def test_twelve_gpus_in_a_fat_tree_fail() -> None:
    data = _data(FAT_TREE)
    data["topology"].update(gpus=12, spines=1)
    del data["clocks"]
    result = _structure_only(data)
    verdict = _verdict(result, "fabric.topology_limits")
    nodes = result.tables["nodes"]
    assert verdict.verdict == "fail"
    assert result.tables["messages"].empty
    # No traffic: nothing was seen carrying any, and the count is the configured one only.
    assert [p.name for p in verdict.parts] == ["gpus_configured", "arbitration"]
    assert (verdict.measured, verdict.basis) == (12, "configured")
    assert verdict.measured > verdict.limit
    assert "configured one only" in verdict.detail
    assert set(_rows(nodes, "node_id", verdict, "nodes")["kind"]) == {"gpu"}


@pytest.mark.parametrize(("gpus", "expected"), [(4, "pass"), (5, "fail")])
def test_direct_rc_gpu_count(gpus: int, expected: str) -> None:
    result = _structure_only(
        {"name": "rc", "duration": "1us", "topology": {"kind": "direct_rc", "gpus": gpus}}
    )
    verdict = _verdict(result, "fabric.topology_limits")
    assert verdict.verdict == expected
    assert verdict.measured == gpus
    assert verdict.limit == 4


@pytest.mark.parametrize(
    ("arbitration", "slow_levels"), [("30ns", {1, 2}), (["40ns", "30ns"], {2}), ("35ns", set())]
)
def test_switch_arbitration_per_level(arbitration: Any, slow_levels: set[int]) -> None:
    data = _data(FAT_TREE)
    data["switch"]["arbitration"] = arbitration
    result = _structure_only(data)
    verdict = _verdict(result, "fabric.topology_limits")
    if not slow_levels:
        assert verdict.verdict == "pass"
        return
    assert verdict.verdict == "fail"
    assert (verdict.op, verdict.basis) == (">=", "configured")
    assert verdict.measured == 30.0
    assert verdict.measured < verdict.limit
    flagged = _rows(result.tables["nodes"], "node_id", verdict, "nodes")
    assert set(flagged["kind"]) == {"switch"}
    assert set(flagged["level"]) == slow_levels


@pytest.mark.parametrize(
    ("scenario", "failing"),
    [
        ("topology_switched_12gpu.yaml", {"gpus_seen": 12, "gpus_configured": 12}),
        ("topology_direct_rc_5gpu.yaml", {"gpus_seen": 5, "gpus_configured": 5}),
        ("topology_slow_arbitration.yaml", {"arbitration": 30.0}),
    ],
)
def test_topology_witnesses_fail_their_parts_and_nothing_else(
    scenario: str, failing: dict[str, float]
) -> None:
    """The three misconfiguration witnesses load, run and fail fabric.topology_limits on
    the parts their headers name, the GPU counts seen agreeing with the run's tables, and
    fail no other clause."""
    result = simulate(load_scenario(SCENARIOS / "violations" / scenario))
    verdict = _verdict(result, "fabric.topology_limits")
    assert {p.name: p.measured for p in verdict.parts if p.verdict == "fail"} == failing
    assert _part(verdict, "gpus_seen").measured == len(_working_gpus(result))
    assert [v.id for v in result.failed] == ["fabric.topology_limits"]


# --- fabric.tso_window ---------------------------------------------------------


def _farthest_p99(result: RunResult) -> float:
    probes = result.tables["probes"].dropna(subset=["rtt_ns"])
    far = probes[probes["hops"] == probes["hops"].max()]
    return float(far.groupby("dst", observed=True)["rtt_ns"].quantile(0.99).max())


def test_tso_window_passes_on_the_shipped_fat_tree(shipped_fat_tree: RunResult) -> None:
    verdict = _verdict(shipped_fat_tree, "fabric.tso_window")
    assert verdict.verdict == "pass"
    # Measured: the window the run's round trips require; limit: the configured window.
    assert verdict.measured == pytest.approx(2 * _farthest_p99(shipped_fat_tree) + 150.0)
    assert verdict.limit == shipped_fat_tree.scenario.root_complex.tso_window
    assert (verdict.op, verdict.basis) == ("<=", "measured")


def test_tso_window_fails_under_load(tso_loaded: RunResult) -> None:
    verdict = _verdict(tso_loaded, "fabric.tso_window")
    assert verdict.verdict == "fail"
    assert verdict.measured > verdict.limit
    assert verdict.measured == pytest.approx(2 * _farthest_p99(tso_loaded) + 150.0)
    probes = tso_loaded.tables["probes"]
    evidence = _rows(probes, "probe_id", verdict, "probes")
    assert len(evidence) > 0
    assert (evidence["rtt_ns"] >= _farthest_p99(tso_loaded)).all()
    assert (evidence["hops"] == probes["hops"].max()).all()


def test_tso_failure_is_emergent_from_load(tso_loaded: RunResult, tso_light: RunResult) -> None:
    assert _verdict(tso_light, "fabric.tso_window").verdict == "pass"
    # Nothing but the background load differs: same window, topology, probes and seed.
    loaded = tso_loaded.scenario.model_dump()
    light = tso_light.scenario.model_dump()
    (index,) = [i for i, w in enumerate(light["workloads"]) if w["kind"] == "synthetic"]
    assert light["workloads"][index]["load"] < loaded["workloads"][index]["load"]
    light["workloads"][index]["load"] = loaded["workloads"][index]["load"]
    assert light == loaded
    # Load stretches the farthest GPU's round trip past what the window covers: the
    # required window is the run's (basis measured), the limit the same configured window.
    assert _farthest_p99(tso_light) < _farthest_p99(tso_loaded)
    light_verdict, loaded_verdict = (
        _verdict(r, "fabric.tso_window") for r in (tso_light, tso_loaded)
    )
    assert light_verdict.limit == loaded_verdict.limit
    assert light_verdict.measured < loaded_verdict.measured
    assert light_verdict.basis == loaded_verdict.basis == "measured"


def test_tso_window_is_not_applicable_without_probes() -> None:
    data = _data(FAT_TREE)
    data["duration"] = "5us"
    data["workloads"] = [w for w in data["workloads"] if w["kind"] != "probes"]
    result = simulate(scenario_from_data(data))
    verdict = _verdict(result, "fabric.tso_window")
    assert verdict.verdict == "n/a"
    assert "probe" in verdict.detail


def test_tso_window_is_not_applicable_without_a_window() -> None:
    data = _data(FAT_TREE)
    data["duration"] = "5us"
    del data["root_complex"]["tso_window"]
    result = simulate(scenario_from_data(data))
    assert len(result.tables["probes"]) > 0
    verdict = _verdict(result, "fabric.tso_window")
    assert verdict.verdict == "n/a"
    assert "window" in verdict.detail
    assert np.isfinite(result.tables["probes"]["rtt_ns"]).all()
