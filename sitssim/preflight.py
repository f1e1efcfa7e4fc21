"""Every check ``run`` makes before it simulates, in one ordered list that ``validate`` runs too.

A scenario that validates must never be refused by ``run``: so both commands call
:func:`preflight`, which builds the fabric once, runs each check of ``CHECKS`` in order
(each ``(scenario, fabric) -> None`` raises a located ``InputError``), and last the resource
estimate, which refuses a run the machine cannot hold. Adding a check is one function and
one line in ``CHECKS``. The stage builders keep calling their own checks (a library caller
may skip preflight), so a check here is the stage's own function, never a copy of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sitssim.estimate import Estimate, check_fits, estimate
from sitssim.fabric.clock_sync import check_clock_references
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.link.cdc_stage import check_cdc
from sitssim.phy.links import check_phy_references
from sitssim.scenario import Scenario
from sitssim.workloads.collectives import check_collective_workloads
from sitssim.workloads.inference import check_inference_workloads
from sitssim.workloads.requests import check_transaction_workloads
from sitssim.workloads.synthetic import check_schedule_workloads

Check = Callable[[Scenario, Fabric], None]

# In the order the run meets them: L1 references, L2 CDC, then each workload kind, clocks.
CHECKS: list[Check] = [
    check_phy_references,
    check_cdc,
    check_schedule_workloads,
    check_collective_workloads,
    check_inference_workloads,
    check_transaction_workloads,
    check_clock_references,
]


@dataclass
class Preflight:
    """What the checks built and measured, handed on so the run does not redo it."""

    scenario: Scenario
    fabric: Fabric
    estimate: Estimate

    def summary(self) -> str:
        """The ``validate`` line after the file name (tests grep its first part)."""
        f = self.fabric
        return (
            f"valid ({f.kind}, {len(f.gpus)} GPUs, {len(f.switches)} switches, "
            f"{len(f.channels) // 2} links, {len(self.scenario.workloads)} workloads; "
            f"{self.estimate.summary()})"
        )


def preflight(scenario: Scenario) -> Preflight:
    """Build the fabric, run every pre-run check and the resource estimate."""
    fabric = build_fabric(scenario)
    for check in CHECKS:
        check(scenario, fabric)
    est = estimate(scenario, fabric)
    check_fits(scenario, est)
    return Preflight(scenario=scenario, fabric=fabric, estimate=est)
