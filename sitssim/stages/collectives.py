"""The collectives stage: every ``kind: collective`` workload, armed on the transport."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from sitssim.fabric.topology import Fabric
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring
from sitssim.workloads.collectives import (
    check_collective_workloads,
    collective_metrics,
    collectives_table,
    start_collective_workloads,
)

if TYPE_CHECKING:
    from sitssim.fabric.transport import Transport


@dataclass
class CollectiveStage(Stage):
    """The collectives of one run; ``records`` fill in as the run goes."""

    scenario: Scenario
    fabric: Fabric
    records: list = field(default_factory=list)

    def start(self, transport: Transport) -> None:
        self.records = start_collective_workloads(self.scenario, self.fabric, transport)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        return {"collectives": collectives_table(self.records)} if self.records else {}

    def metrics(self, run: Finished) -> dict[str, object]:
        if not self.records:
            return {}
        return {"collectives": collective_metrics(run.tables["collectives"])}


def _build(scenario: Scenario, fabric: Fabric, wiring: Wiring) -> CollectiveStage:
    return CollectiveStage(scenario, fabric)


STAGE = StageSpec(name="collectives", check=check_collective_workloads, build=_build)
