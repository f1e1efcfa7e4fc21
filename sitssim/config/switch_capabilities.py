"""What a fabric's switches can do beyond forwarding, as the collectives layer reads it.

NVLink SHARP (NVLS) and InfiniBand SHARP run a collective partly inside the switches: the
switch replicates one message to several outputs (*multicast*) and combines the messages
of several inputs into one (*in-switch reduction*), so an all-reduce sends each GPU's data
up once and receives the reduced result down once. Whether a switch can is a property of
the device, so it is given in the scenario's ``switch`` section (``switch.multicast``,
``switch.reduction``, both off by default) and applies to every switch of the fabric, as
the rest of that section does.

No switch model implements either yet, and no collective algorithm asks for them: the
flags are the hook for an NVLS-style algorithm. Its stage's section selector is to carry
``scenario.switch.capabilities()`` (a :class:`SwitchCapabilities`) beside the workloads, so
the collectives code reads the capabilities without seeing the scenario, and its check is
to refuse an algorithm whose capability the switches lack as located bad input (the
workload's ``algorithm`` field). A fabric without switches offers neither, whatever the
section says; that check reads the fabric for it.

A config leaf: it imports nothing of sitssim, so the scenario and the workloads both can.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SwitchCapabilities:
    """The capabilities ``switch.multicast`` and ``switch.reduction`` say the switches have."""

    multicast: bool = False
    """A switch sends one arriving message out of several outputs (NVLS multicast)."""
    reduction: bool = False
    """A switch combines messages from several inputs into one (NVLS/SHARP reduction)."""
