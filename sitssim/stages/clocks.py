"""The clocks stage: device clocks, the sync exchanges and the fences (``clocks:``)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sitssim.fabric.clock_sync import ClockStage, check_clock_references
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring


def attach_clocks(scenario: Scenario, fabric: Fabric, transport: Transport) -> ClockStage | None:
    """Check the clock faults, then set up the clocks on ``transport`` (None: no clocks)."""
    check_clock_references(scenario, fabric)
    if not scenario.clocks.enabled:
        return None
    stage = ClockStage(scenario, fabric, transport)
    stage.start()
    return stage


@dataclass
class _ClockRun(Stage):
    """The clocks of one run, attached when the transport exists (None: no ``clocks:``)."""

    scenario: Scenario
    fabric: Fabric
    clocks: ClockStage | None = None

    def start(self, transport: Transport) -> None:
        self.clocks = attach_clocks(self.scenario, self.fabric, transport)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        return {} if self.clocks is None else self.clocks.tables(run.simulated_ns)


def _build(scenario: Scenario, fabric: Fabric, wiring: Wiring) -> _ClockRun:
    return _ClockRun(scenario, fabric)


STAGE = StageSpec(name="clocks", check=check_clock_references, build=_build)
