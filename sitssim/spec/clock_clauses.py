"""Judges of the timestamp and skew clauses: ``link.ts_injection`` (§2.1), ``fabric.skew_budget``
(§2.2).

Both read behaviour only: the ordered sets as the receivers saw them, and the fences'
arrival times on each GPU's own clock. Neither looks at the clock parameters or faults.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sitssim.protocol.stamp_checker import Finding, check_directions
from sitssim.spec.catalogue import CLAUSES
from sitssim.spec.clause import Clause
from sitssim.spec.context import Judge, RunContext
from sitssim.spec.verdict import Verdict, evidence
from sitssim.spec.worst import worst_rows

NO_CLOCKS = "no clocks modelled: add a 'clocks:' section to the scenario"


def max_allowed_skew(n_gpus: int) -> float:
    """§2.2's budget: 85 + (n − 1)·12.5 + 42 ns (the 'hop' penalty counts GPUs, as written)."""
    if n_gpus < 1:
        raise ValueError(f"need at least one GPU, got {n_gpus}")
    p = CLAUSES["fabric.skew_budget"].params
    return p["base_rtt_ns"] + (n_gpus - 1) * p["per_gpu_ns"] + p["phy_uncertainty_ns"]


def ts_injection(clause: Clause, ctx: RunContext) -> Verdict:
    sets = ctx.tables.get("ordered_sets")
    if sets is None:
        return clause.not_applicable(NO_CLOCKS)
    if sets.empty:
        return clause.not_applicable("no ordered set was sent")
    sets = sets.sort_values(["channel", "seq"], kind="stable")
    findings = np.array(
        [f.value for f in check_directions(sets["direction"], sets["stamp_ns"])], dtype=object
    )
    missing = sets[findings == Finding.NO_STAMP.value]
    backwards = sets[findings == Finding.NOT_MONOTONIC.value]
    bad = sets[findings != Finding.OK.value]
    directions = sets["direction"].nunique()
    head = f"{len(sets)} ordered sets (TS1/TS2) on {directions} link directions"
    if len(bad):
        first = bad.sort_values("t_true_ns", kind="stable").iloc[0]
        detail = (
            f"{head}: {len(missing)} without a stamp, {len(backwards)} stamped at or below the "
            f"previous stamp; first: {first['direction']} seq {int(first['seq'])} at "
            f"{first['t_true_ns']:.1f} ns"
        )
        rows: pd.Series = bad["os_id"]
    else:
        step = sets.groupby("direction", sort=False)["stamp_ns"].diff()
        closest = sets.loc[[step.idxmin()]] if step.notna().any() else sets.head(0)
        detail = f"{head}, every one stamped and above the previous stamp"
        if len(closest):
            detail += (
                f"; smallest increment {step.min():.1f} ns "
                f"({closest['direction'].iloc[0]} seq {int(closest['seq'].iloc[0])})"
            )
        rows = closest["os_id"]
    return clause.verdict_on(
        "count",
        "fail" if len(bad) else "pass",
        measured=float(len(bad)),
        basis="measured",
        evidence=(evidence("ordered_sets", rows),),
        detail=detail,
    )


def fence_skews(fences: pd.DataFrame) -> pd.DataFrame:
    """Per fence: spread of local arrival times, worst |residual offset|, and their sum."""
    by_fence = fences.groupby("fence", sort=True)
    local = by_fence["t_arrive_local_ns"]
    out = pd.DataFrame(
        {
            "gpus": by_fence.size(),
            "spread_ns": local.max() - local.min(),
            "residual_ns": by_fence["residual_ns"].agg(lambda r: float(np.abs(r).max())),
        }
    )
    out["skew_ns"] = out["spread_ns"] + out["residual_ns"]
    return out


def skew_budget(clause: Clause, ctx: RunContext) -> Verdict:
    fences = ctx.tables.get("fences")
    if fences is None:
        return clause.not_applicable(NO_CLOCKS)
    if fences.empty:
        return clause.not_applicable("no fence was issued before the end of the traffic phase")
    n = int((ctx.tables["nodes"]["kind"] == "gpu").sum())
    limit = max_allowed_skew(n)
    skews = fence_skews(fences)
    skews = skews[skews["gpus"] == n]
    if skews.empty:
        return clause.not_applicable(f"no fence reached all {n} GPUs")
    judged = worst_rows(skews, "skew_ns", clause.limits["skew"], limit)
    worst = int(judged.worst.name)
    over = judged.over.index
    messages = ctx.tables.get("messages")
    hops = 0
    if messages is not None:
        fence_hops = messages.loc[messages["kind"] == "fence", "hops"]
        hops = int(fence_hops.max()) if len(fence_hops) else 0
    shown = over if len(over) else [worst]
    w = judged.worst
    return clause.verdict_on(
        "skew",
        "fail" if len(over) else "pass",
        measured=judged.measured,
        value=limit,
        basis="measured",
        evidence=(evidence("fences", fences.loc[fences["fence"].isin(shown), "arrival_id"]),),
        detail=(
            f"n = {n} GPUs, fences cross up to {hops} hops from the root (the budget grows with "
            f"n, not hops: SPEC ambiguity 3); worst of {len(skews)} fences: #{worst} spread "
            f"{w['spread_ns']:.1f} ns + residual offset {w['residual_ns']:.1f} ns; median fence "
            f"skew {skews['skew_ns'].median():.1f} ns; {len(over)} fences over budget"
        ),
    )


JUDGES: dict[str, Judge] = {
    "link.ts_injection": ts_injection,
    "fabric.skew_budget": skew_budget,
}
