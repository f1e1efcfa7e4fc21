"""LLDP-like probes on the control plane: the delay an ECMP weight is built from.

Theory of operation
-------------------
An implicit ECMP weight (clause ``switch.ecmp_weight``, :func:`sitssim.switch.ecmp.
implicit_weight`) reads each member's *measured* LLDP delay. Here a short control-plane run,
before the data run and on its own clock, measures it on the same fabric: every group
node sends ``probes`` LLDP frames (``KIND_LLDP``, ``frame_bytes`` each), one every
``interval_ns``, to each member's next-hop device; that device's control plane answers
after its vendor profile's processing delay; the node records the time from sending a
probe to receiving its answer, which is the fabric's delay both ways (serialisation,
flight, arbitration at each end) plus the processing, and averages it over the probes.
Nothing is read back from the profile: the delay is what the run took.

The frames cross the data-plane ports of an idle fabric, so the switches are taken as
ideal output-queued ones (``fabric.nodes.OutputQueuedSwitch``): with nothing else queued,
a switch model's buffers and allocator add nothing, and its arbitration latency, which is
paid all the same, is the fabric's share of a millisecond-scale delay anyway. The run is a
handful of events: four per probe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import simpy

from sitssim.errors import InvariantViolation
from sitssim.fabric.messages import KIND_LLDP
from sitssim.fabric.routing import Router
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.transport import Transport

if TYPE_CHECKING:
    from sitssim.fabric.topology import Fabric

NS_PER_MS = 1e6


@dataclass(frozen=True)
class LldpDelay:
    """What one group node measured of one member: the mean probe-to-answer time (ms) over
    its probes, and how many probes were answered."""

    mean_ms: float
    probes: int


def measure_lldp(
    fabric: Fabric,
    schedule: Schedule,
    members: Sequence[tuple[str, str]],
    processing_ns: Mapping[str, float],
    *,
    probes: int,
    interval_ns: float,
    frame_bytes: int,
) -> dict[tuple[str, str], LldpDelay]:
    """Probe each ``(node, next_hop)`` of ``members`` ``probes`` times, ``interval_ns``
    apart, and return what each node measured. ``processing_ns[device]`` is each answering
    device's control-plane delay; ``schedule`` is an empty schedule (the run's own
    traffic is the probes)."""
    missing = sorted({hop for _, hop in members} - set(processing_ns))
    if missing:
        raise ValueError(f"no control-plane delay for {', '.join(missing)}")
    env = simpy.Environment()
    nodes = sorted(fabric.graph)
    transport = Transport(env, fabric, Router(fabric), nodes, schedule)
    number = transport.node_id
    order = [(number[a], number[b]) for a, b in members]
    sent: dict[int, int] = {}
    """Probe message -> its member's index in ``members``."""
    answered: list[list[float]] = [[] for _ in members]

    def send(_ev: simpy.Event) -> None:
        for i, (a, b) in enumerate(order):
            sent[transport.inject(a, b, frame_bytes, 0, KIND_LLDP, 0)] = i

    def answer(probe: int, _ev: simpy.Event) -> None:
        t = transport
        t.inject(t.dst[probe], t.src[probe], frame_bytes, 0, KIND_LLDP, 0, parent=probe)

    def delivered(msg: int) -> None:
        t = transport
        probe = t.parent[msg]
        if probe < 0:
            # A probe at the member's device: its control plane answers after its delay.
            delay = processing_ns[t.nodes[t.dst[msg]]]
            env.timeout(delay).callbacks.append(partial(answer, msg))
        else:
            answered[sent[probe]].append(t.t_deliver[msg] - t.t_inject[probe])

    transport.on_delivery(KIND_LLDP, delivered)
    for k in range(probes):
        env.timeout(k * interval_ns).callbacks.append(send)
    transport.run()
    out = {}
    for member, times in zip(members, answered, strict=True):
        if len(times) != probes:
            raise InvariantViolation(f"LLDP probes of {member[0]}>{member[1]} went unanswered")
        out[member] = LldpDelay(sum(times) / len(times) / NS_PER_MS, len(times))
    return out
