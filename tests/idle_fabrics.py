"""An idle transport over a fabric built from scenario data: nothing scheduled, so every
message is one a test injects (directly or through a collective it starts)."""

from __future__ import annotations

from typing import Any

import simpy

from sitssim.fabric.routing import Router
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import scenario_from_data
from sitssim.stages.base import empty_schedule
from sitssim.switch.registry import SWITCH_MODELS


def idle_transport(data: dict[str, Any], switch_model: bool = False) -> tuple[Fabric, Transport]:
    """The fabric of scenario ``data`` and an idle transport over it; ``switch_model``: its
    switches are the model the scenario's ``switch`` section names, not the default."""
    scenario = scenario_from_data(data)
    fabric = build_fabric(scenario)
    options: dict[str, Any] = {}
    if switch_model:
        options["switch_model"] = SWITCH_MODELS[scenario.switch.model](scenario.switch)
    transport = Transport(
        simpy.Environment(),
        fabric,
        Router(fabric),
        sorted(fabric.graph),
        empty_schedule(),
        **options,
    )
    return fabric, transport
