"""Judges of the L4 switch clauses (§3.3): VC quota tables, and deadlock between tenants.

``switch.vc_quota`` reads the switch-quota stage's tables: ``vc_quota_ports`` (each port's
table as loaded at link training and as it stands), ``vc_quota`` (its slots per tenant and
VC) and ``vc_quota_updates`` (every management write the ports' devices were offered, with
its outcome). A loaded table's VCs and slots are what the scenario configured, so those
limits are judged ``configured``; a write a running port applied is what a device did in
the run, so that limit is judged ``measured``.

``switch.vc_tenants`` reads the tenant-requests stage's ``deadlocks`` (the cycle of full
buffers a stalled run showed when its watchdog fired, and the cycle the buffer dependency
graph had before the run) and ``tenants`` tables: a deadlock is what the run did, so the
verdict is ``measured``; the pre-run cycle is a warning beside it.

``switch.ecmp_weight`` (§2.3) reads the ECMP stage's ``ecmp`` table: each implicit member's
weight against the formula of its probe-measured LLDP delay and its negotiated ifSpeed (the
PHY's link record), and each group's flows per member against weight / sum by Pearson's
chi-square goodness of fit, failed below the clause's p-value limit.
"""

from __future__ import annotations

import numpy as np
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


NO_ECMP = (
    "no ECMP configured (switch.ecmp): messages take the pinned or sprayed paths, and no "
    "group weighs its members"
)


def _formula_weight(table: pd.DataFrame) -> pd.Series:
    """SPEC switch.ecmp_weight's weight of each row, from its measured LLDP delay and
    negotiated ifSpeed: max(1, ifSpeed / 1e9 - int(2 * lldp_ms)), ifSpeed in whole Gbit/s."""
    gbit = np.floor(table["if_speed_bps"].to_numpy(dtype=float) / 1e9)
    penalty = np.trunc(2.0 * table["lldp_ms"].to_numpy(dtype=float))
    return pd.Series(np.maximum(1.0, gbit - penalty), index=table.index)


def _split_p_values(table: pd.DataFrame, min_expected: float) -> dict[str, float]:
    """Per group whose every member expects at least ``min_expected`` flows: the p-value of
    Pearson's chi-square goodness of fit of its flows per member to weight / sum."""
    # Deferred: scipy is only needed once a run has ECMP groups to judge.
    from scipy.stats import chi2

    out = {}
    for group, rows in table.groupby("group", sort=False):
        flows = rows["flows"].to_numpy(dtype=float)
        expected = flows.sum() * rows["expected_share"].to_numpy(dtype=float)
        if len(rows) < 2 or expected.min() < min_expected:
            continue
        stat = float(((flows - expected) ** 2 / expected).sum())
        out[str(group)] = float(chi2.sf(stat, len(rows) - 1))
    return out


def _percent(values: pd.Series) -> str:
    return "/".join(f"{100 * v:.1f}" for v in values)


def ecmp_weight(clause: Clause, ctx: RunContext) -> Verdict:
    table = ctx.tables.get("ecmp")
    if table is None:
        return clause.not_applicable(NO_ECMP)
    if table.empty:
        return clause.not_applicable(
            "ECMP configured, but no node has several shortest-path next hops: no group"
        )
    alpha = clause.limits["split"].bound()
    implicit = table[table["basis"] == "measured"]
    formula = _formula_weight(implicit)
    wrong = implicit[(formula != implicit["weight"]) | formula.isna()]
    p_values = _split_p_values(table, clause.params["min_expected_flows"])
    split_fails = {g: p for g, p in p_values.items() if clause.limits["split"].breaks(p)}
    untested = sorted(set(table["group"]) - set(p_values))

    facts = []
    if len(wrong):
        first = wrong.iloc[0]
        facts.append(
            f"{_count(len(wrong), 'member')} weighed off the formula, e.g. {first['link']} "
            f"weight {int(first['weight'])} where LLDP {first['lldp_ms']:.4g} ms at "
            f"{first['if_speed_bps'] / 1e9:g} Gbit/s gives {formula[first.name]:g}"
        )
    for group, p in sorted(split_fails.items(), key=lambda item: item[1]):
        rows = table[table["group"] == group]
        facts.append(
            f"{group} split {int(rows['flows'].sum())} flows {_percent(rows['share'])} % "
            f"against weights {'/'.join(str(int(w)) for w in rows['weight'])} "
            f"({_percent(rows['expected_share'])} %), chi-square p = {p:.3g}"
        )
    worst = min(p_values, key=p_values.__getitem__) if p_values else None
    if worst is not None and worst not in split_fails:
        rows = table[table["group"] == worst]
        facts.append(
            f"worst group {worst} split {int(rows['flows'].sum())} flows "
            f"{_percent(rows['share'])} % against weights "
            f"{'/'.join(str(int(w)) for w in rows['weight'])} "
            f"({_percent(rows['expected_share'])} %), chi-square p = {p_values[worst]:.3g}"
        )
    if len(implicit) and not len(wrong):
        delays, speeds = implicit["lldp_ms"], implicit["if_speed_bps"] / 1e9
        facts.append(
            f"{_count(len(implicit), 'implicit weight')} = max(1, ifSpeed/1e9 - "
            f"int(2 x LLDP ms)) of the probes' delays ({delays.min():.4g} to "
            f"{delays.max():.4g} ms) and negotiated speeds ({speeds.min():g} to "
            f"{speeds.max():g} Gbit/s)"
        )
    facts.append(
        f"test: per group, chi-square goodness of fit of flows per member to weight / sum "
        f"at alpha {alpha:g}; {_count(len(p_values), 'group')} tested"
        + (
            f", {len(untested)} not (under {clause.params['min_expected_flows']:g} "
            f"expected flows on a member)"
            if untested
            else ""
        )
    )
    bad_ids = sorted(
        set(wrong["ecmp_id"]) | set(table.loc[table["group"].isin(split_fails), "ecmp_id"])
    )
    shown = bad_ids or table.loc[table["group"] == (worst or table["group"].iloc[0]), "ecmp_id"]
    detail = "; ".join(facts)
    verdict = "fail" if len(wrong) or split_fails else "pass"
    # Weights measured only if every implicit member's delay came from answered probes.
    probed = bool(len(implicit)) and bool((implicit["lldp_probes"] > 0).all())
    if len(wrong) or worst is None:
        return clause.verdict_on(
            "weights",
            verdict,
            measured=float(len(wrong)),
            basis="measured" if probed else "configured",
            evidence=(evidence("ecmp", shown),),
            detail=detail,
        )
    return clause.verdict_on(
        "split",
        verdict,
        measured=min(split_fails.values()) if split_fails else p_values[worst],
        # The split is what the run's messages did, whatever the weights came from.
        basis="measured",
        evidence=(evidence("ecmp", shown),),
        detail=detail,
    )


NO_ANSWERS = (
    "no request-and-completion traffic (kind: tenant_requests): nothing here waits for an "
    "answer, so no message-dependent deadlock can form"
)


def vc_tenants(clause: Clause, ctx: RunContext) -> Verdict:
    """Fails when the run deadlocked: the watchdog saw no delivery for a whole ACK timeout
    with messages outstanding, and the buffers then form a cycle of waits (``deadlocks``,
    kind ``observed``). The pre-run dependency cycle, if any, is reported beside it."""
    deadlocks = ctx.tables.get("deadlocks")
    tenants = ctx.tables.get("tenants")
    if deadlocks is None or tenants is None:
        return clause.not_applicable(NO_ANSWERS)
    observed = deadlocks[deadlocks["kind"] == "observed"]
    possible = deadlocks[deadlocks["kind"] == "possible"]
    issued = int(tenants["issued"].sum())
    timeouts = int(tenants["ack_timeouts"].sum())
    facts = [
        f"{tenants['tenant'].nunique()} tenants, {issued} requests issued, "
        f"{timeouts} ACK timeouts ({100.0 * timeouts / issued if issued else 0.0:.2f} %)"
    ]
    reuse = ctx.tables.get("vc_quota_ports")
    if reuse is not None and reuse["vc_reuse"].notna().any():
        facts.append(f"VC reuse up to {float(reuse['vc_reuse'].max()):.2f}")
    if len(possible):
        facts.append(f"possible before the run: {possible['cycle'].iloc[0]}")
    else:
        facts.append("no cycle in the buffer dependency graph before the run")
    shown: list[Evidence] = []
    if len(observed):
        stall = observed.iloc[0]
        seen = (
            f"stalled: no delivery after {float(stall['last_delivery_ns']):g} ns with "
            f"{int(stall['outstanding'])} messages outstanding (watchdog at "
            f"{float(stall['t_ns']):g} ns): "
            + (stall["cycle"] if int(stall["buffers"]) else "no cycle among the blocked buffers")
        )
        facts.insert(0, seen)
        shown.append(evidence("deadlocks", observed["deadlock_id"]))
    if len(possible):
        shown.append(evidence("deadlocks", possible["deadlock_id"]))
    shown.append(evidence("tenants", range(len(tenants))))
    return clause.verdict_on(
        "deadlocks",
        "fail" if len(observed) else "pass",
        measured=float(len(observed)),
        basis="measured",
        evidence=tuple(shown),
        detail="; ".join(facts),
    )


JUDGES: dict[str, Judge] = {
    "switch.vc_quota": vc_quota,
    "switch.vc_tenants": vc_tenants,
    "switch.ecmp_weight": ecmp_weight,
}
