"""The stage registry drives both commands: ``validate`` runs the stages' checks, ``run``
builds, starts and reads back every stage, in registry order."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import sitssim.simulation as simulation
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.preflight import CHECKS
from sitssim.scenario import Scenario, load_scenario
from sitssim.simulation import simulate
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring
from sitssim.stages.registry import STAGES

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _small(name: str = "fat_tree_8gpu.yaml", duration_ns: float = 2000.0) -> Scenario:
    return load_scenario(SCENARIOS / name).updated(duration=duration_ns)


def test_validate_runs_every_stage_check_in_registry_order() -> None:
    assert [s.check for s in STAGES if s.check is not None] == CHECKS
    names = [s.name for s in STAGES]
    assert len(set(names)) == len(names)
    # The PHY's references are checked first: every later stage reads the trained links.
    assert names[0] == "phy"
    # The flit stage times Recovery with the PHY stage's recover, so it comes after it.
    assert names.index("flit") > names.index("phy")


class _Spy(Stage):
    """A stage that records each hook, so the test sees when the orchestrator calls it."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def start(self, transport: Transport) -> None:
        self.seen.append(f"start at {transport.env.now}")

    def finish(self) -> None:
        self.seen.append("finish")

    def end_ns(self) -> float:
        return 5000.0

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        # Earlier stages' tables are there to read.
        self.seen.append(f"tables after {sorted({'phy_links', 'credits'} & set(run.tables))}")
        return {"spy": pd.DataFrame({"x": [1]})}

    def metrics(self, run: Finished) -> dict[str, object]:
        return {"link_layer": {"spy": True}, "spy": {"simulated_ns": run.simulated_ns}}


def test_a_registered_stage_is_built_started_and_read_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []

    def build(scenario: Scenario, fabric: Fabric, wiring: Wiring) -> Stage:
        seen.append(f"build with recover {wiring.recover is not None}")
        return _Spy(seen)

    monkeypatch.setattr(simulation, "STAGES", (*STAGES, StageSpec("spy", None, build)))
    result = simulate(_small())
    assert seen == [
        "build with recover True",
        "start at 0",
        "finish",
        "tables after ['credits', 'phy_links']",
    ]
    # The stage's end stretches the run; its table comes after every earlier stage's.
    assert result.simulated_ns == 5000.0
    names = list(result.tables)
    assert names[-1] == "spy" and names.index("config") < names.index("phy_links")
    # A shared section is extended, not replaced; a new one comes last.
    assert result.metrics["link_layer"]["spy"] is True
    assert "credit_stalls" in result.metrics["link_layer"]
    assert "flits_sent" in result.metrics["link_layer"]
    assert list(result.metrics)[-1] == "spy"
    assert result.metrics["spy"] == {"simulated_ns": 5000.0}


def test_the_metrics_sections_come_in_registry_order() -> None:
    metrics = simulate(_small("llama3_8b_tp8_nvswitch.yaml")).metrics
    keys = list(metrics)
    # The transport's own figures first (ending with simulated_ns), then each stage's.
    assert keys[keys.index("simulated_ns") + 1 :] == ["phy", "link_layer", "inference"]
    assert list(metrics["link_layer"])[:2] == ["links_with_errors", "flits_sent"]
    assert list(metrics["link_layer"])[-1] == "credit_stall_ns"


def test_the_transactions_stage_adds_its_reads_to_the_probes_in_place() -> None:
    result = simulate(_small("direct_rc_host_io.yaml"))
    names = list(result.tables)
    assert names[:2] == ["messages", "probes"]
    assert names[-2:] == ["transactions", "rob_stalls"]
    probes = result.tables["probes"]
    reads = result.tables["messages"]
    from_probes = reads[reads["kind"] == "probe_request"]
    # Every probe request's row, then one per transaction read, which probes alone lack.
    assert len(probes) > len(from_probes) > 0
    assert probes["probe_id"].iloc[: len(from_probes)].tolist() == from_probes["msg_id"].tolist()
