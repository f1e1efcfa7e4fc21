"""The transactions stage: every ``kind: transactions`` workload, armed on the transport.

Its reads are round trips too, so their rows join the run's ``probes`` table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from sitssim.config.transaction_config import TransactionWorkload
from sitssim.errors import Locator
from sitssim.fabric.topology import Fabric
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring, workload_section
from sitssim.workloads.requests import (
    TransactionRun,
    check_transaction_workloads,
    start_transaction_workloads,
    transaction_metrics,
    transaction_probe_rows,
    transaction_tables,
)
from sitssim.workloads.section import WorkloadSection

if TYPE_CHECKING:
    from sitssim.fabric.transport import Transport


def transaction_section(scenario: Scenario) -> WorkloadSection[TransactionWorkload]:
    return workload_section(scenario, TransactionWorkload)


@dataclass
class TransactionStage(Stage):
    """The transaction workloads of one run; ``runs`` fill in as the run goes."""

    section: WorkloadSection[TransactionWorkload]
    fabric: Fabric
    where: Locator
    runs: list[TransactionRun] = field(default_factory=list)

    def start(self, transport: Transport) -> None:
        self.runs = start_transaction_workloads(self.section, self.fabric, transport, self.where)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        if not self.runs:
            return {}
        tables = transaction_tables(self.runs)
        probes = pd.concat(
            [
                run.tables["probes"],
                transaction_probe_rows(tables["transactions"], run.tables["messages"]),
            ],
            ignore_index=True,
        )
        return {**tables, "probes": probes}

    def metrics(self, run: Finished) -> dict[str, object]:
        if not self.runs:
            return {}
        return {"transactions": transaction_metrics(self.runs, run.tables, run.simulated_ns)}


def _build(
    section: WorkloadSection[TransactionWorkload], fabric: Fabric, wiring: Wiring, where: Locator
) -> TransactionStage:
    return TransactionStage(section, fabric, where)


STAGE = StageSpec(
    name="transactions",
    section=transaction_section,
    builder=_build,
    checker=check_transaction_workloads,
)
