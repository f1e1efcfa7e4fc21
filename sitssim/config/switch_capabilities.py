"""What a fabric's switches can do beyond forwarding, as the collectives layer reads it.

NVLink SHARP (NVLS) and InfiniBand SHARP run a collective partly inside the switches: the
switch replicates one message to several outputs (*multicast*) and combines the messages
of several inputs into one (*in-switch reduction*), so an all-reduce sends each GPU's data
up once and receives the reduced result down once. Whether a switch can is a property of
the device, so it is given in the scenario's ``switch`` section (``switch.multicast``,
``switch.reduction``, both off by default) and applies to every switch of the fabric, as
the rest of that section does.

NCCL's NVLS all-reduce asks for both (``sitssim.workloads.ccl_nvls``): the collectives
stage's section carries ``scenario.switch.capabilities()`` beside the workloads, so the
collectives code reads the capabilities without seeing the scenario; NCCL's choice counts
NVLS only where the switches have both, and an ``algorithm: nvls`` on switches without them
is located bad input. The switch models carry it out: a switch takes the contributions
addressed to it and sends the copies its engine makes through inputs of the engine's own
(``Node.inject_replica``).

A config leaf: it imports nothing of sitssim, so the scenario and the workloads both can.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SwitchCapabilities:
    """The capabilities ``switch.multicast`` and ``switch.reduction`` say the switches have."""

    multicast: bool = False
    """A switch sends one arriving message out of several outputs (NVLS multicast)."""
    reduction: bool = False
    """A switch combines messages from several inputs into one (NVLS/SHARP reduction)."""
    reduction_bytes_per_ns: float = math.inf
    """How fast a switch reduces (bytes of input per ns; ``switch.reduction_bandwidth``):
    unbounded unless given, so the links alone limit an in-switch reduction."""

    @property
    def nvls(self) -> bool:
        """Whether the switches can run NVLS: multicast and reduction both."""
        return self.multicast and self.reduction
