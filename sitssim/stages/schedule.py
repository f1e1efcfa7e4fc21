"""The schedule stage: the ``synthetic`` and ``probes`` workloads, drawn before the run.

Their injections do not depend on the run, so they are drawn once into the transport's
schedule rather than started as processes; the probe workloads' turnaround and completion
size go with them, for the transport's responder.
"""

from __future__ import annotations

from sitssim.fabric.topology import Fabric
from sitssim.scenario import ProbeWorkload, Scenario
from sitssim.stages.base import Stage, StageSpec, Wiring
from sitssim.workloads.synthetic import build_schedule, check_schedule_workloads


def _build(scenario: Scenario, fabric: Fabric, wiring: Wiring) -> Stage:
    wiring.schedule = build_schedule(scenario, fabric, wiring.node_id)
    wiring.probe_params = {
        i: (wl.turnaround, wl.completion_bytes)
        for i, wl in enumerate(scenario.workloads)
        if isinstance(wl, ProbeWorkload)
    }
    return Stage()


STAGE = StageSpec(name="schedule", check=check_schedule_workloads, build=_build)
