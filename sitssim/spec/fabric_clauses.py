"""Judges of the L3 fabric clauses (§2.2): hop limit, topology limits, TSO window.

The topology judge reads the ``nodes`` table (kinds, switch levels, arbitration), and the
``link_states``, ``phy_links`` and ``messages`` tables for the GPUs the run saw working;
the TSO judge the ``config`` table's window and the ``probes`` table's round trips.
"""

from __future__ import annotations

import numpy as np

from sitssim.protocol.ltssm_states import State
from sitssim.spec.clause import Clause
from sitssim.spec.context import Judge, RunContext
from sitssim.spec.verdict import Evidence, Part, Verdict, evidence
from sitssim.spec.worst import Worst, worst_row_verdict


def hop_limit(clause: Clause, ctx: RunContext) -> Verdict:
    def detail(judged: Worst) -> str:
        return (
            f"longest route taken: {judged.worst['path']} ({len(judged.over)} messages over "
            "the limit)"
        )

    return worst_row_verdict(
        clause,
        "hops",
        ctx.tables["messages"],
        "hops",
        table="messages",
        ids="msg_id",
        detail=detail,
        empty="no messages crossed the fabric",
        show_ties=True,
    )


ARBITRATION_CONFIGURED = (
    "switch arbitration is configured, not measured (nodes.arbitration_ns): the model "
    "charges it as a fixed delay on each message's arrival, so a dwell time read from the "
    "run would return it by construction"
)


def live_gpus(ctx: RunContext) -> set[str] | None:
    """The GPUs the run saw working: an end of a link that reached L0, and the source or
    destination of a delivered message. None: the run has no training or no traffic to
    show it (no ``link_states``, or no message delivered)."""
    states, links = ctx.tables.get("link_states"), ctx.tables.get("phy_links")
    messages = ctx.tables.get("messages")
    if states is None or links is None or messages is None:
        return None
    delivered = messages[messages["t_deliver_ns"].notna()]
    if delivered.empty:
        return None
    trained_links = set(states.loc[states["state"] == State.L0.value, "link"].astype(str))
    up = links[links["link"].astype(str).isin(trained_links)]
    trained = set(up["upstream"].astype(str)) | set(up["downstream"].astype(str))
    carried = set(delivered["src"].astype(str)) | set(delivered["dst"].astype(str))
    return trained & carried


def topology_limits(clause: Clause, ctx: RunContext) -> Verdict:
    """Up to three parts: the GPUs that trained and carried traffic (measured), the GPUs
    configured (configured: a GPU the run did not see still belongs to the fabric), and
    the slowest switch arbitration (configured; see ``ARBITRATION_CONFIGURED``). Evidence:
    the rows behind the failing parts, else behind the first part."""
    nodes = ctx.tables["nodes"]
    kinds = nodes["kind"]
    if (kinds == "switch").any():
        gpus, shape = "gpus_switched", "switch-based"
    elif (kinds == "root_complex").any():
        gpus, shape = "gpus_direct_rc", "direct root-complex"
    else:
        return clause.not_applicable("a fabric with neither switches nor a root complex")
    gpu_rows = nodes[kinds == "gpu"]
    live = live_gpus(ctx)
    parts: list[tuple[Part, Evidence]] = []
    detail = []
    if live is None:
        detail.append(
            f"{len(gpu_rows)} GPUs configured in a {shape} fabric; no message was delivered, "
            "so the count is the configured one only"
        )
    else:
        is_live = gpu_rows["node"].astype(str).isin(live)
        seen, unseen = gpu_rows[is_live], gpu_rows[~is_live]
        part = clause.part(gpus, measured=len(seen), basis="measured", name="gpus_seen")
        parts.append((part, evidence("nodes", seen["node_id"])))
        detail.append(
            f"{len(seen)} GPUs trained (reached L0) and carried traffic in a {shape} fabric"
        )
        if len(unseen):
            names = ", ".join(unseen["node"].astype(str).head(4))
            more = ", ..." if len(unseen) > 4 else ""
            detail.append(f"{len(unseen)} configured GPU(s) did not ({names}{more})")
    part = clause.part(gpus, measured=len(gpu_rows), basis="configured", name="gpus_configured")
    parts.append((part, evidence("nodes", gpu_rows["node_id"])))
    detail.append(f"{len(gpu_rows)} GPUs configured (limit {part.limit:g})")
    switches = nodes[kinds == "switch"]
    if len(switches):
        arbitration = clause.limits["arbitration"]
        slow = switches[arbitration.breaks(switches["arbitration_ns"])]
        slowest = switches.loc[switches["arbitration_ns"].idxmin()]
        part = clause.part(
            "arbitration", measured=float(slowest["arbitration_ns"]), basis="configured"
        )
        parts.append((part, evidence("nodes", (slow if len(slow) else switches)["node_id"])))
        if len(slow):
            levels = sorted(set(slow["level"].astype(int)))
            detail.append(
                f"switch arbitration {slowest['arbitration_ns']:g} ns at level(s) {levels} "
                f"(at least {arbitration.bound():g} ns)"
            )
        else:
            detail.append(f"switch arbitration >= {slowest['arbitration_ns']:g} ns")
        detail.append(ARBITRATION_CONFIGURED)
    failing = [ev for part, ev in parts if part.verdict == "fail"]
    shown = failing if failing else [parts[0][1]]
    # Two failing parts may rest on the same rows (every GPU seen and configured).
    unique = tuple(dict.fromkeys(shown))
    return clause.verdict_on_parts(
        [part for part, _ in parts], evidence=unique, detail="; ".join(detail)
    )


def tso_window(clause: Clause, ctx: RunContext) -> Verdict:
    window = float(ctx.tables["config"]["tso_window_ns"].iloc[0])
    if np.isnan(window):
        return clause.not_applicable("no TSO window configured (root_complex.tso_window)")
    probes = ctx.tables["probes"]
    probes = probes[probes["rtt_ns"].notna()]
    if probes.empty:
        return clause.not_applicable("no completed round-trip probes: add a 'probes' workload")
    p = clause.params
    farthest_hops = probes["hops"].max()
    far = probes[probes["hops"] == farthest_hops]
    p99 = far.groupby(["src", "dst"], observed=True)["rtt_ns"].quantile(p["rtt_quantile"])
    requester, target = p99.idxmax()
    rtt_max = float(p99.max())
    pair = far[(far["src"] == requester) & (far["dst"] == target)]
    worst = pair[pair["rtt_ns"] >= rtt_max]
    # The window the run's round trips require is what the run produced; the configured
    # window is what it must fit in.
    required = p["rtt_factor"] * rtt_max + p["margin_ns"]
    return clause.verdict_on(
        "required_window",
        "pass" if clause.limits["required_window"].holds(required, window) else "fail",
        measured=required,
        value=window,
        basis="measured",
        evidence=(evidence("probes", worst["probe_id"]),),
        detail=(
            f"required window = {p['rtt_factor']:g} × RTT_max + {p['margin_ns']:g} ns, "
            f"RTT_max = p99 round trip {requester}->{target} ({int(farthest_hops)} hops each "
            f"way) = {rtt_max:.1f} ns over {len(pair)} probes (median "
            f"{np.median(pair['rtt_ns']):.1f} ns); configured window {window:g} ns"
        ),
    )


JUDGES: dict[str, Judge] = {
    "fabric.hop_limit": hop_limit,
    "fabric.topology_limits": topology_limits,
    "fabric.tso_window": tso_window,
}
