"""The inference stage: every ``kind: inference`` workload's driver, armed on the transport.

An inference run may end after the traffic window (the last requests finish decoding), so
this stage reports its own end, which stretches the run's simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring
from sitssim.workloads.inference import (
    InferenceDriver,
    check_inference_workloads,
    inference_metrics,
    inference_tables,
    start_inference_workloads,
)


@dataclass
class InferenceStage(Stage):
    """The inference drivers of one run, by workload order."""

    scenario: Scenario
    fabric: Fabric
    drivers: list[InferenceDriver] = field(default_factory=list)

    def start(self, transport: Transport) -> None:
        self.drivers = start_inference_workloads(self.scenario, self.fabric, transport)

    def end_ns(self) -> float:
        return max((d.end_ns for d in self.drivers), default=0.0)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        return inference_tables(self.drivers) if self.drivers else {}

    def metrics(self, run: Finished) -> dict[str, object]:
        if not self.drivers:
            return {}
        return {"inference": inference_metrics(self.drivers, run.tables)}


def _build(scenario: Scenario, fabric: Fabric, wiring: Wiring) -> InferenceStage:
    return InferenceStage(scenario, fabric)


STAGE = StageSpec(name="inference", check=check_inference_workloads, build=_build)
