"""Small scenarios for PHY tests: GPUs around one switch, no traffic unless asked."""

from __future__ import annotations

from typing import Any

from sitssim.errors import Locator
from sitssim.fabric.topology import build_fabric
from sitssim.scenario import Scenario, scenario_from_data
from sitssim.spec.registry import JUDGES, RunContext, Verdict
from sitssim.stages.phy import PhyStage, phy_section, run_phy

PHY_CLAUSES = (
    "phy.symbol_rate",
    "phy.training_sequence",
    "phy.eq_level3",
    "phy.phase_alignment",
    "phy.retrain_trigger",
    "phy.reset_to_l0",
)


def star(
    gpus: int = 2,
    channel: dict[str, Any] | None = None,
    phy: dict[str, Any] | None = None,
    faults: list[dict[str, Any]] | None = None,
    drift: list[dict[str, Any]] | None = None,
    duration: str = "20us",
    seed: int = 1,
    **link: Any,
) -> Scenario:
    """``gpus`` GPUs on switch ``s0`` (links ``gpu<i>-s0``) sharing one link profile."""
    data: dict[str, Any] = {
        "version": 1,
        "name": "phy_star",
        "seed": seed,
        "duration": duration,
        "topology": {
            "kind": "graph",
            "nodes": [{"id": "s0", "kind": "switch"}]
            + [{"id": f"gpu{i}", "kind": "gpu"} for i in range(gpus)],
            "edges": [{"a": f"gpu{i}", "b": "s0"} for i in range(gpus)],
        },
        "links": {"default": {"rate": "64GT/s", "lanes": 16, **link, "channel": channel or {}}},
    }
    for key, value in (("phy", phy), ("faults", faults), ("drift", drift)):
        if value:
            data[key] = value
    return scenario_from_data(data)


def phy_run(scenario: Scenario) -> PhyStage:
    """The PHY stage of ``scenario`` alone, built from its section as a run builds it."""
    return run_phy(phy_section(scenario), build_fabric(scenario), Locator(scenario.error))


def phy_verdicts(scenario: Scenario, stage: PhyStage | None = None) -> dict[str, Verdict]:
    """The L1 clauses judged on the PHY tables of ``scenario`` alone (no traffic run)."""
    stage = stage or phy_run(scenario)
    ctx = RunContext(tables=stage.tables())
    return {cid: JUDGES[cid](ctx) for cid in PHY_CLAUSES}
