"""The switch-tables stage: the input-queued switches' VC and arbitration tables.

The switches record as they run (``sitssim.switch.input_queued``, "Recording"); this stage
only reads them back once the run is over (``sitssim.switch.tables``), so it starts
nothing on the transport and moves no event. Its section is the tenants' names, which
label the tables' tenant columns. A run without input-queued switches gets none of the
tables; one with them gets all five, empty (with their columns) if nothing crossed.
Nothing goes to the report's metrics: the tables are written as parquet only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sitssim.errors import Locator
from sitssim.fabric.topology import Fabric
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring
from sitssim.switch.input_queued import InputQueuedSwitch
from sitssim.switch.tables import MessageColumns, switch_tables


def tenant_names(scenario: Scenario) -> tuple[str, ...]:
    return tuple(t.name for t in scenario.tenants)


@dataclass
class SwitchTablesStage(Stage):
    tenants: tuple[str, ...]

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        transport = run.transport
        switches = [n for n in transport.node_objects if isinstance(n, InputQueuedSwitch)]
        if not switches:
            return {}
        columns = MessageColumns(
            vc=np.asarray(transport.vc, dtype=np.int64),
            tenant=np.asarray(transport.tenant, dtype=np.int64),
            size=np.asarray(transport.size, dtype=np.int64),
            tenant_names=self.tenants,
        )
        return switch_tables(
            switches, run.fabric, columns, run.tables.get("credits"), run.simulated_ns
        )


def _build(
    tenants: tuple[str, ...], fabric: Fabric, wiring: Wiring, where: Locator
) -> SwitchTablesStage:
    return SwitchTablesStage(tenants)


STAGE = StageSpec(
    name="switch_tables",
    section=tenant_names,
    builder=_build,
    packet_only="the input-queued switches' buffers and VC occupancy",
)
