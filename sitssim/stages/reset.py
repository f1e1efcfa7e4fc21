"""Wiring of ``sitssim diag reset``: the scenario's fabric, its links, then the PHY's reset.

The reset itself (:mod:`sitssim.phy.diag`) knows links, not scenarios or fabrics; building
the fabric is the fabric layer's job, above the PHY, so the two meet here.
"""

from __future__ import annotations

from sitssim.errors import Locator
from sitssim.fabric.topology import build_fabric
from sitssim.phy.diag import ResetRow, choose_links, reset_rows
from sitssim.phy.links import check_phy_references, phy_links
from sitssim.scenario import Scenario
from sitssim.stages.phy import phy_section


def reset_links(scenario: Scenario, threshold_ns: float, spec: str = "all") -> list[ResetRow]:
    """Reset the chosen links of ``scenario`` at t = 0 and train them to L0."""
    fabric = build_fabric(scenario)
    section = phy_section(scenario)
    check_phy_references(section, fabric, Locator(scenario.error))
    chosen = choose_links(phy_links(section, fabric), spec, scenario.source.path)
    return reset_rows(chosen, section.seed, threshold_ns)
