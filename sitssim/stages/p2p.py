"""The p2p stage: every ``kind: p2p`` workload's copies, armed on the transport."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from sitssim.config.p2p_config import P2pWorkload
from sitssim.errors import Locator
from sitssim.fabric.topology import Fabric
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring, workload_section
from sitssim.workloads.peer_copies import (
    PairRecord,
    check_p2p_workloads,
    p2p_metrics,
    p2p_table,
    start_p2p_workloads,
)
from sitssim.workloads.section import WorkloadSection

if TYPE_CHECKING:
    from sitssim.fabric.transport import Transport


def p2p_section(scenario: Scenario) -> WorkloadSection[P2pWorkload]:
    return workload_section(scenario, P2pWorkload)


@dataclass
class P2pStage(Stage):
    """The copies of one run; ``records`` fill in as the run goes."""

    section: WorkloadSection[P2pWorkload]
    fabric: Fabric
    where: Locator
    records: list[PairRecord] = field(default_factory=list)

    def start(self, transport: Transport) -> None:
        self.records = start_p2p_workloads(self.section, self.fabric, transport, self.where)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        return {"p2p": p2p_table(self.records)} if self.records else {}

    def metrics(self, run: Finished) -> dict[str, object]:
        return {"p2p": p2p_metrics(run.tables["p2p"])} if self.records else {}


def _build(
    section: WorkloadSection[P2pWorkload], fabric: Fabric, wiring: Wiring, where: Locator
) -> P2pStage:
    return P2pStage(section, fabric, where)


STAGE = StageSpec(name="p2p", section=p2p_section, builder=_build, checker=check_p2p_workloads)
