"""The collectives stage: every ``kind: collective`` workload, armed on the transport."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from sitssim.config.collective_config import CollectiveWorkload
from sitssim.errors import Locator
from sitssim.fabric.topology import Fabric
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring, workload_section
from sitssim.workloads.collective_workloads import (
    CollectiveSection,
    check_collective_workloads,
    collective_metrics,
    collectives_table,
    start_collective_workloads,
)

if TYPE_CHECKING:
    from sitssim.fabric.transport import Transport


def collective_section(scenario: Scenario) -> CollectiveSection:
    """The collective workloads, with what the scenario's switches can do."""
    base = workload_section(scenario, CollectiveWorkload)
    return CollectiveSection(
        base.workloads,
        base.seed,
        base.duration,
        base.tenants,
        switches=scenario.switch.capabilities(),
    )


@dataclass
class CollectiveStage(Stage):
    """The collectives of one run; ``records`` fill in as the run goes."""

    section: CollectiveSection
    fabric: Fabric
    where: Locator
    records: list = field(default_factory=list)

    def start(self, transport: Transport) -> None:
        self.records = start_collective_workloads(self.section, self.fabric, transport, self.where)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        return {"collectives": collectives_table(self.records)} if self.records else {}

    def metrics(self, run: Finished) -> dict[str, object]:
        if not self.records:
            return {}
        return {"collectives": collective_metrics(run.tables["collectives"])}


def _build(
    section: CollectiveSection, fabric: Fabric, wiring: Wiring, where: Locator
) -> CollectiveStage:
    return CollectiveStage(section, fabric, where)


STAGE = StageSpec(
    name="collectives",
    section=collective_section,
    builder=_build,
    checker=check_collective_workloads,
)
