"""Judges of the CDC clauses (§3.1): FIFO depth, REFCLK→PHYCLK sync latency, handshake setup.

They read the ``cdc`` table (one row per channel and corner) and the ``fifo`` table
(the configured FIFO's occupancy and lost words in the worst-case burst), never the
device profile: a faulty synchroniser is caught by the latency it was measured to have.
"""

from __future__ import annotations

import pandas as pd

from sitssim.spec.registry import CLAUSES, RunContext, Verdict, evidence, judge

SS_CORNER = "SS/125C"
FF_CORNER = "FF/0C"
SYNC_LATENCY_LIMIT_NS = 1.2
HANDSHAKE_MIN_CYCLES = 8.5
# §3.1 declares the depth as `logic [7:0] fifo_depth`.
DEPTH_REGISTER_MAX = 255


def _cdc(ctx: RunContext) -> pd.DataFrame | None:
    table = ctx.tables.get("cdc")
    return None if table is None or table.empty else table


def _corner_rows(ctx: RunContext, clause_id: str, corner: str) -> pd.DataFrame | Verdict:
    clause = CLAUSES[clause_id]
    cdc = _cdc(ctx)
    if cdc is None:
        return clause.not_applicable("no CDC FIFO was evaluated (no link_layer.cdc block)")
    rows = cdc[cdc["corner"] == corner]
    if rows.empty:
        evaluated = ", ".join(str(c) for c in cdc["corner"].unique())
        return clause.not_applicable(
            f"the {corner} corner was not evaluated (link_layer.cdc.corners: {evaluated})"
        )
    return rows


@judge("link.cdc_fifo_depth")
def cdc_fifo_depth(ctx: RunContext) -> Verdict:
    clause = CLAUSES["link.cdc_fifo_depth"]
    cdc = _cdc(ctx)
    if cdc is None:
        return clause.not_applicable("no CDC FIFO was evaluated (no link_layer.cdc block)")
    short = cdc["configured_depth"] < cdc["formula_depth"]
    spilled = cdc["overflows"] > 0
    bad = cdc[short | spilled]
    margin = cdc["configured_depth"] - cdc["formula_depth"]
    worst = cdc.loc[bad.index[0]] if len(bad) else cdc.loc[margin.idxmin()]
    parts = [
        f"{worst['link']} at {worst['corner']}: configured depth "
        f"{worst['configured_depth']}, formula (max_rtt_cycles {worst['max_rtt_cycles']} << 1)"
        f" + 4 = {worst['formula_depth']}, minimal safe depth by bisection "
        f"{worst['min_safe_depth']}; {worst['overflows']} word(s) lost in the worst-case burst "
        f"(peak occupancy {worst['peak_occupancy']})",
        f"loop: detection {worst['rtt_detect_cycles']:.1f} + stop path "
        f"{worst['rtt_stop_path_cycles']:.1f} cycles, {worst['rtt_in_flight_words']} word(s) "
        "in flight",
        f"{len(bad)} of {len(cdc)} link-corner(s) short or overflowing",
    ]
    unsafe = cdc[cdc["formula_depth"] < cdc["min_safe_depth"]]
    if len(unsafe):
        row = unsafe.iloc[0]
        parts.append(
            f"the formula's depth is below the bisected minimal safe depth on {len(unsafe)} "
            f"link-corner(s) (e.g. {row['link']} at {row['corner']}: {row['formula_depth']} < "
            f"{row['min_safe_depth']})"
        )
    if (cdc["formula_depth"] > DEPTH_REGISTER_MAX).any():
        parts.append(
            f"the formula's depth exceeds the {DEPTH_REGISTER_MAX} that §3.1's 8-bit "
            "fifo_depth can hold"
        )
    fifo = ctx.tables.get("fifo")
    proof = []
    if fifo is not None and len(bad):
        lost = fifo[fifo["lost"].astype(bool)]
        if len(lost):
            proof.append(evidence("fifo", lost["sample_id"]))
    rows = bad if len(bad) else cdc.loc[[worst.name]]
    proof.append(evidence("cdc", rows["cdc_id"]))
    return clause.verdict(
        "fail" if len(bad) else "pass",
        measured=float(worst["configured_depth"]),
        limit=float(worst["formula_depth"]),
        op=">=",
        unit="entries",
        basis="measured",
        evidence=tuple(proof),
        detail="; ".join(parts),
    )


@judge("link.cdc_sync_latency")
def cdc_sync_latency(ctx: RunContext) -> Verdict:
    clause = CLAUSES["link.cdc_sync_latency"]
    rows = _corner_rows(ctx, clause.id, SS_CORNER)
    if isinstance(rows, Verdict):
        return rows
    over = rows[rows["sync_latency_ns"] >= SYNC_LATENCY_LIMIT_NS]
    worst = rows.loc[rows["sync_latency_ns"].idxmax()]
    return clause.verdict(
        "fail" if len(over) else "pass",
        measured=float(worst["sync_latency_ns"]),
        limit=SYNC_LATENCY_LIMIT_NS,
        op="<",
        unit="ns",
        basis="measured",
        evidence=(evidence("cdc", (over if len(over) else rows.loc[[worst.name]])["cdc_id"]),),
        detail=(
            f"worst case over clock phases at {SS_CORNER}, {worst['link']}: "
            f"{worst['flops']}-flop synchroniser on a {worst['sync_period_ps']:g} ps clock "
            f"(mean {worst['sync_latency_mean_ns']:.3f} ns, MTBF "
            f"{worst['sync_mtbf_years']:.3g} years); {len(over)} of {len(rows)} link(s) at or "
            "over the limit"
        ),
    )


@judge("link.handshake_setup")
def handshake_setup(ctx: RunContext) -> Verdict:
    clause = CLAUSES["link.handshake_setup"]
    rows = _corner_rows(ctx, clause.id, FF_CORNER)
    if isinstance(rows, Verdict):
        return rows
    under = rows[rows["handshake_setup_cycles"] <= HANDSHAKE_MIN_CYCLES]
    worst = rows.loc[rows["handshake_setup_cycles"].idxmin()]
    return clause.verdict(
        "fail" if len(under) else "pass",
        measured=float(worst["handshake_setup_cycles"]),
        limit=HANDSHAKE_MIN_CYCLES,
        op=">",
        unit="REFCLK cycles",
        basis="measured",
        evidence=(evidence("cdc", (under if len(under) else rows.loc[[worst.name]])["cdc_id"]),),
        detail=(
            f"shortest over clock phases at {FF_CORNER}, {worst['link']}: from the PHY's "
            "training-complete edge through the four-phase handshake to the first wide word "
            f"read across the FIFO ({worst['flops']} flop(s) into PHYCLK, "
            f"{worst['ref_flops']} into REFCLK); {len(under)} of {len(rows)} link(s) at or "
            "under the limit"
        ),
    )
