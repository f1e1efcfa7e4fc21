"""Judges of the L3 fabric clauses (§2.2): hop limit, topology limits, TSO window.

The topology judge reads the ``nodes`` table (kinds, switch levels, arbitration);
the TSO judge the ``config`` table's window and the ``probes`` table's round trips.
"""

from __future__ import annotations

import numpy as np

from sitssim.spec.clause import Clause
from sitssim.spec.context import Judge, RunContext
from sitssim.spec.verdict import Verdict, evidence
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


def topology_limits(clause: Clause, ctx: RunContext) -> Verdict:
    nodes = ctx.tables["nodes"]
    kinds = nodes["kind"]
    n_gpus = int((kinds == "gpu").sum())
    switched = bool((kinds == "switch").any())
    if switched:
        gpus, shape = "gpus_switched", "switch-based"
    elif (kinds == "root_complex").any():
        gpus, shape = "gpus_direct_rc", "direct root-complex"
    else:
        return clause.not_applicable("a fabric with neither switches nor a root complex")
    gpu_limit = clause.limits[gpus]
    arbitration = clause.limits["arbitration"]
    too_many = not gpu_limit.holds(n_gpus)
    problems = []
    if too_many:
        problems.append(f"{n_gpus} GPUs in a {shape} fabric (limit {gpu_limit.bound():g})")
    gpu_rows = nodes.loc[kinds == "gpu", "node_id"]
    switches = nodes[kinds == "switch"]
    slow = switches[arbitration.breaks(switches["arbitration_ns"])]
    if len(slow):
        levels = sorted(set(slow["level"].astype(int)))
        problems.append(
            f"switch arbitration {slow['arbitration_ns'].min():g} ns at level(s) {levels} "
            f"(at least {arbitration.bound():g} ns)"
        )
    detail = "; ".join(problems) or (
        f"{n_gpus} GPUs in a {shape} fabric"
        + (f", switch arbitration >= {switches['arbitration_ns'].min():g} ns" if switched else "")
    )
    if too_many or not len(slow):
        return clause.verdict_on(
            gpus,
            "fail" if problems else "pass",
            measured=float(n_gpus),
            basis="configured",
            evidence=((evidence("nodes", gpu_rows),) if too_many else ())
            + ((evidence("nodes", slow["node_id"]),) if len(slow) else ()),
            detail=detail,
        )
    return clause.verdict_on(
        "arbitration",
        "fail",
        measured=float(slow["arbitration_ns"].min()),
        basis="configured",
        evidence=(evidence("nodes", slow["node_id"]),),
        detail=detail,
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
    limit = p["rtt_factor"] * rtt_max + p["margin_ns"]
    pair = far[(far["src"] == requester) & (far["dst"] == target)]
    worst = pair[pair["rtt_ns"] >= rtt_max]
    return clause.verdict_on(
        "window",
        "pass" if clause.limits["window"].holds(window, limit) else "fail",
        measured=window,
        value=limit,
        basis="measured",
        evidence=(evidence("probes", worst["probe_id"]),),
        detail=(
            f"RTT_max = p99 round trip {requester}->{target} ({int(farthest_hops)} hops each "
            f"way) = {rtt_max:.1f} ns over {len(pair)} probes; median "
            f"{np.median(pair['rtt_ns']):.1f} ns"
        ),
    )


JUDGES: dict[str, Judge] = {
    "fabric.hop_limit": hop_limit,
    "fabric.topology_limits": topology_limits,
    "fabric.tso_window": tso_window,
}
