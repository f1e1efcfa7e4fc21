"""The inference stage: every ``kind: inference`` workload's driver, armed on the transport.

An inference run may end after the traffic window (the last requests finish decoding), so
this stage reports its own end, which stretches the run's simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sitssim.config.inference_config import InferenceWorkload
from sitssim.errors import Locator
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring, workload_section
from sitssim.workloads.inference import (
    InferenceDriver,
    InferenceSection,
    TokenFault,
    check_inference_workloads,
    inference_metrics,
    inference_tables,
    start_inference_workloads,
)


def inference_section(scenario: Scenario) -> InferenceSection:
    """The inference workloads, the token faults, and the scenario file's folder."""
    return InferenceSection(
        workloads=workload_section(scenario, InferenceWorkload),
        faults=tuple((k, f) for k, f in enumerate(scenario.faults) if isinstance(f, TokenFault)),
        base_dir=Path(scenario.source.path).parent,
        switches=scenario.switch.capabilities(),
    )


@dataclass
class InferenceStage(Stage):
    """The inference drivers of one run, by workload order."""

    section: InferenceSection
    fabric: Fabric
    where: Locator
    drivers: list[InferenceDriver] = field(default_factory=list)

    def start(self, transport: Transport) -> None:
        self.drivers = start_inference_workloads(self.section, self.fabric, transport, self.where)

    def end_ns(self) -> float:
        return max((d.end_ns for d in self.drivers), default=0.0)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        return inference_tables(self.drivers) if self.drivers else {}

    def metrics(self, run: Finished) -> dict[str, object]:
        if not self.drivers:
            return {}
        return {"inference": inference_metrics(self.drivers, run.tables)}


def _build(
    section: InferenceSection, fabric: Fabric, wiring: Wiring, where: Locator
) -> InferenceStage:
    return InferenceStage(section, fabric, where)


STAGE = StageSpec(
    name="inference",
    section=inference_section,
    builder=_build,
    checker=check_inference_workloads,
)
