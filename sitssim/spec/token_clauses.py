"""Judges of the L5 token clauses (§1, §2.4, §3.2), read from the inference tables.

``tokens`` holds one row per frame hop as the sender put it on the wire
(``stage`` → ``to_stage``, ``born`` when the sender created the frame);
``mhf_layouts`` what the consumer derived from each prompt buffer;
``engine_layers`` the adaptive FP8 outcome per layer. Every table has a
``row`` id column, which evidence points at.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sitssim.protocol.token_frames import (
    FIELD_RANGES,
    FRAME_SIZE_BYTES,
    NS_PER_MS,
    check_emit_spacing,
    check_passthrough,
    decode_frames,
    emit_windows_ms,
    field_in_range,
)
from sitssim.spec.clause import Clause
from sitssim.spec.context import Judge, RunContext
from sitssim.spec.verdict import Verdict, evidence

EMITTER = "emitter"
CLIENT = "client"
FIELDS = ("token_id", "latency_hint", "ts_logical")
DEFECTS = ("renumbered", "lost", "duplicated", "order_violations")
FP8_FORMATS = ("E4M3", "E5M2")


def _table(ctx: RunContext, name: str) -> pd.DataFrame | None:
    table = ctx.tables.get(name)
    return None if table is None or table.empty else table


def round_trip_ok(tokens: pd.DataFrame) -> np.ndarray:
    """Per row: the recorded 14 wire bytes decode to exactly the recorded fields."""
    wire = tokens["wire"]
    whole = (wire.map(len) == FRAME_SIZE_BYTES).to_numpy()
    ok = np.zeros(len(tokens), dtype=bool)
    if whole.any():
        decoded = decode_frames(b"".join(wire[whole]))
        same = np.ones(int(whole.sum()), dtype=bool)
        for name in FIELDS:
            recorded = tokens.loc[whole, name].to_numpy()
            in_field = field_in_range(name, recorded)
            same &= in_field & (decoded[name].astype(object) == recorded.astype(object))
        ok[whole] = same
    return ok


def frame_format(clause: Clause, ctx: RunContext) -> Verdict:
    tokens = _table(ctx, "tokens")
    if tokens is None:
        return clause.not_applicable("no token frames were produced: add an inference workload")
    in_range = np.ones(len(tokens), dtype=bool)
    problems = []
    for name in FIELDS:
        ok = field_in_range(name, tokens[name].to_numpy())
        if not ok.all():
            values = tokens.loc[~ok, name]
            lo, hi = FIELD_RANGES[name]
            problems.append(
                f"{(~ok).sum()} frames with {name} outside [{lo}, {hi}] "
                f"(from {values.min()} to {values.max()})"
            )
        in_range &= ok
    trips = round_trip_ok(tokens)
    broken = in_range & ~trips
    if broken.any():
        problems.append(f"{broken.sum()} in-range frames whose wire bytes do not round-trip")
    bad = ~(in_range & trips)
    hints = tokens["latency_hint"]
    return clause.verdict_on(
        "count",
        "fail" if bad.any() else "pass",
        measured=float(bad.sum()),
        basis="measured",
        evidence=(evidence("tokens", tokens.loc[bad, "row"]),) if bad.any() else (),
        detail="; ".join(problems)
        or (
            f"{len(tokens)} frame hops in range and round-tripping bit-exactly through the "
            f"14-byte codec; latency_hint {hints.min()}..{hints.max()} ms"
        ),
    )


def _same_per_request(received: pd.DataFrame, sent: pd.DataFrame) -> bool:
    """The cheap common case: per request, the same frames in the same order."""
    key = ["request", "token_id", "ts_logical"]
    a = received.sort_values("request", kind="stable")[key].to_numpy()
    b = sent.sort_values("request", kind="stable")[key].to_numpy()
    return a.shape == b.shape and bool((a == b).all())


def passthrough(clause: Clause, ctx: RunContext) -> Verdict:
    tokens = _table(ctx, "tokens")
    if tokens is None:
        return clause.not_applicable("no token frames were produced: add an inference workload")
    total = 0
    checked = 0
    culprits: list[str] = []
    bad_rows: list[int] = []
    for workload, frames in tokens.groupby("workload", sort=True):
        origins = set(frames.loc[frames["born"], "stage"])
        forwarders = sorted(set(frames["to_stage"]) - origins - {CLIENT})
        for stage in forwarders:
            received = frames[frames["to_stage"] == stage].sort_values("t_arrive_ns", kind="stable")
            sent = frames[frames["stage"] == stage].sort_values("t_emit_ns", kind="stable")
            checked += len(received)
            if _same_per_request(received, sent):
                continue
            report = check_passthrough(
                received["token_id"].to_numpy(),
                received["ts_logical"].to_numpy(),
                sent["token_id"].to_numpy(),
                sent["ts_logical"].to_numpy(),
                received["request"].to_numpy(),
                sent["request"].to_numpy(),
            )
            defects = report[list(DEFECTS)].sum()
            if defects.sum():
                total += int(defects.sum())
                summary = ", ".join(f"{k} {v}" for k, v in defects.items() if v)
                culprits.append(f"workload {workload} {stage}: {summary}")
                bad_requests = report.index[report[list(DEFECTS)].sum(axis=1) > 0]
                bad_rows.extend(sent.loc[sent["request"].isin(bad_requests), "row"])
    if not checked:
        return clause.not_applicable("no stage forwarded token frames")
    return clause.verdict_on(
        "count",
        "fail" if total else "pass",
        measured=float(total),
        basis="measured",
        evidence=(evidence("tokens", bad_rows),) if bad_rows else (),
        detail="; ".join(culprits)
        or f"{checked} frames forwarded with token_id and ts_logical unchanged, in order",
    )


def emit_window(clause: Clause, ctx: RunContext) -> Verdict:
    tokens = _table(ctx, "tokens")
    if tokens is None:
        return clause.not_applicable("no token frames were produced: add an inference workload")
    emitted = tokens[tokens["stage"] == EMITTER]
    if emitted.empty:
        return clause.not_applicable("no frames were emitted")
    too_soon: list[int] = []
    slack_ms = np.inf
    for _, frames in emitted.groupby("workload", sort=True):
        emit = frames["t_emit_ns"].to_numpy().astype(np.int64)
        hints = frames["latency_hint"].to_numpy().astype(np.int64)
        streams = frames["request"].to_numpy()
        flagged = check_emit_spacing(emit, hints, streams)
        too_soon.extend(frames["row"].to_numpy()[flagged])
        for _, stream in frames.groupby("request", sort=False):
            if len(stream) > 1:
                gaps = np.diff(stream["t_emit_ns"].to_numpy()) / NS_PER_MS
                windows = emit_windows_ms(stream["latency_hint"].to_numpy()[1:])
                slack_ms = min(slack_ms, float((gaps - windows).min()))
    if not np.isfinite(slack_ms):
        return clause.not_applicable("no request emitted two frames: no spacing to judge")
    return clause.verdict_on(
        "count",
        "fail" if too_soon else "pass",
        measured=float(len(too_soon)),
        basis="measured",
        evidence=(evidence("tokens", too_soon),) if too_soon else (),
        detail=(
            f"{len(too_soon)} of {len(emitted)} frames emitted sooner than latency_hint + 5 ms "
            f"(else 5 ms) after their predecessor; tightest gap minus window {slack_ms:.3f} ms"
        ),
    )


def mhf_kv_alignment(clause: Clause, ctx: RunContext) -> Verdict:
    layouts = _table(ctx, "mhf_layouts")
    if layouts is None or not layouts["marked"].any():
        return clause.not_applicable("no MHF-marked token buffers (mhf: off)")
    marked = layouts[layouts["marked"]]
    real = marked["real_tokens"].to_numpy()
    deviation = np.zeros(len(marked), dtype=np.int64)
    found = []
    for name in ("kv_length", "attention_mask_length", "rope_offset"):
        off = marked[name].to_numpy() - real
        if off.any():
            found.append(f"{name} off by {off.min()}..{off.max()}")
        deviation = np.maximum(deviation, np.abs(off))
    bad = deviation > 0
    return clause.verdict_on(
        "deviation",
        "fail" if bad.any() else "pass",
        measured=float(deviation.max()),
        basis="measured",
        evidence=(evidence("mhf_layouts", marked.loc[bad, "row"]),) if bad.any() else (),
        detail=(
            f"{bad.sum()} of {len(marked)} marked prompt buffers: " + "; ".join(found)
            if found
            else f"{len(marked)} marked prompt buffers: KV length, attention mask and RoPE "
            "offset equal the real token count"
        ),
    )


def fp8_overflow(clause: Clause, ctx: RunContext) -> Verdict:
    layers = _table(ctx, "engine_layers")
    if layers is None or not layers["format"].isin(FP8_FORMATS).any():
        return clause.not_applicable("adaptive FP8 is off (no engine.fp8 section)")
    fp8 = layers[layers["format"].isin(FP8_FORMATS)]
    over = fp8[fp8["overflows"] > 0]
    detail = (
        "; ".join(
            f"layer {r.layer} ({r.format}, σ={r.std:.3g}, |x|max={r.amax:.4g}): "
            f"{r.overflows} of {r.values} values beyond range"
            for r in over.head(5).itertuples()
        )
        if len(over)
        else (
            f"{len(fp8)} layers quantised ({(fp8['format'] == 'E4M3').sum()} E4M3, "
            f"{(fp8['format'] == 'E5M2').sum()} E5M2), no value beyond its format; "
            f"relative error up to {fp8['rel_error'].max():.3g}"
        )
    )
    return clause.verdict_on(
        "count",
        "fail" if len(over) else "pass",
        measured=float(fp8["overflows"].sum()),
        basis="measured",
        evidence=(evidence("engine_layers", over["row"]),) if len(over) else (),
        detail=detail,
    )


JUDGES: dict[str, Judge] = {
    "token.frame_format": frame_format,
    "token.passthrough": passthrough,
    "token.emit_window": emit_window,
    "token.mhf_kv_alignment": mhf_kv_alignment,
    "engine.fp8_overflow": fp8_overflow,
}
