"""The schedule stage: the ``synthetic`` and ``probes`` workloads, drawn before the run.

Their injections do not depend on the run, so they are drawn once into the transport's
schedule rather than started as processes. The probes' completer answers on the
transport (``ProbeResponder``), with each probe workload's turnaround and completion size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sitssim.errors import Locator
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric
from sitssim.scenario import ProbeWorkload, Scenario, SyntheticWorkload
from sitssim.stages.base import Stage, StageSpec, Wiring, workload_section
from sitssim.workloads.probe_responder import ProbeResponder
from sitssim.workloads.synthetic import ScheduleSection, build_schedule, check_schedule_workloads

if TYPE_CHECKING:
    from sitssim.fabric.transport import Transport


class ScheduleStage(Stage):
    """The probe workloads' responder, armed on the transport (none without probes)."""

    def __init__(self, probe_params: dict[int, tuple[float, int]]) -> None:
        self.probe_params = probe_params
        self.responder: ProbeResponder | None = None

    def start(self, transport: Transport) -> None:
        if self.probe_params:
            self.responder = ProbeResponder(transport, self.probe_params)
            self.responder.attach()

    def finish(self) -> None:
        if self.responder is not None:
            self.responder.check_idle()


def schedule_section(scenario: Scenario) -> ScheduleSection:
    return workload_section(scenario, SyntheticWorkload, ProbeWorkload)


def scenario_schedule(scenario: Scenario, fabric: Fabric, node_id: dict[str, int]) -> Schedule:
    """The schedule a run of ``scenario`` draws: what a test or benchmark that drives the
    transport alone feeds it."""
    return build_schedule(schedule_section(scenario), fabric, node_id, Locator(scenario.error))


def _build(section: ScheduleSection, fabric: Fabric, wiring: Wiring, where: Locator) -> Stage:
    wiring.schedule = build_schedule(section, fabric, wiring.node_id, where)
    return ScheduleStage(
        {
            i: (wl.turnaround, wl.completion_bytes)
            for i, wl in section.workloads
            if isinstance(wl, ProbeWorkload)
        }
    )


STAGE = StageSpec(
    name="schedule",
    section=schedule_section,
    builder=_build,
    checker=check_schedule_workloads,
)
