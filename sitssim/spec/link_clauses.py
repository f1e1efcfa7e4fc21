"""Judges of the CDC clauses (§3.1): FIFO depth, REFCLK→PHYCLK sync latency, handshake setup.

They read the ``cdc`` table (one row per channel and corner) and the ``fifo`` table
(the configured FIFO's occupancy and lost words in the worst-case burst), never the
device profile: a faulty synchroniser is caught by the latency it was measured to have.
"""

from __future__ import annotations

import pandas as pd

from sitssim.spec.clause import Clause
from sitssim.spec.context import Judge, RunContext
from sitssim.spec.verdict import Verdict, evidence
from sitssim.spec.worst import Worst, worst_row_verdict

NO_CDC = "no CDC FIFO was evaluated (no link_layer.cdc block)"


def _cdc(ctx: RunContext) -> pd.DataFrame | None:
    table = ctx.tables.get("cdc")
    return None if table is None or table.empty else table


def _corner_rows(clause: Clause, ctx: RunContext) -> pd.DataFrame | Verdict:
    """The cdc rows at the corner the clause names, or why there are none."""
    corner = clause.params["corner"]
    cdc = _cdc(ctx)
    if cdc is None:
        return clause.not_applicable(NO_CDC)
    rows = cdc[cdc["corner"] == corner]
    if rows.empty:
        evaluated = ", ".join(str(c) for c in cdc["corner"].unique())
        return clause.not_applicable(
            f"the {corner} corner was not evaluated (link_layer.cdc.corners: {evaluated})"
        )
    return rows


def cdc_fifo_depth(clause: Clause, ctx: RunContext) -> Verdict:
    """Two parts. *lost* (measured): the words the FIFO lost in its worst-case burst, what the
    simulated FIFO did. *depth* (configured): the configured depth against the formula's,
    since §3.1's formula is normative, so a FIFO that loses nothing but is shallower than
    the formula fails too. The depth found safe by bisection stands beside both."""
    register_max = clause.params["depth_register_max"]
    cdc = _cdc(ctx)
    if cdc is None:
        return clause.not_applicable(NO_CDC)
    lost_limit, depth_limit = clause.limits["lost"], clause.limits["depth"]
    spilled = lost_limit.breaks(cdc["overflows"])
    short = pd.Series(
        [
            bool(depth_limit.breaks(c, f))
            for c, f in zip(cdc["configured_depth"], cdc["formula_depth"], strict=True)
        ],
        index=cdc.index,
    )
    most_lost = cdc.loc[cdc["overflows"].idxmax()]
    tightest = cdc.loc[(cdc["configured_depth"] - cdc["formula_depth"]).idxmin()]
    parts = (
        clause.part("lost", measured=float(most_lost["overflows"]), basis="measured"),
        clause.part(
            "depth",
            measured=float(tightest["configured_depth"]),
            value=float(tightest["formula_depth"]),
            basis="configured",
        ),
    )
    sized = (
        " (fifo_depth: auto sizes it by the formula, so this part holds by construction)"
        if bool(tightest["depth_auto"])
        else ""
    )
    detail = [
        f"lost: {most_lost['overflows']} word(s) over the clock phases of the worst-case burst "
        f"on {most_lost['link']} at {most_lost['corner']} (peak occupancy "
        f"{most_lost['peak_occupancy']} of {most_lost['configured_depth']}); "
        f"{int(spilled.sum())} of {len(cdc)} link-corner(s) lost words",
        f"depth: configured {tightest['configured_depth']}{sized} against the formula's "
        f"(max_rtt_cycles {tightest['max_rtt_cycles']} << 1) + 4 = {tightest['formula_depth']} "
        f"on {tightest['link']} at {tightest['corner']}; {int(short.sum())} of {len(cdc)} "
        "link-corner(s) below the formula",
        f"minimal safe depth by bisection there {tightest['min_safe_depth']} (the worst-case "
        "burst overflows any shallower FIFO)",
        f"loop: detection {tightest['rtt_detect_cycles']:.1f} + stop path "
        f"{tightest['rtt_stop_path_cycles']:.1f} cycles, {tightest['rtt_in_flight_words']} "
        "word(s) in flight",
    ]
    unsafe = cdc[cdc["formula_depth"] < cdc["min_safe_depth"]]
    if len(unsafe):
        row = unsafe.iloc[0]
        detail.append(
            f"the formula's depth is below the bisected minimal safe depth on {len(unsafe)} "
            f"link-corner(s) (e.g. {row['link']} at {row['corner']}: {row['formula_depth']} < "
            f"{row['min_safe_depth']})"
        )
    if (cdc["formula_depth"] > register_max).any():
        detail.append(
            f"the formula's depth exceeds the {register_max} that §3.1's 8-bit fifo_depth can hold"
        )
    bad = cdc[spilled | short]
    proof = []
    fifo = ctx.tables.get("fifo")
    if fifo is not None and spilled.any():
        lost = fifo[fifo["lost"].astype(bool)]
        if len(lost):
            proof.append(evidence("fifo", lost["sample_id"]))
    rows = bad if len(bad) else cdc.loc[[tightest.name]]
    proof.append(evidence("cdc", rows["cdc_id"]))
    return clause.verdict_on_parts(parts, evidence=tuple(proof), detail="; ".join(detail))


def cdc_sync_latency(clause: Clause, ctx: RunContext) -> Verdict:
    rows = _corner_rows(clause, ctx)
    if isinstance(rows, Verdict):
        return rows

    def detail(judged: Worst) -> str:
        worst = judged.worst
        return (
            f"worst case over clock phases at {clause.params['corner']}, {worst['link']}: "
            f"{worst['flops']}-flop synchroniser on a {worst['sync_period_ps']:g} ps clock "
            f"(mean {worst['sync_latency_mean_ns']:.3f} ns, MTBF "
            f"{worst['sync_mtbf_years']:.3g} years); {len(judged.over)} of {len(rows)} link(s) "
            "at or over the limit"
        )

    return worst_row_verdict(
        clause,
        "latency",
        rows,
        "sync_latency_ns",
        table="cdc",
        ids="cdc_id",
        detail=detail,
        empty=NO_CDC,
    )


def handshake_setup(clause: Clause, ctx: RunContext) -> Verdict:
    rows = _corner_rows(clause, ctx)
    if isinstance(rows, Verdict):
        return rows

    def detail(judged: Worst) -> str:
        worst = judged.worst
        return (
            f"shortest over clock phases at {clause.params['corner']}, {worst['link']}: from the "
            "PHY's training-complete edge through the four-phase handshake to the first wide word "
            f"read across the FIFO ({worst['flops']} flop(s) into PHYCLK, "
            f"{worst['ref_flops']} into REFCLK); {len(judged.over)} of {len(rows)} link(s) at or "
            "under the limit"
        )

    return worst_row_verdict(
        clause,
        "setup",
        rows,
        "handshake_setup_cycles",
        table="cdc",
        ids="cdc_id",
        detail=detail,
        empty=NO_CDC,
    )


JUDGES: dict[str, Judge] = {
    "link.cdc_fifo_depth": cdc_fifo_depth,
    "link.cdc_sync_latency": cdc_sync_latency,
    "link.handshake_setup": handshake_setup,
}
