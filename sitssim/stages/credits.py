"""The credits stage: a ``CreditLink`` per channel from ``link_layer.credits``, its tables.

A channel is flow-controlled when credits are on and its receiver's kind is one of the
profile's ``advertised_by``; the others get none (``None``: a plain port).

The hot-path model is :mod:`sitssim.link.credit_link`; this module builds one per link
direction, reads the stalls back as the ``credits`` table, and checks at the end of the
run that every credit is back with its sender.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from sitssim.config.credit_profile import CreditProfile
from sitssim.errors import InvariantViolation, Locator
from sitssim.fabric.topology import Fabric
from sitssim.link.credit_link import FC_CLASSES, N_CLASSES, CreditLink, slot_name
from sitssim.link.credits import INFINITE
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring


@dataclass
class CreditStage(Stage):
    """The run's ``CreditLink`` per channel (``None``: not flow-controlled) and what they
    recorded."""

    links: list[CreditLink | None]
    fabric: Fabric

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        rows = [
            (
                link.channel,
                self.fabric.channels[link.channel].name,
                pool // N_CLASSES,
                FC_CLASSES[pool % N_CLASSES].value,
                start,
                end,
                hdr,
                data,
            )
            for link in self.links
            if link is not None
            for pool, start, end, hdr, data in link.stalls
        ]
        columns = [
            "link_id",
            "link",
            "vc",
            "fc_class",
            "start_ns",
            "end_ns",
            "needed_hdr",
            "needed_data",
        ]
        table = pd.DataFrame(rows, columns=columns)
        table.insert(0, "stall_id", range(len(table)))
        return {"credits": table}

    def summary(self) -> dict[str, object]:
        """The stage's figures, as the ``link_layer`` metrics section holds them."""
        stalls = [s for link in self.links if link is not None for s in link.stalls]
        return {
            "credit_links": sum(link is not None for link in self.links),
            "credit_stalls": len(stalls),
            "credit_stall_ns": sum(end - start for _, start, end, _, _ in stalls),
        }

    def metrics(self, run: Finished) -> dict[str, object]:
        return {"link_layer": self.summary()}

    def finish(self) -> None:
        """Every credit is back with its sender once the fabric is idle."""
        for link in self.links:
            if link is None:
                continue
            link.sync(math.inf)
            for pool in range(len(link.avail_hdr)):
                back = (link.avail_hdr[pool], link.avail_data[pool])
                held = link.held_hdr[pool] or link.held_data[pool]
                if back != (link.adv_hdr, link.adv_data) or held:
                    raise InvariantViolation(
                        f"{self.fabric.channels[link.channel].name}: {slot_name(pool)} "
                        f"has {back[0]} hdr / {back[1]} data credits of "
                        f"{link.adv_hdr} / {link.adv_data} back at idle"
                    )


def build_credit_stage(profile: CreditProfile, fabric: Fabric, vcs: int = 1) -> CreditStage:
    """A ``CreditLink`` per channel into a node that advertises credits, with pools for
    ``vcs`` VCs; ``None`` for the others, and for every channel without a credits block."""
    links: list[CreditLink | None] = [None] * len(fabric.channels)
    if profile.enabled:
        hdr = INFINITE if profile.header_credits == "infinite" else profile.header_credits
        data = INFINITE if profile.data_credits == "infinite" else profile.data_credits
        for ch in fabric.channels:
            if fabric.node_kind(ch.dst) not in profile.advertised_by:
                continue
            reverse = fabric.channels[fabric.channel_index[(ch.dst, ch.src)]]
            links[ch.id] = CreditLink(
                channel=ch.id,
                hdr=hdr,
                data=data,
                return_ns=reverse.propagation_ns + profile.update_delay,
                max_payload=profile.max_payload,
                vcs=vcs,
            )
    return CreditStage(links=links, fabric=fabric)


def credit_section(scenario: Scenario) -> CreditProfile:
    return scenario.link_layer.credits


def _build(profile: CreditProfile, fabric: Fabric, wiring: Wiring, where: Locator) -> CreditStage:
    stage = build_credit_stage(profile, fabric, wiring.vcs)
    wiring.credit_links = stage.links
    return stage


STAGE = StageSpec(
    name="credits",
    section=credit_section,
    builder=_build,
    packet_only="credit flow control on every credited channel",
)
