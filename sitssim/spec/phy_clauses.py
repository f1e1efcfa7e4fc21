"""Judges of the L1 physical-layer clauses (§2.1, §3.1, §4.3).

Each reads the PHY tables of a run (see ``sitssim/stages/phy.py``; times on the
PHY clock, 0 = the reset) and compares what the links did with the spec's
limits. None reads a device profile or a fault: a faulty PHY is caught by what
it did.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from sitssim.protocol.ltssm_states import State
from sitssim.spec.clause import Clause
from sitssim.spec.context import Judge, RunContext
from sitssim.spec.verdict import Verdict, evidence
from sitssim.spec.worst import Worst, worst_row_verdict

# Two times on the PHY clock computed along different sums agree to this (ns).
TIME_TOLERANCE_NS = 1e-6
SHOWN = 6


def _table(ctx: RunContext, name: str) -> pd.DataFrame | None:
    return ctx.tables.get(name)


def _listed(items: list[str]) -> str:
    more = f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return "; ".join(items[:SHOWN]) + more


def symbol_rate(clause: Clause, ctx: RunContext) -> Verdict:
    """Each receiver's count of the symbols it recovered in a gate of its own reference
    clock (``symbol_timing``) against 32 GBd; the modulation is the link's configured one."""
    rate = clause.limits["rate"].bound()
    tolerance = clause.params["tolerance_ppm"] * 1e-6 * rate
    bits_per_symbol = clause.params["bits_per_symbol"]
    timing = _table(ctx, "symbol_timing")
    if timing is None or timing.empty:
        return clause.not_applicable("no receiver counted training symbols (no symbol timing)")
    gbd = timing["symbols"].to_numpy(dtype=float) / timing["gate_ns"].to_numpy(dtype=float)
    bits = timing["bits_per_symbol"].to_numpy()
    off_rate = np.abs(gbd - rate) > tolerance
    off_modulation = bits != bits_per_symbol
    bad = off_rate | off_modulation
    worst = int(np.argmax(np.abs(gbd - rate)))
    rows = timing["timing_id"][bad] if bad.any() else timing["timing_id"]
    problems = [
        f"{r.link} {r.direction}: {r.symbols} symbols in {r.gate_ns:g} ns = {g:.6g} GBd"
        + (f", {b} bit(s)/symbol configured" if b != bits_per_symbol else "")
        for r, g, b in zip(timing[bad].itertuples(), gbd[bad], bits[bad], strict=True)
    ]
    low, high = f"{gbd.min():.6g}", f"{gbd.max():.6g}"
    counted = (
        f"{len(timing)} receivers counted {low if low == high else f'{low}-{high}'} GBd on "
        f"their reference clocks (limit {rate:g} GBd ± {clause.params['tolerance_ppm']:g} ppm)"
    )
    return clause.verdict_on(
        "rate",
        "fail" if bad.any() else "pass",
        measured=float(gbd[worst]),
        # A direction failing on its configured modulation alone rests on no count.
        basis="configured" if (off_modulation & ~off_rate).any() else "measured",
        evidence=(evidence("symbol_timing", rows),),
        detail=(_listed(problems) + "; " if problems else "") + counted,
    )


def training_sequence(clause: Clause, ctx: RunContext) -> Verdict:
    """What each receiver's framer observed of the set length and its PRBS31 checker of
    the sequences (``training_sets``)."""
    prbs, symbols = clause.params["prbs_order"], clause.params["symbols"]
    sets = _table(ctx, "training_sets")
    if sets is None or sets.empty:
        return clause.not_applicable("no receiver checked training sequences")
    framed = sets["framed"].astype(bool)
    wrong_order = (sets["detected_order"] != prbs) | ~sets["locked"].astype(bool)
    slipped = sets["locks"] != 1
    wrong_length = framed & (sets["symbols_per_set"] != symbols)
    bad = sets[~framed | wrong_order | slipped | wrong_length]
    problems = []
    for r in bad.itertuples():
        what = []
        if not r.framed:
            what.append("framer found no set boundaries")
        elif r.symbols_per_set != symbols:
            what.append(f"{r.symbols_per_set}-symbol sets observed")
        if r.detected_order != prbs or not r.locked:
            sent = f"PRBS{r.detected_order}" if r.detected_order > 0 else "no O.150 PRBS"
            what.append(f"PRBS31 checker did not verify it ({sent} received)")
        elif r.locks != 1:
            what.append(f"PRBS31 checker lost lock ({r.locks} locks)")
        problems.append(f"{r.link} {r.direction} (round {r.round}): " + ", ".join(what))
    checked = int(sets["bits_checked"].sum())
    return clause.verdict_on(
        "count",
        "fail" if len(bad) else "pass",
        measured=float(len(bad)),
        basis="measured",
        evidence=(evidence("training_sets", bad["check_id"] if len(bad) else sets["check_id"]),),
        detail=_listed(problems)
        if problems
        else (
            f"{len(sets)} receivers framed {symbols}-symbol sets and verified their PRBS31 "
            f"({checked} bits checked, {int(sets['errors'].sum())} errors)"
        ),
    )


def _l0_entries(states: pd.DataFrame) -> pd.DataFrame:
    """Each L0 entry with the start of the interval it closes (the previous L0 exit)."""
    ordered = states.sort_values(["link", "state_id"])
    rows = []
    # One pass over plain columns, a link's rows after one another: per-link frames cost
    # seconds at a thousand links.
    link_before, since = None, -math.inf
    for state_id, link, state, t_enter, t_exit in zip(
        ordered["state_id"].tolist(),
        ordered["link"].tolist(),
        ordered["state"].tolist(),
        ordered["t_enter_ns"].tolist(),
        ordered["t_exit_ns"].tolist(),
        strict=True,
    ):
        if link != link_before:
            link_before, since = link, -math.inf
        if state == State.L0.value:
            rows.append((state_id, link, since, t_enter))
            since = t_exit if math.isfinite(t_exit) else math.inf
    return pd.DataFrame(rows, columns=["state_id", "link", "since_ns", "t_ns"])


class _EqRow(NamedTuple):
    eq_id: int
    link: str
    round: int
    phase: int
    t_start_ns: float
    t_end_ns: float
    ber: float


def eq_level3(clause: Clause, ctx: RunContext) -> Verdict:
    phases, ber_target = clause.params["phases"], clause.params["ber_target"]
    states, eq = _table(ctx, "link_states"), _table(ctx, "eq")
    if states is None or eq is None:
        return clause.not_applicable("no link training was modelled")
    entries = _l0_entries(states)
    if entries.empty:
        return clause.not_applicable("no link entered L0")
    # Each link's EQ rows in table order, as plain tuples: a frame filter per L0 entry
    # costs seconds at a thousand links.
    by_link: dict[str, list[_EqRow]] = {}
    for row in zip(
        eq["eq_id"].tolist(),
        eq["link"].tolist(),
        eq["round"].tolist(),
        eq["phase"].tolist(),
        eq["t_start_ns"].tolist(),
        eq["t_end_ns"].tolist(),
        eq["ber"].tolist(),
        strict=True,
    ):
        by_link.setdefault(row[1], []).append(_EqRow(*row))
    problems, bad_states, bad_eq = [], [], []
    for state_id, link, since_ns, t_ns in zip(
        entries["state_id"].tolist(),
        entries["link"].tolist(),
        entries["since_ns"].tolist(),
        entries["t_ns"].tolist(),
        strict=True,
    ):
        rows = [r for r in by_link.get(link, ()) if r.t_start_ns >= since_ns and r.t_end_ns <= t_ns]
        if not rows:
            problems.append(f"{link} entered L0 at {t_ns / 1e3:.2f} µs without EQ")
            bad_states.append(state_id)
            continue
        latest = max(r.round for r in rows)
        last = [r for r in rows if r.round == latest]
        ran = {r.phase for r in last}
        missing = [p for p in range(phases) if p not in ran]
        above = [r for r in last if r.phase > 0 and not r.ber < ber_target]
        if missing or above:
            what = []
            if missing:
                what.append("phase " + ", ".join(map(str, missing)) + " not run")
            for r in above:
                what.append(f"phase {r.phase} ended at BER {r.ber:.2g}")
            problems.append(f"{link} entered L0 at {t_ns / 1e3:.2f} µs: " + "; ".join(what))
            bad_states.append(state_id)
            bad_eq.extend(r.eq_id for r in last)
    worst = float(eq.loc[eq["phase"] > 0, "ber"].max()) if (eq["phase"] > 0).any() else None
    return clause.verdict_on(
        "count",
        "fail" if problems else "pass",
        measured=float(len(problems)),
        basis="measured",
        evidence=(evidence("link_states", bad_states), evidence("eq", bad_eq))
        if problems
        else (evidence("link_states", entries["state_id"]),),
        detail=_listed(problems)
        if problems
        else (
            f"all {len(entries)} L0 entries followed phases 0-3 below BER {ber_target:g}"
            + (f" (worst phase BER {worst:.2g})" if worst is not None else "")
        ),
    )


def phase_alignment(clause: Clause, ctx: RunContext) -> Verdict:
    lock_window, phase_error = clause.limits["lock"], clause.limits["phase_error"]
    cdr = _table(ctx, "cdr")
    if cdr is None or cdr.empty:
        return clause.not_applicable("no CDR acquisition was recorded")
    lock = cdr["lock_time_ui"].to_numpy(dtype=float)
    residual = cdr["residual_max_ui"].to_numpy(dtype=float)
    # Judged as 'not within' so a missing time is late; a late acquisition's residual is not.
    late = ~lock_window.holds(lock)
    loose = ~phase_error.holds(residual) & ~late
    bad = cdr[late | loose]
    problems = [
        f"{r.link} {r.direction}: "
        + (
            f"locked after {r.lock_time_ui:g} UI"
            if math.isfinite(r.lock_time_ui)
            else "never locked"
        )
        + f", residual {r.residual_max_ui:.3f} UI (TRAIN_CTRL {r.train_ctrl}: "
        + f"{r.integration_ui} UI/update)"
        for r in bad.itertuples()
    ]
    summary = (
        f"lock ≤ {np.nanmax(lock):g} UI, |phase error| after lock ≤ {np.nanmax(residual):.3f} UI "
        f"over {len(cdr)} acquisitions"
    )
    if late.any() or not loose.any():
        limit, measured = "lock", float(np.max(lock))
    else:
        limit, measured = "phase_error", float(np.nanmax(residual))
    return clause.verdict_on(
        limit,
        "fail" if len(bad) else "pass",
        measured=measured,
        basis="measured",
        evidence=(evidence("cdr", bad["cdr_id"] if len(bad) else cdr["cdr_id"]),),
        detail=(_listed(problems) + "; " if problems else "") + summary,
    )


# Recoveries another layer asks for (sitssim/stages/phy.py, PhyStage.recover): not the BER
# monitor's requests, and counted through by its training cycles, which ran before them.
LINK_LAYER_RECOVERY = "replay_rollover"


def _monitor_view(states: pd.DataFrame) -> pd.DataFrame:
    """``link_states`` as the BER monitor saw them: each Recovery episode the link layer
    asked for is dropped, and the L0 rows around it are joined (the first keeps its id)."""
    kept: list[dict] = []
    # One pass over the records, a link's rows after one another (per-link frames cost
    # seconds at a thousand links).
    l0: dict | None = None
    skipping = False
    link_before = None
    for r in states.sort_values(["link", "state_id"]).to_dict("records"):
        if r["link"] != link_before:
            if skipping:
                l0["t_exit_ns"] = math.nan
            link_before, l0, skipping = r["link"], None, False
        if r["state"] == State.RECOVERY_RCVRLOCK.value and r["cause"] == LINK_LAYER_RECOVERY:
            skipping = True
            continue
        if skipping:
            if r["state"] == State.L0.value:
                l0["t_exit_ns"] = r["t_exit_ns"]
                skipping = False
                continue
            if r["cause"] != "ber_retrain":
                continue
            # The episode ran into a retraining the monitor asked for.
            l0["t_exit_ns"] = r["t_enter_ns"]
            skipping = False
        kept.append(r)
        l0 = r if r["state"] == State.L0.value else None
    if skipping:
        l0["t_exit_ns"] = math.nan
    return pd.DataFrame(kept, columns=states.columns)


def _retrain_requests(states: pd.DataFrame) -> dict[str, list[tuple[int, float]]]:
    """Per link, (state_id, time) of every Recovery.RcvrLock entered straight from L0."""
    out: dict[str, list[tuple[int, float]]] = {}
    ordered = states.sort_values(["link", "state_id"])
    link_before, previous = None, None
    for state_id, link, state, t_enter in zip(
        ordered["state_id"].tolist(),
        ordered["link"].tolist(),
        ordered["state"].tolist(),
        ordered["t_enter_ns"].tolist(),
        strict=True,
    ):
        if link != link_before:
            link_before, previous = link, None
        if state == State.RECOVERY_RCVRLOCK.value and previous == State.L0.value:
            out.setdefault(link, []).append((state_id, t_enter))
        previous = state
    return out


def retrain_trigger(clause: Clause, ctx: RunContext) -> Verdict:
    threshold, windows_needed = clause.params["ber_threshold"], clause.params["windows"]
    states, windows = _table(ctx, "link_states"), _table(ctx, "ber_windows")
    if states is None or windows is None:
        return clause.not_applicable("no link training was modelled")
    states = _monitor_view(states)
    requests = _retrain_requests(states)
    if windows.empty and not requests:
        return clause.not_applicable(
            "no link completed a training cycle in L0 (the run is shorter than one cycle)"
        )
    entries = _l0_entries(states)
    exits = states.set_index("state_id")["t_exit_ns"]
    by_link = {link: group for link, group in windows.groupby("link")}
    no_windows = windows.iloc[:0]
    problems, bad_windows, bad_states = [], [], []
    for entry in entries.itertuples():
        l0_exit = float(exits[entry.state_id])
        span_end = l0_exit if math.isfinite(l0_exit) else math.inf
        mine = by_link.get(entry.link, no_windows)
        if len(mine):
            mine = mine[
                (mine["t_start_ns"] >= entry.t_ns - TIME_TOLERANCE_NS)
                & (mine["t_ns"] <= span_end + TIME_TOLERANCE_NS)
            ]
        due = _first_due(mine, threshold, windows_needed) if len(mine) else None
        request = next(
            (
                (sid, t)
                for sid, t in requests.get(entry.link, [])
                if math.isfinite(l0_exit) and abs(t - l0_exit) <= TIME_TOLERANCE_NS
            ),
            None,
        )
        if due is not None:
            due_id, due_t = due
            if request is None:
                problems.append(
                    f"{entry.link}: {windows_needed} cycles above "
                    f"{threshold:g} by {due_t / 1e3:.2f} µs, no retraining"
                )
                bad_windows.append(due_id)
            elif abs(request[1] - due_t) > TIME_TOLERANCE_NS:
                problems.append(
                    f"{entry.link}: retrained at {request[1] / 1e3:.2f} µs, due at "
                    f"{due_t / 1e3:.2f} µs"
                )
                bad_windows.append(due_id)
                bad_states.append(request[0])
        elif request is not None:
            problems.append(
                f"{entry.link}: retrained at {request[1] / 1e3:.2f} µs without "
                f"{windows_needed} consecutive cycles above {threshold:g}"
            )
            bad_states.append(request[0])
            bad_windows.extend(mine["window_id"].tail(2 * windows_needed))
    above = int((windows["errors"] / windows["bits"] > threshold).sum())
    n_requests = sum(len(v) for v in requests.values())
    ev = []
    if bad_windows:
        ev.append(evidence("ber_windows", bad_windows))
    if bad_states:
        ev.append(evidence("link_states", bad_states))
    if not problems:
        ev.append(evidence("link_states", [sid for v in requests.values() for sid, _ in v]))
    return clause.verdict_on(
        "count",
        "fail" if problems else "pass",
        measured=float(len(problems)),
        basis="measured",
        evidence=tuple(ev),
        detail=_listed(problems)
        if problems
        else (
            f"{n_requests} retraining(s), each when {windows_needed} consecutive cycles "
            f"exceeded {threshold:g}; {above} of {len(windows)} cycle counts "
            f"above it"
        ),
    )


def _first_due(
    windows: pd.DataFrame, threshold: float, windows_needed: int
) -> tuple[int, float] | None:
    """The window at which some direction completes the spec's run of cycles above threshold."""
    best: tuple[int, float] | None = None
    for _, rows in windows.sort_values("t_ns").groupby("direction", sort=True):
        above = (rows["errors"] / rows["bits"] > threshold).to_numpy()
        count = np.cumsum(above)
        run = count - np.maximum.accumulate(np.where(above, 0, count))
        hits = np.flatnonzero(run >= windows_needed)
        if hits.size:
            row = rows.iloc[int(hits[0])]
            if best is None or row["t_ns"] < best[1]:
                best = (int(row["window_id"]), float(row["t_ns"]))
    return best


def reset_to_l0(clause: Clause, ctx: RunContext) -> Verdict:
    links, states = _table(ctx, "phy_links"), _table(ctx, "link_states")
    if links is None or states is None or links.empty:
        return clause.not_applicable("no links were trained")
    ordered = states.sort_values("t_enter_ns", kind="stable")
    first = ordered[ordered["state"] == State.L0.value].groupby("link").first()
    names = links["link"].to_numpy()
    times_us = first["t_enter_ns"].reindex(names).to_numpy(dtype=float) / 1e3
    # A link that never reached L0 points at the state it was left in.
    last = ordered.groupby("link")["state_id"].last()
    reached = pd.DataFrame(
        {
            "link": names,
            # A link that never reached L0 is later than any that did.
            "t_us": np.where(np.isnan(times_us), np.inf, times_us),
            "state_id": first["state_id"].reindex(names).fillna(last.reindex(names)).to_numpy(),
        }
    )

    def detail(judged: Worst) -> str:
        worst = judged.worst
        if len(judged.over):
            over = judged.over
            latest_first = over.iloc[np.argsort(-over["t_us"].to_numpy(), kind="stable")]
            slow = [
                f"{r.link} " + (f"at {r.t_us:.1f} µs" if math.isfinite(r.t_us) else "never")
                for r in latest_first.itertuples()
            ]
            return (
                f"{len(over)} of {len(names)} links reached L0 after {judged.limit:g} µs: "
                + _listed(slow)
            )
        return (
            f"all {len(names)} links in L0 by {worst['t_us']:.1f} µs "
            f"({worst['link']} last; first at {reached['t_us'].min():.1f} µs)"
        )

    return worst_row_verdict(
        clause,
        "time",
        reached,
        "t_us",
        table="link_states",
        ids="state_id",
        detail=detail,
        empty="no links were trained",
    )


JUDGES: dict[str, Judge] = {
    "phy.symbol_rate": symbol_rate,
    "phy.training_sequence": training_sequence,
    "phy.eq_level3": eq_level3,
    "phy.phase_alignment": phase_alignment,
    "phy.retrain_trigger": retrain_trigger,
    "phy.reset_to_l0": reset_to_l0,
}
