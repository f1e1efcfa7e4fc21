"""Every check ``run`` makes before it simulates, in one ordered list that ``validate`` runs too.

A scenario that validates must never be refused by ``run``: so both commands call
:func:`preflight`, which builds the fabric once, runs the check of each stage of ``CHECKS``
in order (each reads its own section of the scenario and raises a located ``InputError``),
and last the resource estimate, which refuses a run the machine cannot hold. ``CHECKS`` is
the stages that have a check, in registry order (:mod:`sitssim.stages.registry`): a stage's
check is part of its registry entry, so a stage ``run`` builds is a stage ``validate``
checks. The stage builders keep calling their own checks (a library caller may skip
preflight), so a check here is the stage's own function, never a copy of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sitssim.estimate import Estimate, check_fits, estimate
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.scenario import Scenario
from sitssim.stages.base import StageSpec
from sitssim.stages.registry import CHECKED, STAGES
from sitssim.workloads.section import WorkloadSection

CHECKS: list[StageSpec] = list(CHECKED)


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
    for spec in CHECKS:
        spec.check(scenario, fabric)
    check_fidelity(scenario)
    est = estimate(scenario, fabric)
    check_fits(scenario, est)
    return Preflight(scenario=scenario, fabric=fabric, estimate=est)


def check_fidelity(scenario: Scenario) -> None:
    """Refuse a flow-level run of a workload only the packet transport can carry.

    A flow-level run leaves out the stages whose models need packets (``packet_only``):
    a left-out link-layer or switch model makes its clauses n/a, but a left-out workload
    would drop its traffic without a word, so it is an error here instead.
    """
    if scenario.fidelity == "packet":
        return
    for spec in STAGES:
        if spec.packet_only is None:
            continue
        section = spec.section(scenario)
        if isinstance(section, WorkloadSection) and section.workloads:
            index, workload = section.workloads[0]
            raise scenario.error(
                ("workloads", index, "kind"),
                f"a {workload.kind} workload needs fidelity: packet (this run is flow-level): "
                f"a flow-level run does not model {spec.packet_only}",
            )
