"""Judges of the L3 fabric clauses (§2.2): hop limit, topology limits, TSO window."""

from __future__ import annotations

import numpy as np

from sitssim.spec.registry import CLAUSES, RunContext, Verdict, evidence, judge

MAX_HOPS = 7
MAX_GPUS_SWITCHED = 8
MAX_GPUS_DIRECT_RC = 4
MIN_ARBITRATION_NS = 35.0
TSO_MARGIN_NS = 150.0
TSO_RTT_QUANTILE = 0.99


@judge("fabric.hop_limit")
def hop_limit(ctx: RunContext) -> Verdict:
    clause = CLAUSES["fabric.hop_limit"]
    messages = ctx.tables["messages"]
    if messages.empty:
        return clause.not_applicable("no messages crossed the fabric")
    hops = messages["hops"].to_numpy()
    longest = int(hops.max())
    over = messages.loc[hops > MAX_HOPS, "msg_id"]
    rows = over if len(over) else messages.loc[hops == longest, "msg_id"]
    path = messages.loc[hops == longest, "path"].iloc[0]
    return clause.verdict(
        "fail" if len(over) else "pass",
        measured=float(longest),
        limit=float(MAX_HOPS),
        unit="hops",
        basis="measured",
        evidence=(evidence("messages", rows),),
        detail=f"longest route taken: {path} ({len(over)} messages over the limit)",
    )


@judge("fabric.topology_limits")
def topology_limits(ctx: RunContext) -> Verdict:
    clause = CLAUSES["fabric.topology_limits"]
    fabric = ctx.fabric
    nodes = ctx.tables["nodes"]
    n_gpus = len(fabric.gpus)
    switched = bool(fabric.switches)
    if switched:
        gpu_limit, shape = MAX_GPUS_SWITCHED, "switch-based"
    elif fabric.root is not None:
        gpu_limit, shape = MAX_GPUS_DIRECT_RC, "direct root-complex"
    else:
        return clause.not_applicable("a fabric with neither switches nor a root complex")
    problems = []
    if n_gpus > gpu_limit:
        problems.append(f"{n_gpus} GPUs in a {shape} fabric (limit {gpu_limit})")
    gpu_rows = nodes.loc[nodes["kind"] == "gpu", "node_id"]
    switches = nodes[nodes["kind"] == "switch"]
    slow = switches[switches["arbitration_ns"] < MIN_ARBITRATION_NS]
    if len(slow):
        levels = sorted(set(slow["level"].astype(int)))
        problems.append(
            f"switch arbitration {slow['arbitration_ns'].min():g} ns at level(s) {levels} "
            f"(at least {MIN_ARBITRATION_NS:g} ns)"
        )
    detail = "; ".join(problems) or (
        f"{n_gpus} GPUs in a {shape} fabric"
        + (f", switch arbitration >= {switches['arbitration_ns'].min():g} ns" if switched else "")
    )
    if n_gpus > gpu_limit or not len(slow):
        return clause.verdict(
            "fail" if problems else "pass",
            measured=float(n_gpus),
            limit=float(gpu_limit),
            unit="GPUs",
            basis="configured",
            evidence=((evidence("nodes", gpu_rows),) if n_gpus > gpu_limit else ())
            + ((evidence("nodes", slow["node_id"]),) if len(slow) else ()),
            detail=detail,
        )
    return clause.verdict(
        "fail",
        measured=float(slow["arbitration_ns"].min()),
        op=">=",
        limit=MIN_ARBITRATION_NS,
        unit="ns",
        basis="configured",
        evidence=(evidence("nodes", slow["node_id"]),),
        detail=detail,
    )


@judge("fabric.tso_window")
def tso_window(ctx: RunContext) -> Verdict:
    clause = CLAUSES["fabric.tso_window"]
    window = ctx.scenario.root_complex.tso_window
    if window is None:
        return clause.not_applicable("no TSO window configured (root_complex.tso_window)")
    probes = ctx.tables["probes"]
    probes = probes[probes["rtt_ns"].notna()]
    if probes.empty:
        return clause.not_applicable("no completed round-trip probes: add a 'probes' workload")
    farthest_hops = probes["hops"].max()
    far = probes[probes["hops"] == farthest_hops]
    p99 = far.groupby(["src", "dst"], observed=True)["rtt_ns"].quantile(TSO_RTT_QUANTILE)
    requester, target = p99.idxmax()
    rtt_max = float(p99.max())
    limit = 2.0 * rtt_max + TSO_MARGIN_NS
    pair = far[(far["src"] == requester) & (far["dst"] == target)]
    worst = pair[pair["rtt_ns"] >= rtt_max]
    return clause.verdict(
        "pass" if window >= limit else "fail",
        measured=float(window),
        op=">=",
        limit=float(limit),
        unit="ns",
        basis="measured",
        evidence=(evidence("probes", worst["probe_id"]),),
        detail=(
            f"RTT_max = p99 round trip {requester}->{target} ({int(farthest_hops)} hops each "
            f"way) = {rtt_max:.1f} ns over {len(pair)} probes; median "
            f"{np.median(pair['rtt_ns']):.1f} ns"
        ),
    )
