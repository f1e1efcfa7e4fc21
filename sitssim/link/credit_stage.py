"""The flow-control stage of a run: a credit sender/receiver pair per link direction.

The transport drives the pair (``sitssim.fabric.transport``): a port sends a message only
when ``CreditSender.try_consume`` grants its credits, the next node's ``CreditReceiver``
holds them from the message's arrival until it leaves that node's buffer (it starts
serialisation on its next port, or is delivered), and the UpdateFC that frees them reaches
the sender after the reverse flight time plus ``update_delay``. UpdateFCs are not lost
here, so the receivers' periodic 30 µs updates would change nothing and are not driven.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sitssim.errors import InvariantViolation
from sitssim.fabric.topology import Fabric
from sitssim.link.credits import (
    INFINITE,
    ClassCredits,
    CreditKind,
    CreditReceiver,
    CreditSender,
    FcClass,
)
from sitssim.scenario import Scenario
from sitssim.workloads.synthetic import KIND_NAMES

# Which flow-control class each message kind travels in.
FC_CLASS_OF_KIND: tuple[FcClass, ...] = tuple(
    {"probe_request": FcClass.NP, "probe_completion": FcClass.CPL}.get(name, FcClass.P)
    for name in KIND_NAMES
)


@dataclass
class CreditLink:
    """Flow control of one channel: the sender at its port, the receiver at its far end."""

    channel: int
    sender: CreditSender
    receiver: CreditReceiver
    return_ns: float
    max_payload: int


@dataclass
class CreditStage:
    links: list[CreditLink | None]
    fabric: Fabric

    def tables(self) -> dict[str, pd.DataFrame]:
        rows = []
        for link in self.links:
            if link is None:
                continue
            for stall in link.sender.stalls:
                rows.append(
                    {
                        "link_id": link.channel,
                        "link": self.fabric.channels[link.channel].name,
                        "fc_class": stall.fc_class.value,
                        "start_ns": stall.start_ns,
                        "end_ns": stall.end_ns,
                        "needed_hdr": stall.needed.hdr,
                        "needed_data": stall.needed.data,
                    }
                )
        columns = ["link_id", "link", "fc_class", "start_ns", "end_ns", "needed_hdr", "needed_data"]
        table = pd.DataFrame(rows, columns=columns)
        table.insert(0, "stall_id", range(len(table)))
        return {"credits": table}

    def metrics(self) -> dict[str, object]:
        stalls = [s for link in self.links if link is not None for s in link.sender.stalls]
        return {
            "credit_links": sum(link is not None for link in self.links),
            "credit_stalls": len(stalls),
            "credit_stall_ns": sum(s.duration_ns for s in stalls),
        }

    def check_returned(self) -> None:
        """Every credit is back with its sender once the fabric is idle (issue 4 invariant)."""
        for link in self.links:
            if link is None:
                continue
            for fc_class in FcClass:
                for kind in CreditKind:
                    if link.sender.is_infinite(fc_class, kind):
                        continue
                    available = link.sender.available(fc_class, kind)
                    advertised = link.sender.advertisement[fc_class].of(kind)
                    if available != advertised:
                        raise InvariantViolation(
                            f"{self.fabric.channels[link.channel].name}: {fc_class.value} "
                            f"{kind.value} credits {available} of {advertised} back at idle"
                        )


def build_credit_stage(scenario: Scenario, fabric: Fabric) -> CreditStage:
    profile = scenario.link_layer.credits
    links: list[CreditLink | None] = [None] * len(fabric.channels)
    if profile.enabled:
        hdr = INFINITE if profile.header_credits == "infinite" else profile.header_credits
        data = INFINITE if profile.data_credits == "infinite" else profile.data_credits
        advertisement = dict.fromkeys(FcClass, ClassCredits(hdr=hdr, data=data))
        for ch in fabric.channels:
            reverse = fabric.channels[fabric.channel_index[(ch.dst, ch.src)]]
            links[ch.id] = CreditLink(
                channel=ch.id,
                sender=CreditSender(advertisement),
                receiver=CreditReceiver(advertisement, update_interval_ns=profile.update_interval),
                return_ns=reverse.propagation_ns + profile.update_delay,
                max_payload=profile.max_payload,
            )
    return CreditStage(links=links, fabric=fabric)
