"""Judges of the L4 switch clauses (§3.3): VC quota tables.

``switch.vc_quota`` reads the switch-quota stage's tables: ``vc_quota_ports`` (each port's
table as loaded at link training and as it stands), ``vc_quota`` (its slots per tenant and
VC) and ``vc_quota_updates`` (every management write the ports' devices were offered, with
its outcome). A loaded table's VCs and slots are what the scenario configured, so those
limits are judged ``configured``; a write a running port applied is what a device did in
the run, so that limit is judged ``measured``.
"""

from __future__ import annotations

import pandas as pd

from sitssim.spec.clause import Clause
from sitssim.spec.context import Judge, RunContext
from sitssim.spec.verdict import Evidence, Verdict, evidence
from sitssim.spec.worst import worst_rows

NO_TABLE = "no VC quota table configured (switch.vc_quota): no port loads one at link training"


def _port(row: pd.Series) -> str:
    return f"{row['switch']}>{row['peer']}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _describe(port: pd.Series) -> str:
    """A port's table as loaded, as it stands if a write changed it since, and its tenants
    and VC reuse as it stands."""
    reuse = port["vc_reuse"]
    text = (
        f"{_port(port)} loaded {int(port['loaded_slot_sum'])} slots on "
        f"{int(port['loaded_vcs'])} VCs"
    )
    if int(port["slot_sum"]) != int(port["loaded_slot_sum"]) or port["vcs"] != port["loaded_vcs"]:
        text += f", now {int(port['slot_sum'])} slots on {int(port['vcs'])} VCs"
    return f"{text} for {_count(int(port['tenants']), 'tenant')}, VC reuse " + (
        "n/a" if pd.isna(reuse) else f"{float(reuse):.2f}"
    )


def vc_quota(clause: Clause, ctx: RunContext) -> Verdict:
    ports = ctx.tables.get("vc_quota_ports")
    if ports is None:
        return clause.not_applicable(NO_TABLE)
    loaded = ports[ports["loaded"].astype(bool)]
    if loaded.empty:
        return clause.not_applicable(
            f"none of {len(ports)} switch ports reached L0, so no quota table was loaded "
            "(phy.reset_to_l0 says why)"
        )
    slots = worst_rows(loaded, "loaded_slot_sum", clause.limits["slots"])
    vcs = worst_rows(loaded, "loaded_vcs", clause.limits["vcs"])
    writes = ctx.tables["vc_quota_updates"]
    applied = writes["applied"].astype(bool)
    running = writes[applied & writes["loaded"].astype(bool)]
    refused = writes[~applied]
    changed = ports[ports["port_id"].isin(running["port_id"])]

    # The limit the verdict is on: the first one broken, in the catalogue's order.
    if len(slots.over) or not (len(vcs.over) or len(running)):
        limit, measured, basis, worst = "slots", slots.measured, "configured", slots.worst
    elif len(vcs.over):
        limit, measured, basis, worst = "vcs", vcs.measured, "configured", vcs.worst
    else:
        first = ports.loc[ports["port_id"] == running["port_id"].iloc[0]].iloc[0]
        limit, measured, basis, worst = "updates", float(len(running)), "measured", first

    problems = []
    if len(slots.over):
        problems.append(f"{_count(len(slots.over), 'port')} over {slots.limit:g} slots")
    if len(vcs.over):
        problems.append(f"{_count(len(vcs.over), 'port')} over {vcs.limit:g} VCs")
    if clause.limits["updates"].breaks(len(running)):
        problems.append(
            f"{_count(len(running), 'write')} changed a running table on "
            f"{_count(len(changed), 'port')}, the first at {running['t_ns'].iloc[0]:g} ns"
        )
    facts = [
        f"worst port {_describe(worst)}",
        f"{len(loaded)} of {len(ports)} ports loaded at link training",
    ]
    if len(refused):
        facts.append(f"{_count(len(refused), 'write')} to running ports refused and recorded")

    bad_ports = pd.concat([slots.over, vcs.over, changed])["port_id"]
    cells = ctx.tables["vc_quota"]
    shown: list[Evidence] = [
        evidence(
            "vc_quota_ports",
            sorted(set(bad_ports)) if len(bad_ports) else [worst["port_id"]],
        ),
        evidence("vc_quota", cells.loc[cells["port_id"] == worst["port_id"], "slot_id"]),
    ]
    if len(running) or len(refused):
        shown.append(
            evidence("vc_quota_updates", (running if len(running) else refused)["update_id"])
        )
    return clause.verdict_on(
        limit,
        "fail" if problems else "pass",
        measured=measured,
        basis=basis,
        evidence=tuple(shown),
        detail="; ".join(problems + facts),
    )


JUDGES: dict[str, Judge] = {
    "switch.vc_quota": vc_quota,
}
