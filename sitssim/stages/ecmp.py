"""The ECMP stage: LLDP-measured implicit weights, flow-hashed routing, the ``ecmp`` table.

With ``switch.ecmp`` configured, the builder finds the fabric's equal-cost groups
(``switch.ecmp_tables``), and, before the data run, measures each implicit member's LLDP
delay in a short control-plane run on the same fabric (``switch.lldp``): the group node's
probes, answered by the member device after its vendor's processing delay. Each member's
negotiated ifSpeed is its link as the PHY trains it (``phy.links.phy_links``: lanes x rate
per lane), and its implicit weight is the formula on those two measurements
(``switch.ecmp.ImplicitWeight``); a member ``switch.ecmp.weights`` names keeps its explicit
weight. ``start`` hands the transport an ``EcmpRouting`` with those weights before any
message moves (``Transport.route_by``); a group node whose vendor profile says its hash
ignores weights hashes uniformly, the clause's faulty device.

After the run, the ``ecmp`` table holds each member's weight, what it was built from (the
LLDP delay measured, the ifSpeed from the PHY stage's ``phy_links`` table), and the flows
and messages it carried; the judge of ``switch.ecmp_weight`` reads only that table.
Without ``switch.ecmp`` the stage does nothing: no table, no metric, the same routing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sitssim.config.ecmp_config import TRANSPORT_FIELDS, EcmpConfig, VendorProfile
from sitssim.fabric.route_tables import RouteTables
from sitssim.fabric.routing import TableRouting
from sitssim.phy.links import phy_links
from sitssim.phy.section import PhySection
from sitssim.scenario import GraphTopology
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring, empty_schedule
from sitssim.stages.phy import phy_section
from sitssim.switch.ecmp import EcmpRouting, ImplicitWeight, QueuePairs, negotiated_if_speed_bps
from sitssim.switch.ecmp_tables import EcmpGroup, ecmp_groups, ecmp_table, member_counts
from sitssim.switch.lldp import LldpDelay, measure_lldp

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sitssim.errors import Locator
    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport
    from sitssim.scenario import Scenario

WHERE = ("switch", "ecmp")


@dataclass(frozen=True)
class EcmpSection:
    """``switch.ecmp`` (None: no ECMP), the vendor profiles, the vendor of every switch
    that names none (``switch.vendor``) and of those that do (a graph's nodes), and the
    PHY's section, from which the links' trained lanes and rates come."""

    config: EcmpConfig | None
    vendors: Mapping[str, VendorProfile]
    default_vendor: str | None
    node_vendors: Mapping[str, str]
    phy: PhySection

    def vendor_of(self, node: str, fabric: Fabric) -> VendorProfile | None:
        """The vendor profile of ``node``; None for a node that is not a switch or names
        no vendor."""
        name = self.node_vendors.get(node)
        if name is None and fabric.node_kind(node) == "switch":
            name = self.default_vendor
        return None if name is None else self.vendors[name]


def ecmp_section(scenario: Scenario) -> EcmpSection:
    topo = scenario.topology
    named = {}
    if isinstance(topo, GraphTopology):
        named = {n.id: n.vendor for n in topo.nodes if n.vendor is not None}
    return EcmpSection(
        config=scenario.switch.ecmp,
        vendors=scenario.switch.vendors,
        default_vendor=scenario.switch.vendor,
        node_vendors=named,
        phy=phy_section(scenario),
    )


def _explicit(
    config: EcmpConfig, groups: Sequence[EcmpGroup], fabric: Fabric, where: Locator
) -> dict[tuple[str, str], int]:
    """The explicit weights by (node, next hop), each a member of a group, every group
    either wholly named or not at all."""
    if not isinstance(config.weights, dict):
        return {}
    members = {(g.node, m): g for g in groups for m in g.members}
    out = {}
    for name, weight in config.weights.items():
        loc = (*WHERE, "weights", name)
        node, hop = name.split(">")
        if (node, hop) not in fabric.channel_index:
            raise where.error(loc, f"no channel {name}: name a link's direction, node>next_hop")
        if (node, hop) not in members:
            raise where.error(
                loc, f"{name} is no ECMP member: {node} has one shortest-path next hop there"
            )
        out[(node, hop)] = weight
    for group in {members[c] for c in out}:
        left = [m for m in group.members if (group.node, m) not in out]
        if left:
            raise where.error(
                (*WHERE, "weights"),
                f"group {group.name} has explicit weights for some members but not for "
                f"{', '.join(f'{group.node}>{m}' for m in left)}",
            )
    return out


def _implicit_members(
    groups: Sequence[EcmpGroup], explicit: Mapping[tuple[str, str], int]
) -> list[tuple[str, str]]:
    return [(g.node, m) for g in groups for m in g.members if (g.node, m) not in explicit]


def check_ecmp(section: EcmpSection, fabric: Fabric, where: Locator) -> None:
    """Explicit weights name members of groups, whole groups at a time; every member
    weighed implicitly is a device with a vendor profile, whose control plane answers LLDP."""
    config = section.config
    if config is None:
        return
    groups = ecmp_groups(RouteTables(fabric.graph))
    explicit = _explicit(config, groups, fabric, where)
    for node, hop in _implicit_members(groups, explicit):
        if section.vendor_of(hop, fabric) is None:
            raise where.error(
                WHERE,
                f"member {hop} of {node}'s ECMP group is weighed by LLDP, but has no vendor "
                "profile to answer it: give switch.vendor, the node's vendor, or explicit "
                "switch.ecmp.weights",
            )


def _if_speeds(section: PhySection, fabric: Fabric) -> dict[int, int]:
    """Each channel's negotiated ifSpeed (bit/s), from its link as the PHY trains it."""
    out = {}
    for link in phy_links(section, fabric):
        speed = negotiated_if_speed_bps(link.lanes, link.rate_gts)
        for channel in link.channels:
            out[channel] = speed
    return out


@dataclass
class _EcmpRun(Stage):
    """ECMP in one run: the weights the routing uses, and what they were built from."""

    config: EcmpConfig
    groups: list[EcmpGroup]
    weights: dict[tuple[str, str], int | ImplicitWeight]
    lldp: dict[tuple[str, str], LldpDelay]
    faulty: tuple[str, ...]
    routing: EcmpRouting | None = None
    columns: dict[str, Sequence[int]] | None = None

    def start(self, transport: Transport) -> None:
        columns: dict[str, Sequence[int]] = {f: getattr(transport, f) for f in TRANSPORT_FIELDS}
        columns["qp"] = QueuePairs(columns, self.config.queue_pairs)
        self.columns = columns
        self.routing = EcmpRouting(
            TableRouting(transport.router, transport.src, transport.dst),
            columns,
            fields=self.config.fields,
            weights=self.weights,
            seed=self.config.seed,
            equal_stage_seeds=self.config.equal_stage_seeds,
            faulty_nodes=self.faulty,
        )
        transport.route_by(self.routing)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        if self.columns is None:
            return {}
        messages = run.tables["messages"]
        delivered = messages[messages["t_deliver_ns"].notna()]
        flows, counts = member_counts(
            self.groups,
            run.transport.router.tables,
            run.transport.router.routes,
            zip(delivered["msg_id"].tolist(), delivered["route"].tolist(), strict=True),
            [self.columns[f] for f in self.config.fields],
        )
        weights = {
            member: w.weight if isinstance(w, ImplicitWeight) else w
            for member, w in self.weights.items()
        }
        return {
            "ecmp": ecmp_table(
                self.groups,
                run.fabric.channel_index,
                weights,
                {m: (d.mean_ms, d.probes) for m, d in self.lldp.items()},
                _phy_speeds(run.tables.get("phy_links")),
                flows,
                counts,
            )
        }

    def metrics(self, run: Finished) -> dict[str, object]:
        table = run.tables.get("ecmp")
        if table is None:
            return {}
        return {
            "ecmp": {
                "groups": len(self.groups),
                "members": len(table),
                "flows": int(table["flows"].sum()),
                "lldp_ms": {
                    row.link: float(row.lldp_ms)
                    for row in table.itertuples()
                    if np.isfinite(row.lldp_ms)
                },
            }
        }


def _phy_speeds(phy: pd.DataFrame | None) -> dict[str, float]:
    """Each channel's negotiated ifSpeed (bit/s) by name, from the PHY stage's ``phy_links``
    table: what the judge compares the weights with is the PHY's record, not the stage's."""
    if phy is None:
        return {}
    out = {}
    for row in phy.itertuples():
        speed = float(negotiated_if_speed_bps(int(row.lanes), float(row.rate_gts)))
        out[row.channel_up] = out[row.channel_down] = speed
    return out


def _build(section: EcmpSection, fabric: Fabric, wiring: Wiring, where: Locator) -> Stage:
    config = section.config
    if config is None:
        return Stage()
    groups = ecmp_groups(RouteTables(fabric.graph))
    explicit = _explicit(config, groups, fabric, where)
    implicit = _implicit_members(groups, explicit)
    processing = {}
    for _, hop in implicit:
        vendor = section.vendor_of(hop, fabric)
        if vendor is None:
            raise where.error(WHERE, f"ECMP member {hop} has no vendor profile to answer LLDP")
        processing[hop] = vendor.lldp_processing
    lldp = measure_lldp(
        fabric,
        empty_schedule(),
        implicit,
        processing,
        probes=config.lldp_probes,
        interval_ns=config.lldp_interval,
        frame_bytes=config.lldp_frame_bytes,
    )
    speeds = _if_speeds(section.phy, fabric)
    index = fabric.channel_index
    weights: dict[tuple[str, str], int | ImplicitWeight] = dict(explicit)
    for member in implicit:
        weights[member] = ImplicitWeight(speeds[index[member]], lldp[member].mean_ms)
    faulty = tuple(
        sorted(
            {
                g.node
                for g in groups
                if (vendor := section.vendor_of(g.node, fabric)) is not None
                and vendor.hash_ignores_weights
            }
        )
    )
    return _EcmpRun(config, groups, weights, lldp, faulty)


STAGE = StageSpec(
    name="ecmp",
    section=ecmp_section,
    builder=_build,
    checker=check_ecmp,
    packet_only="per-hop weighted flow hashing in the switches, and LLDP probes' timing",
)
