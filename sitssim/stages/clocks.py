"""The clocks stage: device clocks, the sync exchanges and the fences (``clocks:``)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sitssim.config.clock_params import ClockStepBack, OrderedSetWithoutStamp
from sitssim.errors import Locator
from sitssim.fabric.clock_sync import ClockSection, ClockStage, check_clock_references
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring


def clock_section(scenario: Scenario) -> ClockSection:
    """The ``clocks:`` block, the faults aimed at clocks, and the seed and duration."""
    faults = tuple(
        (i, f)
        for i, f in enumerate(scenario.faults)
        if isinstance(f, ClockStepBack | OrderedSetWithoutStamp)
    )
    return ClockSection(scenario.clocks, faults, scenario.seed, scenario.duration)


def attach_clocks(
    section: ClockSection, fabric: Fabric, transport: Transport, where: Locator
) -> ClockStage | None:
    """Check the clock faults, then set up the clocks on ``transport`` (None: no clocks)."""
    check_clock_references(section, fabric, where)
    if not section.config.enabled:
        return None
    stage = ClockStage(section, fabric, transport)
    stage.start()
    return stage


@dataclass
class _ClockRun(Stage):
    """The clocks of one run, attached when the transport exists (None: no ``clocks:``)."""

    section: ClockSection
    fabric: Fabric
    where: Locator
    clocks: ClockStage | None = None

    def start(self, transport: Transport) -> None:
        self.clocks = attach_clocks(self.section, self.fabric, transport, self.where)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        return {} if self.clocks is None else self.clocks.tables(run.simulated_ns)


def _build(section: ClockSection, fabric: Fabric, wiring: Wiring, where: Locator) -> _ClockRun:
    return _ClockRun(section, fabric, where)


STAGE = StageSpec(
    name="clocks",
    section=clock_section,
    builder=_build,
    checker=check_clock_references,
    packet_only="timestamps taken as a message starts serialising on a port",
)
