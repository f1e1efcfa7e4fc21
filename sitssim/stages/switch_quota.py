"""The switch-quota stage: each switch port's VC quota table (``switch.vc_quota``), its tables.

A *port* is a switch's end of one link: the channel from the switch to a peer (a trunk of
parallel NVLinks, which the fabric carries as one channel, is one port). Each port gets a
:class:`~sitssim.switch.vc_quota.QuotaTable` from ``switch.vc_quota``: the table of an
override for that switch and peer, else of an override for the whole switch, else the
default table, spanning the switch's ``vcs_per_port`` VCs. A switch named by a
``quota_runtime_update`` fault runs the faulty rules
(:data:`~sitssim.switch.vc_quota.RUNTIME_UPDATE`) on every port.

Events. A port's device sees two kinds of event: its link entering L0 (the first entry
loads the table; a later one, after a retrain or a Recovery, keeps it) and management
writes (``switch.vc_quota.updates``, on the traffic clock, each offered to every port it
names). L0 entries come from the PHY stage's ``link_states`` table (PHY clock, converted
to the traffic clock whose 0 is the last link's first L0 entry, as ``stages/phy.py`` sets
it); a link that never reaches L0 never loads its ports' tables, and without a
``link_states`` table (no PHY stage) every port loads at the start of traffic. Each
device is fed its events in time order, an L0 entry before a write at the same instant
(the table is loaded when the link comes up, and the write finds it running). The device
is sans-I/O and nothing in the transport reads its table yet, so the stage feeds it once
the run is over, when the PHY's trace (Recovery episodes included) is final: its decisions
depend on the order of its events alone, which is the order they had in the run.

Tables: ``vc_quota`` (per port, tenant and VC, the slots as the table stands at the end),
``vc_quota_ports`` (per port: the table as loaded and as it stands, the VC reuse, the
updates applied and refused) and ``vc_quota_updates`` (every write offered, with its
outcome and whether the table was loaded when it came). A scenario without
``switch.vc_quota`` writes none of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from sitssim.config.vc_quota_config import QuotaRuntimeUpdateFault, QuotaUpdate, VcQuota
from sitssim.errors import Locator
from sitssim.fabric.topology import Fabric
from sitssim.link.credit_link import N_CLASSES
from sitssim.phy.links import link_name
from sitssim.protocol.ltssm_states import State
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring
from sitssim.switch.vc_quota import (
    RUNTIME_UPDATE,
    TRANSITIONS,
    QuotaTable,
    message_vcs,
    quota_rows,
    round_robin_table,
    slot_rows,
    update_rows,
)
from sitssim.units import format_time_ns

QUOTA = ("switch", "vc_quota")


@dataclass(frozen=True)
class QuotaSection:
    """What the stage reads: ``switch.vc_quota``, the ports' VC count, the tenants, the
    ``quota_runtime_update`` faults (by index in ``faults:``) and the run's duration."""

    quota: VcQuota | None
    vcs_per_port: int
    tenants: tuple[str, ...]
    faults: tuple[tuple[int, QuotaRuntimeUpdateFault], ...]
    duration: float

    @property
    def table(self) -> Mapping[str, list[int]]:
        """Every port's default table: the one given, else dealt round robin."""
        quota = self.quota
        assert quota is not None
        if quota.table is not None:
            return quota.table
        return round_robin_table(self.tenants, self.vcs_per_port, quota.slots, quota.vcs_per_tenant)


def quota_section(scenario: Scenario) -> QuotaSection:
    return QuotaSection(
        quota=scenario.switch.vc_quota,
        vcs_per_port=scenario.switch.vcs_per_port,
        tenants=tuple(t.name for t in scenario.tenants),
        faults=tuple(
            (i, f) for i, f in enumerate(scenario.faults) if isinstance(f, QuotaRuntimeUpdateFault)
        ),
        duration=scenario.duration,
    )


@dataclass(frozen=True)
class QuotaPort:
    """One switch port: the channel from ``switch`` to ``peer``, on the PHY's ``link``."""

    channel: int
    switch: str
    peer: str
    link: str


def switch_ports(fabric: Fabric) -> list[QuotaPort]:
    """Every switch port, by switch then peer name."""
    return [
        QuotaPort(fabric.channel_index[(switch, peer)], switch, peer, link_name(switch, peer))
        for switch in fabric.switches
        for peer in sorted(fabric.graph[switch])
    ]


def _check_node(fabric: Fabric, switch: str, peer: str | None, where: Locator, loc: tuple) -> None:
    if switch not in fabric.graph or fabric.node_kind(switch) != "switch":
        raise where.error(
            (*loc, "switch"),
            f"{switch!r} is not a switch; switches: {', '.join(fabric.switches)}",
        )
    if peer is not None and peer not in fabric.graph[switch]:
        raise where.error(
            (*loc, "peer"),
            f"{peer!r} is not linked to {switch!r}; its peers: "
            f"{', '.join(sorted(fabric.graph[switch]))}",
        )


def _check_tenant(tenant: str, tenants: Sequence[str], where: Locator, loc: tuple) -> None:
    if tenant not in tenants:
        raise where.error(loc, f"unknown tenant {tenant!r}; defined: {list(tenants)}")


def check_quota(section: QuotaSection, fabric: Fabric, where: Locator) -> None:
    """Raise ``InputError`` for a quota table or write naming an unknown tenant, switch or
    peer, two tables for one port, a write outside the run, or a quota fault without a
    table or on a device that is not a switch. A table beyond the spec's limits is valid."""
    quota = section.quota
    seen_faults: set[str] = set()
    for i, fault in section.faults:
        if quota is None:
            raise where.error(
                ("faults", i, "kind"),
                f"fault {fault.kind!r} needs switch.vc_quota (no quota table is modelled)",
            )
        _check_node(fabric, fault.switch, None, where, ("faults", i))
        if fault.switch in seen_faults:
            raise where.error(
                ("faults", i, "switch"), f"a second {fault.kind!r} fault on {fault.switch!r}"
            )
        seen_faults.add(fault.switch)
    if quota is None:
        return
    if not fabric.switches:
        raise where.error(QUOTA, "the fabric has no switch, so no port to hold a quota table")
    if quota.table is None:
        if not section.tenants:
            raise where.error(QUOTA, "a table dealt round robin needs the scenario's 'tenants'")
        if quota.vcs_per_tenant is not None and quota.vcs_per_tenant > section.vcs_per_port:
            raise where.error(
                (*QUOTA, "vcs_per_tenant"),
                f"a tenant takes at most the port's {section.vcs_per_port} VCs "
                "(switch.vcs_per_port)",
            )
    for tenant in quota.table or ():
        _check_tenant(tenant, section.tenants, where, (*QUOTA, "table", tenant))
    claimed: set[tuple[str, str | None]] = set()
    for i, port in enumerate(quota.ports):
        loc = (*QUOTA, "ports", i)
        _check_node(fabric, port.switch, port.peer, where, loc)
        if (port.switch, port.peer) in claimed:
            whose = f"{port.switch}>{port.peer}" if port.peer else f"every port of {port.switch}"
            raise where.error(loc, f"a second table for {whose}")
        claimed.add((port.switch, port.peer))
        for tenant in port.table:
            _check_tenant(tenant, section.tenants, where, (*loc, "table", tenant))
    for i, update in enumerate(quota.updates):
        loc = (*QUOTA, "updates", i)
        _check_node(fabric, update.switch, update.peer, where, loc)
        _check_tenant(update.tenant, section.tenants, where, (*loc, "tenant"))
        if update.at >= section.duration:
            raise where.error(
                (*loc, "at"),
                "'at' must come before the end of the run "
                f"(duration {format_time_ns(section.duration)})",
            )


def build_tables(section: QuotaSection, ports: Sequence[QuotaPort]) -> list[QuotaTable]:
    """Each port's table as configured (before any event), in the order of ``ports``."""
    quota = section.quota
    if quota is None:
        return []
    override = {(p.switch, p.peer): p.table for p in quota.ports}
    faulty = {fault.switch for _, fault in section.faults}
    default = section.table
    return [
        QuotaTable(
            override.get((port.switch, port.peer), override.get((port.switch, None), default)),
            vcs=section.vcs_per_port,
            transitions=RUNTIME_UPDATE if port.switch in faulty else TRANSITIONS,
        )
        for port in ports
    ]


def l0_entries(states: pd.DataFrame | None, links: Sequence[str]) -> dict[str, list[float]]:
    """Every L0 entry of each of ``links``, on the traffic clock, in time order.

    ``states`` is the PHY's ``link_states`` table (PHY clock); None, without a PHY stage:
    every link is up at the start of traffic.
    """
    if states is None:
        return {link: [0.0] for link in links}
    l0 = states[states["state"] == State.L0.value]
    entries = {
        str(link): sorted(float(t) for t in rows["t_enter_ns"])
        for link, rows in l0.groupby("link", sort=True)
    }
    # The traffic clock's 0 is the last first entry of a link that trains (stages/phy.py).
    traffic_start = max((times[0] for times in entries.values()), default=0.0)
    return {link: [t - traffic_start for t in entries.get(link, [])] for link in links}


def _names(update: QuotaUpdate, port: QuotaPort) -> bool:
    return update.switch == port.switch and update.peer in (None, port.peer)


def offer_events(
    tables: Sequence[QuotaTable],
    ports: Sequence[QuotaPort],
    l0: Mapping[str, Sequence[float]],
    updates: Sequence[QuotaUpdate],
) -> None:
    """Feed each port's device its L0 entries and the writes that name it, in time order;
    at equal times the L0 entry first, then writes in the order the scenario lists them."""
    for table, port in zip(tables, ports, strict=True):
        events: list[tuple[float, int, int]] = [(t, 0, -1) for t in l0.get(port.link, ())]
        events += [(u.at, 1, i) for i, u in enumerate(updates) if _names(u, port)]
        for t, kind, i in sorted(events):
            if kind == 0:
                table.load(t)
            else:
                table.update(t, updates[i].tenant, updates[i].slots)


PORT_COLUMNS = ("channel", "switch", "peer", "link")


def _port_frame(
    rows: list[dict], ports: Sequence[QuotaPort], id_column: str | None = None
) -> pd.DataFrame:
    """``rows`` (keyed by ``port``, an index into ``ports``, which is the ``port_id`` of
    ``vc_quota_ports``) with the port's names, and a row id first if ``id_column``."""
    named = [
        {
            "port_id": r["port"],
            **{c: getattr(ports[r["port"]], c) for c in PORT_COLUMNS},
            **{k: v for k, v in r.items() if k != "port"},
        }
        for r in rows
    ]
    frame = pd.DataFrame(named)
    if id_column is not None:
        frame.insert(0, id_column, range(len(frame)))
    return frame


UPDATE_COLUMNS = (
    "update_id",
    "port_id",
    *PORT_COLUMNS,
    "t_ns",
    "tenant",
    "vcs",
    "slot_sum",
    "applied",
    "loaded",
    "table_slot_sum",
)


@dataclass
class QuotaStage(Stage):
    """The ports' tables of one run, fed their events once it is over: :meth:`tables` feeds
    them (``simulate`` reads every stage's tables before its metrics)."""

    ports: list[QuotaPort]
    quotas: list[QuotaTable]
    updates: tuple[QuotaUpdate, ...]

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        l0 = l0_entries(run.tables.get("link_states"), sorted({p.link for p in self.ports}))
        offer_events(self.quotas, self.ports, l0, self.updates)
        by_port = dict(enumerate(self.quotas))
        updates = update_rows(by_port)
        return {
            "vc_quota": _port_frame(slot_rows(by_port), self.ports, "slot_id"),
            "vc_quota_ports": _port_frame(quota_rows(by_port), self.ports),
            "vc_quota_updates": (
                _port_frame(updates, self.ports, "update_id")
                if updates
                else pd.DataFrame(columns=list(UPDATE_COLUMNS))
            ),
        }

    def metrics(self, run: Finished) -> dict[str, object]:
        facts = [q.facts() for q in self.quotas]
        return {
            "vc_quota": {
                "ports": len(facts),
                "ports_loaded": sum(f.loaded for f in facts),
                "max_slot_sum": max(f.slot_sum for f in facts),
                "max_vc_reuse": max(
                    (f.vc_reuse for f in facts if f.vc_reuse is not None), default=None
                ),
                "updates_refused": sum(f.updates_refused for f in facts),
                "updates_applied_running": sum(f.updates_applied_loaded for f in facts),
            }
        }


def _build(section: QuotaSection, fabric: Fabric, wiring: Wiring, where: Locator) -> Stage:
    # check_quota has run already: preflight runs every stage's check before any is built.
    if section.quota is None:
        return Stage()
    ports = switch_ports(fabric)
    # Messages take their tenant's VCs by the default table: one VC per message end to end,
    # so every channel's credits are pooled per (VC, class) over the VCs it may carry.
    default = QuotaTable(section.table, vcs=section.vcs_per_port)
    wiring.message_vcs = message_vcs(default, section.tenants, N_CLASSES)
    wiring.vcs = 1 + max(vc for row in wiring.message_vcs for vc in row)
    tables = build_tables(section, ports)
    for port, table in zip(ports, tables, strict=True):
        # A port is the switch's end of a link: the table weighs what enters it.
        into = fabric.channel_index[(port.peer, port.switch)]
        wiring.vc_slots[into] = tuple(sum(w.values()) for w in table.slot_weights())
    return QuotaStage(ports, tables, tuple(section.quota.updates))


STAGE = StageSpec(name="switch_quota", section=quota_section, builder=_build, checker=check_quota)
