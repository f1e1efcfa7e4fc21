"""Judges of the L1 physical-layer clauses (§2.1, §3.1, §4.3).

Each reads the PHY tables of a run (see ``sitssim/phy/stage.py``; times on the
PHY clock, 0 = the reset) and compares what the links did with the spec's
limits. None reads a device profile or a fault: a faulty PHY is caught by what
it did.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sitssim.phy.ltssm import EQ_PHASES, State
from sitssim.phy.pam4 import BITS_PER_SYMBOL, DATA_RATE_GTPS, SYMBOL_RATE_GBD, UI_PS
from sitssim.phy.profile import (
    SPEC_RETRAIN_THRESHOLD,
    SPEC_RETRAIN_WINDOWS,
    SPEC_TRAINING_PRBS,
    SPEC_TRAINING_SYMBOLS,
)
from sitssim.spec.registry import CLAUSES, RunContext, Verdict, evidence, judge

EQ_BER_TARGET = 1e-4
LOCK_WINDOW_UI = 256.0
MAX_PHASE_ERROR_UI = 0.125
RESET_TO_L0_US = 200.0
# Two times on the PHY clock computed along different sums agree to this (ns).
TIME_TOLERANCE_NS = 1e-6
SHOWN = 6


def _table(ctx: RunContext, name: str) -> pd.DataFrame | None:
    return ctx.tables.get(name)


def _listed(items: list[str]) -> str:
    more = f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return "; ".join(items[:SHOWN]) + more


@judge("phy.symbol_rate")
def symbol_rate(ctx: RunContext) -> Verdict:
    clause = CLAUSES["phy.symbol_rate"]
    timing = _table(ctx, "symbol_timing")
    if timing is None or timing.empty:
        return clause.not_applicable("no link sent training sequences (no symbol timing)")
    ui_ps = (timing["t_end_ns"] - timing["t_start_ns"]).to_numpy() * 1e3 / timing["symbols"]
    bits = timing["bits_per_symbol"].to_numpy()
    gbd = 1e3 / ui_ps.to_numpy()
    wrong = (np.abs(ui_ps - UI_PS) > 1e-9 * UI_PS).to_numpy() | (bits != BITS_PER_SYMBOL)
    worst = int(np.argmax(np.abs(gbd - SYMBOL_RATE_GBD)))
    bad = timing[wrong]
    detail = (
        _listed(
            [
                f"{r.link} {r.direction}: UI {1e3 / g:.4g} ps = {g:.4g} GBd x {b} bit(s)/symbol "
                f"= {g * b:.4g} GT/s"
                for r, g, b in zip(bad.itertuples(), gbd[wrong], bits[wrong], strict=True)
            ]
        )
        if len(bad)
        else f"UI {UI_PS:g} ps, PAM4 at {DATA_RATE_GTPS:g} GT/s on all {len(timing)} directions"
    )
    rows = bad["timing_id"] if len(bad) else timing["timing_id"]
    return clause.verdict(
        "fail" if len(bad) else "pass",
        measured=float(gbd[worst]),
        op="==",
        limit=SYMBOL_RATE_GBD,
        unit="GBd",
        basis="measured",
        evidence=(evidence("symbol_timing", rows),),
        detail=detail,
    )


@judge("phy.training_sequence")
def training_sequence(ctx: RunContext) -> Verdict:
    clause = CLAUSES["phy.training_sequence"]
    sets = _table(ctx, "training_sets")
    if sets is None or sets.empty:
        return clause.not_applicable("no receiver checked training sequences")
    wrong_order = (sets["detected_order"] != SPEC_TRAINING_PRBS) | ~sets["locked"].astype(bool)
    slipped = sets["locks"] != 1
    wrong_length = sets["symbols_per_set"] != SPEC_TRAINING_SYMBOLS
    bad = sets[wrong_order | slipped | wrong_length]
    problems = []
    for r in bad.itertuples():
        what = []
        if r.detected_order != SPEC_TRAINING_PRBS or not r.locked:
            sent = f"PRBS{r.detected_order}" if r.detected_order > 0 else "no O.150 PRBS"
            what.append(f"PRBS31 checker did not verify it ({sent} received)")
        elif r.locks != 1:
            what.append(f"PRBS31 checker lost lock ({r.locks} locks)")
        if r.symbols_per_set != SPEC_TRAINING_SYMBOLS:
            what.append(f"{r.symbols_per_set}-symbol sets")
        problems.append(f"{r.link} {r.direction} (round {r.round}): " + ", ".join(what))
    checked = int(sets["bits_checked"].sum())
    return clause.verdict(
        "fail" if len(bad) else "pass",
        measured=float(len(bad)),
        limit=0.0,
        unit="receivers",
        basis="measured",
        evidence=(evidence("training_sets", bad["check_id"] if len(bad) else sets["check_id"]),),
        detail=_listed(problems)
        if problems
        else (
            f"{len(sets)} receivers verified {SPEC_TRAINING_SYMBOLS}-symbol PRBS31 sets "
            f"({checked} bits checked, {int(sets['errors'].sum())} errors)"
        ),
    )


def _l0_entries(states: pd.DataFrame) -> pd.DataFrame:
    """Each L0 entry with the start of the interval it closes (the previous L0 exit)."""
    ordered = states.sort_values(["link", "state_id"])
    rows = []
    for link, group in ordered.groupby("link", sort=True):
        since = -math.inf
        for r in group.itertuples():
            if r.state == State.L0.value:
                rows.append((r.state_id, link, since, r.t_enter_ns))
                since = r.t_exit_ns if math.isfinite(r.t_exit_ns) else math.inf
    return pd.DataFrame(rows, columns=["state_id", "link", "since_ns", "t_ns"])


@judge("phy.eq_level3")
def eq_level3(ctx: RunContext) -> Verdict:
    clause = CLAUSES["phy.eq_level3"]
    states, eq = _table(ctx, "link_states"), _table(ctx, "eq")
    if states is None or eq is None:
        return clause.not_applicable("no link training was modelled")
    entries = _l0_entries(states)
    if entries.empty:
        return clause.not_applicable("no link entered L0")
    by_link = {link: group for link, group in eq.groupby("link")}
    problems, bad_states, bad_eq = [], [], []
    for entry in entries.itertuples():
        rows = by_link.get(entry.link, eq.iloc[:0])
        rows = rows[(rows["t_start_ns"] >= entry.since_ns) & (rows["t_end_ns"] <= entry.t_ns)]
        if rows.empty:
            problems.append(f"{entry.link} entered L0 at {entry.t_ns / 1e3:.2f} µs without EQ")
            bad_states.append(entry.state_id)
            continue
        last = rows[rows["round"] == rows["round"].max()]
        ran = set(last["phase"])
        missing = [p for p in range(len(EQ_PHASES)) if p not in ran]
        above = last[(last["phase"] > 0) & ~(last["ber"] < EQ_BER_TARGET)]
        if missing or len(above):
            what = []
            if missing:
                what.append("phase " + ", ".join(map(str, missing)) + " not run")
            for r in above.itertuples():
                what.append(f"phase {r.phase} ended at BER {r.ber:.2g}")
            problems.append(
                f"{entry.link} entered L0 at {entry.t_ns / 1e3:.2f} µs: " + "; ".join(what)
            )
            bad_states.append(entry.state_id)
            bad_eq.extend(last["eq_id"])
    worst = float(eq.loc[eq["phase"] > 0, "ber"].max()) if (eq["phase"] > 0).any() else None
    return clause.verdict(
        "fail" if problems else "pass",
        measured=float(len(problems)),
        limit=0.0,
        unit="L0 entries",
        basis="measured",
        evidence=(evidence("link_states", bad_states), evidence("eq", bad_eq))
        if problems
        else (evidence("link_states", entries["state_id"]),),
        detail=_listed(problems)
        if problems
        else (
            f"all {len(entries)} L0 entries followed phases 0-3 below BER {EQ_BER_TARGET:g}"
            + (f" (worst phase BER {worst:.2g})" if worst is not None else "")
        ),
    )


@judge("phy.phase_alignment")
def phase_alignment(ctx: RunContext) -> Verdict:
    clause = CLAUSES["phy.phase_alignment"]
    cdr = _table(ctx, "cdr")
    if cdr is None or cdr.empty:
        return clause.not_applicable("no CDR acquisition was recorded")
    lock = cdr["lock_time_ui"].to_numpy(dtype=float)
    residual = cdr["residual_max_ui"].to_numpy(dtype=float)
    late = ~(lock <= LOCK_WINDOW_UI)
    loose = ~(residual <= MAX_PHASE_ERROR_UI) & ~late
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
        measured, limit, op = float(np.max(lock)), LOCK_WINDOW_UI, "<="
    else:
        measured, limit, op = float(np.nanmax(residual)), MAX_PHASE_ERROR_UI, "<="
    return clause.verdict(
        "fail" if len(bad) else "pass",
        measured=measured,
        op=op,
        limit=limit,
        unit="UI",
        basis="measured",
        evidence=(evidence("cdr", bad["cdr_id"] if len(bad) else cdr["cdr_id"]),),
        detail=(_listed(problems) + "; " if problems else "") + summary,
    )


# Recoveries another layer asks for (sitssim/phy/stage.py, PhyStage.recover): not the BER
# monitor's requests, and counted through by its training cycles, which ran before them.
LINK_LAYER_RECOVERY = "replay_rollover"


def _monitor_view(states: pd.DataFrame) -> pd.DataFrame:
    """``link_states`` as the BER monitor saw them: each Recovery episode the link layer
    asked for is dropped, and the L0 rows around it are joined (the first keeps its id)."""
    kept: list[dict] = []
    for _, group in states.sort_values(["link", "state_id"]).groupby("link", sort=True):
        l0: dict | None = None
        skipping = False
        for r in group.to_dict("records"):
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
            r = dict(r)
            kept.append(r)
            l0 = r if r["state"] == State.L0.value else None
        if skipping:
            l0["t_exit_ns"] = math.nan
    return pd.DataFrame(kept, columns=states.columns)


def _retrain_requests(states: pd.DataFrame) -> dict[str, list[tuple[int, float]]]:
    """Per link, (state_id, time) of every Recovery.RcvrLock entered straight from L0."""
    out: dict[str, list[tuple[int, float]]] = {}
    for link, group in states.sort_values(["link", "state_id"]).groupby("link", sort=True):
        previous = None
        for r in group.itertuples():
            if r.state == State.RECOVERY_RCVRLOCK.value and previous == State.L0.value:
                out.setdefault(link, []).append((r.state_id, r.t_enter_ns))
            previous = r.state
    return out


@judge("phy.retrain_trigger")
def retrain_trigger(ctx: RunContext) -> Verdict:
    clause = CLAUSES["phy.retrain_trigger"]
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
    problems, bad_windows, bad_states = [], [], []
    for entry in entries.itertuples():
        l0_exit = float(exits[entry.state_id])
        span_end = l0_exit if math.isfinite(l0_exit) else math.inf
        mine = by_link.get(entry.link, windows.iloc[:0])
        mine = mine[
            (mine["t_start_ns"] >= entry.t_ns - TIME_TOLERANCE_NS)
            & (mine["t_ns"] <= span_end + TIME_TOLERANCE_NS)
        ]
        due = _first_due(mine)
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
                    f"{entry.link}: {SPEC_RETRAIN_WINDOWS} cycles above "
                    f"{SPEC_RETRAIN_THRESHOLD:g} by {due_t / 1e3:.2f} µs, no retraining"
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
                f"{SPEC_RETRAIN_WINDOWS} consecutive cycles above {SPEC_RETRAIN_THRESHOLD:g}"
            )
            bad_states.append(request[0])
            bad_windows.extend(mine["window_id"].tail(2 * SPEC_RETRAIN_WINDOWS))
    above = int((windows["errors"] / windows["bits"] > SPEC_RETRAIN_THRESHOLD).sum())
    n_requests = sum(len(v) for v in requests.values())
    ev = []
    if bad_windows:
        ev.append(evidence("ber_windows", bad_windows))
    if bad_states:
        ev.append(evidence("link_states", bad_states))
    if not problems:
        ev.append(evidence("link_states", [sid for v in requests.values() for sid, _ in v]))
    return clause.verdict(
        "fail" if problems else "pass",
        measured=float(len(problems)),
        limit=0.0,
        unit="mistimed retrainings",
        basis="measured",
        evidence=tuple(ev),
        detail=_listed(problems)
        if problems
        else (
            f"{n_requests} retraining(s), each when {SPEC_RETRAIN_WINDOWS} consecutive cycles "
            f"exceeded {SPEC_RETRAIN_THRESHOLD:g}; {above} of {len(windows)} cycle counts "
            f"above it"
        ),
    )


def _first_due(windows: pd.DataFrame) -> tuple[int, float] | None:
    """The window at which some direction completes the spec's run of cycles above threshold."""
    best: tuple[int, float] | None = None
    for _, rows in windows.sort_values("t_ns").groupby("direction", sort=True):
        above = (rows["errors"] / rows["bits"] > SPEC_RETRAIN_THRESHOLD).to_numpy()
        count = np.cumsum(above)
        run = count - np.maximum.accumulate(np.where(above, 0, count))
        hits = np.flatnonzero(run >= SPEC_RETRAIN_WINDOWS)
        if hits.size:
            row = rows.iloc[int(hits[0])]
            if best is None or row["t_ns"] < best[1]:
                best = (int(row["window_id"]), float(row["t_ns"]))
    return best


@judge("phy.reset_to_l0")
def reset_to_l0(ctx: RunContext) -> Verdict:
    clause = CLAUSES["phy.reset_to_l0"]
    links, states = _table(ctx, "phy_links"), _table(ctx, "link_states")
    if links is None or states is None or links.empty:
        return clause.not_applicable("no links were trained")
    l0 = states[states["state"] == State.L0.value].sort_values("t_enter_ns")
    first = l0.groupby("link").first()
    times_us = first["t_enter_ns"].reindex(links["link"]).to_numpy(dtype=float) / 1e3
    times_us = np.where(np.isnan(times_us), np.inf, times_us)
    late = times_us > RESET_TO_L0_US
    names = links["link"].to_numpy()
    order = np.argsort(-times_us, kind="stable")
    slow = [
        f"{names[i]} " + (f"at {times_us[i]:.1f} µs" if math.isfinite(times_us[i]) else "never")
        for i in order
        if late[i]
    ]
    rows = first["state_id"].reindex(names[late]).dropna()
    worst = int(order[0])
    return clause.verdict(
        "fail" if late.any() else "pass",
        measured=float(times_us[worst]),
        limit=RESET_TO_L0_US,
        unit="µs",
        basis="measured",
        evidence=(
            evidence(
                "link_states",
                rows if late.any() else first["state_id"].reindex(names[[worst]]).dropna(),
            ),
        ),
        detail=(
            f"{late.sum()} of {len(names)} links reached L0 after {RESET_TO_L0_US:g} µs: "
            + _listed(slow)
        )
        if late.any()
        else (
            f"all {len(names)} links in L0 by {times_us[worst]:.1f} µs "
            f"({names[worst]} last; first at {np.min(times_us):.1f} µs)"
        ),
    )
