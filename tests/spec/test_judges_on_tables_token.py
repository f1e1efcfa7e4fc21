"""The L5 token judges on hand-built tables: frames in their fields' ranges and round-tripping
through 14 bytes, forwarders passing token_id and ts_logical on unchanged, emission no sooner
than latency_hint + 5 ms (else 5 ms), MHF layouts equal to the real token count, and FP8
layers without a value beyond their format.
"""

from __future__ import annotations

import pytest
from spec.judge_tables import figures, judge, not_applicable, shown, table

from sitssim.protocol.token_frames import TokenFrame, encode

MS = 1_000_000
NO_FRAMES = "no token frames were produced: add an inference workload"
HOP = (
    "row",
    "workload",
    "request",
    "token_id",
    "ts_logical",
    "latency_hint",
    "stage",
    "to_stage",
    "born",
    "t_emit_ns",
    "t_arrive_ns",
    "wire",
)


def _hop(token_id, ts, hint, stage, to_stage, born, t_emit, request=0, workload=0, wire=None):
    """One frame hop, its wire bytes the codec's unless given."""
    if wire is None:
        wire = encode(TokenFrame(token_id, hint, ts))
    return [workload, request, token_id, ts, hint, stage, to_stage, born, t_emit, t_emit + 10, wire]


def _tokens(hops: list[list]) -> dict:
    return {"tokens": table(HOP, [(10 + i, *h) for i, h in enumerate(hops)])}


# --- token.frame_format ---------------------------------------------------------------


def test_frames_in_range_that_round_trip_pass() -> None:
    hops = [
        _hop(0, 0, -(2**15), "s", "client", True, 0),
        _hop(2**32 - 1, 2**64 - 1, 2**15 - 1, "s", "client", True, 0),
        _hop(7, 3, 30, "s", "client", True, 0),
    ]
    verdict = judge("token.frame_format", **_tokens(hops))
    assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "bad frames", "measured")
    assert verdict.evidence == ()
    assert verdict.detail == (
        "3 frame hops in range and round-tripping bit-exactly through the 14-byte codec; "
        "latency_hint -32768..32767 ms"
    )


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("latency_hint", 2**15, "latency_hint outside [-32768, 32767] (from 32768 to 32768)"),
        ("latency_hint", -(2**15) - 1, "latency_hint outside [-32768, 32767]"),
        ("token_id", 2**32, "token_id outside [0, 4294967295]"),
        ("token_id", -1, "token_id outside [0, 4294967295] (from -1 to -1)"),
    ],
)
def test_a_field_out_of_range_fails_its_frame(field: str, value: int, said: str) -> None:
    good = _hop(7, 3, 30, "s", "client", True, 0)
    bad = _hop(7, 3, 30, "s", "client", True, 0, wire=b"")
    bad[HOP.index(field) - 1] = value
    verdict = judge("token.frame_format", **_tokens([good, bad, good]))
    assert figures(verdict) == ("fail", 1.0, "<=", 0.0, "bad frames", "measured")
    assert shown(verdict) == [("tokens", [11], 1)]
    assert verdict.detail.startswith("1 frames with ") and said in verdict.detail
    assert "round-trip" not in verdict.detail


@pytest.mark.parametrize(
    "wire",
    [
        encode(TokenFrame(8, 30, 3)),  # another token's bytes
        encode(TokenFrame(7, 30, 4)),  # another stamp
        encode(TokenFrame(7, 31, 3)),  # another hint
        encode(TokenFrame(7, 30, 3))[:13],  # a byte short
        encode(TokenFrame(7, 30, 3)) + b"\0",  # a byte over
    ],
)
def test_an_in_range_frame_whose_bytes_do_not_round_trip_fails(wire: bytes) -> None:
    good = _hop(7, 3, 30, "s", "client", True, 0)
    bad = _hop(7, 3, 30, "s", "client", True, 0, wire=wire)
    verdict = judge("token.frame_format", **_tokens([good, good, bad]))
    assert figures(verdict)[:2] == ("fail", 1.0)
    assert shown(verdict) == [("tokens", [12], 1)]
    assert verdict.detail == "1 in-range frames whose wire bytes do not round-trip"


def test_no_whole_frame_on_the_wire_fails_every_frame() -> None:
    bad = _hop(7, 3, 30, "s", "client", True, 0, wire=b"\0" * 13)
    verdict = judge("token.frame_format", **_tokens([bad, bad]))
    assert (verdict.measured, shown(verdict)) == (2.0, [("tokens", [10, 11], 2)])


def test_frame_format_without_frames_is_not_applicable() -> None:
    assert not_applicable(judge("token.frame_format"), NO_FRAMES)
    assert not_applicable(judge("token.frame_format", **_tokens([])), NO_FRAMES)


# --- token.passthrough ----------------------------------------------------------------


def _through(frames: list[tuple], request: int = 0, workload: int = 0) -> list[list]:
    """Frames (token_id, ts) born at src, sent to fwd every 10 ms, forwarded to the client
    in the same order 1 ms later."""
    hops = []
    for k, (token_id, ts) in enumerate(frames):
        t = k * 10 * MS
        hops.append(_hop(token_id, ts, 0, "src", "fwd", True, t, request, workload))
    for k, (token_id, ts) in enumerate(frames):
        t = k * 10 * MS + MS
        hops.append(_hop(token_id, ts, 0, "fwd", "client", False, t, request, workload))
    return hops


FRAMES = [(100, 0), (101, 1), (102, 2)]


def test_frames_forwarded_unchanged_pass() -> None:
    verdict = judge("token.passthrough", **_tokens(_through(FRAMES)))
    assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "frames", "measured")
    assert verdict.evidence == ()
    assert verdict.detail == "3 frames forwarded with token_id and ts_logical unchanged, in order"


def test_requests_may_interleave_on_a_forwarder() -> None:
    a, b = _through(FRAMES, request=0), _through([(200, 0), (201, 1)], request=1)
    # b's frames reach fwd and leave it between a's.
    for hop in b:
        hop[HOP.index("t_emit_ns") - 1] += 5 * MS
        hop[HOP.index("t_arrive_ns") - 1] += 5 * MS
    verdict = judge("token.passthrough", **_tokens(a + b))
    assert (verdict.verdict, verdict.measured) == ("pass", 0.0)
    assert verdict.detail.startswith("5 frames forwarded")


@pytest.mark.parametrize(
    ("forwarded", "defect", "count"),
    [
        ([(100, 0), (999, 1), (102, 2)], "renumbered 1", 1),
        ([(100, 0), (101, 7), (102, 2)], "renumbered 1", 1),
        ([(100, 0), (102, 2)], "lost 1", 1),
        ([(100, 0), (101, 1), (101, 1), (102, 2)], "duplicated 1", 1),
        ([(101, 1), (100, 0), (102, 2)], "order_violations 1", 1),
        ([(999, 0), (102, 2)], "renumbered 1, lost 1", 2),
    ],
)
def test_a_forwarder_that_changes_the_frames_fails(
    forwarded: list[tuple], defect: str, count: int
) -> None:
    hops = _through(FRAMES)[:3]
    for k, (token_id, ts) in enumerate(forwarded):
        hops.append(_hop(token_id, ts, 0, "fwd", "client", False, k * 10 * MS + MS))
    verdict = judge("token.passthrough", **_tokens(hops))
    assert figures(verdict) == ("fail", float(count), "<=", 0.0, "frames", "measured")
    sent = list(range(13, 13 + len(forwarded)))
    assert shown(verdict) == [("tokens", sent, len(sent))]
    assert verdict.detail == f"workload 0 fwd: {defect}"


def test_only_the_requests_a_forwarder_broke_are_shown() -> None:
    a = _through(FRAMES, request=0)
    b = _through([(200, 0), (201, 1)], request=1)
    b[3][HOP.index("token_id") - 1] = 999
    verdict = judge("token.passthrough", **_tokens(a + b))
    assert (verdict.measured, shown(verdict)) == (1.0, [("tokens", [18, 19], 2)])


def test_each_workload_is_judged_on_its_own() -> None:
    hops = _through(FRAMES, workload=0) + _through(FRAMES, workload=1)
    hops[-1][HOP.index("ts_logical") - 1] = 9
    verdict = judge("token.passthrough", **_tokens(hops))
    assert verdict.detail == "workload 1 fwd: renumbered 1"
    assert shown(verdict) == [("tokens", [19, 20, 21], 3)]


def test_every_workload_and_every_forwarder_is_checked_and_counted() -> None:
    two = _through(FRAMES, workload=1) + _through(FRAMES, workload=0)
    verdict = judge("token.passthrough", **_tokens(two))
    assert verdict.detail == "6 frames forwarded with token_id and ts_logical unchanged, in order"
    # Both workloads renumber a frame: counted together, shown workload by workload.
    two[4][HOP.index("token_id") - 1] = 999
    two[10][HOP.index("token_id") - 1] = 999
    verdict = judge("token.passthrough", **_tokens(two))
    assert verdict.measured == 2.0
    assert shown(verdict) == [("tokens", [19, 20, 21, 13, 14, 15], 6)]
    assert verdict.detail == "workload 0 fwd: renumbered 1; workload 1 fwd: renumbered 1"


def test_a_second_forwarder_is_checked_after_a_first_that_passed_frames_on() -> None:
    """src -> a -> b -> client: a forwards unchanged, b drops a frame."""
    hops = [
        *(_hop(100 + k, k, 0, "src", "a", True, k * MS) for k in range(3)),
        *(_hop(100 + k, k, 0, "a", "b", False, k * MS + 1) for k in range(3)),
        *(_hop(100 + k, k, 0, "b", "client", False, k * MS + 2) for k in range(2)),
    ]
    verdict = judge("token.passthrough", **_tokens(hops))
    assert (verdict.measured, verdict.detail) == (1.0, "workload 0 b: lost 1")
    assert shown(verdict) == [("tokens", [16, 17], 2)]


def test_a_stage_that_creates_frames_is_an_origin_not_a_forwarder() -> None:
    """fwd also samples a frame of its own: it is then judged as the origin it is."""
    hops = _through(FRAMES)
    hops.append(_hop(500, 9, 0, "fwd", "client", True, 50 * MS))
    verdict = judge("token.passthrough", **_tokens(hops))
    assert not_applicable(verdict, "no stage forwarded token frames")


def test_passthrough_without_frames_is_not_applicable() -> None:
    assert not_applicable(judge("token.passthrough"), NO_FRAMES)
    direct = [_hop(1, 0, 0, "src", "client", True, 0)]
    assert not_applicable(
        judge("token.passthrough", **_tokens(direct)), "no stage forwarded token frames"
    )


# --- token.emit_window ----------------------------------------------------------------


def _emitted(*streams: list[tuple[int, int]], workload: int = 0) -> list[list]:
    """Per request, frames emitted as (ms after the previous frame, latency_hint)."""
    hops = []
    for request, frames in enumerate(streams):
        t = 0
        for k, (gap_ns, hint) in enumerate(frames):
            t += gap_ns
            hops.append(_hop(k, k, hint, "emitter", "client", False, t, request, workload))
    return hops


def test_frames_spaced_by_exactly_their_window_pass() -> None:
    """Windows: hint 3 -> 8 ms, hint 0 -> 5 ms, hint -1 -> 5 ms."""
    stream = [(0, 9), (8 * MS, 3), (5 * MS, 0), (5 * MS, -1)]
    hops = [*_emitted(stream), _hop(0, 0, 0, "src", "emitter", True, 0)]
    verdict = judge("token.emit_window", **_tokens(hops))
    assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "frames", "measured")
    assert verdict.evidence == ()
    assert verdict.detail == (
        "0 of 4 frames emitted sooner than latency_hint + 5 ms (else 5 ms) after their "
        "predecessor; tightest gap minus window 0.000 ms"
    )


@pytest.mark.parametrize(
    ("stream", "late_by"),
    [
        ([(0, 0), (8 * MS - 1, 3)], -1e-6),
        ([(0, 0), (5 * MS - 1, 0)], -1e-6),
        ([(0, 0), (5 * MS - 1, -1)], -1e-6),
    ],
)
def test_a_frame_a_nanosecond_too_soon_fails(stream: list, late_by: float) -> None:
    verdict = judge("token.emit_window", **_tokens(_emitted([(0, 0), (6 * MS, 0)], stream)))
    assert figures(verdict) == ("fail", 1.0, "<=", 0.0, "frames", "measured")
    assert shown(verdict) == [("tokens", [13], 1)]
    assert verdict.detail.endswith(f"tightest gap minus window {late_by:.3f} ms")


def test_spacing_is_judged_per_request_and_per_workload() -> None:
    """Two requests' frames 1 ms apart are not spaced against each other."""
    a = _emitted([(0, 0), (5 * MS, 0)], [(MS, 0), (5 * MS, 0)])
    b = _emitted([(0, 0), (7 * MS, 2)], workload=1)
    verdict = judge("token.emit_window", **_tokens(a + b))
    assert (verdict.verdict, verdict.measured) == ("pass", 0.0)
    assert verdict.detail.endswith("0.000 ms")
    b = _emitted([(0, 0), (6 * MS, 2)], workload=1)
    failing = judge("token.emit_window", **_tokens(a + b))
    assert (failing.measured, shown(failing)) == (1.0, [("tokens", [15], 1)])
    assert failing.detail.endswith("-1.000 ms")


def test_frames_too_soon_are_shown_workload_by_workload() -> None:
    late = _emitted([(0, 0), (4 * MS, 0)], workload=1) + _emitted([(0, 0), (MS, 0)])
    verdict = judge("token.emit_window", **_tokens(late))
    assert (verdict.measured, shown(verdict)) == (2.0, [("tokens", [13, 11], 2)])


def test_emit_window_with_nothing_to_space_is_not_applicable() -> None:
    assert not_applicable(judge("token.emit_window"), NO_FRAMES)
    forwarded = [_hop(1, 0, 0, "src", "fwd", True, 0)]
    assert not_applicable(
        judge("token.emit_window", **_tokens(forwarded)), "no frames were emitted"
    )
    single = _emitted([(0, 0)], [(0, 4)])
    assert not_applicable(
        judge("token.emit_window", **_tokens(single)),
        "no request emitted two frames: no spacing to judge",
    )


# --- token.mhf_kv_alignment -----------------------------------------------------------

LAYOUT = ("row", "marked", "real_tokens", "kv_length", "attention_mask_length", "rope_offset")


def _layouts(*rows: tuple) -> dict:
    """(marked, real, kv, mask, rope) per prompt buffer, rows from 10."""
    return {"mhf_layouts": table(LAYOUT, [(10 + i, *r) for i, r in enumerate(rows)])}


def test_lengths_equal_to_the_real_count_pass() -> None:
    verdict = judge(
        "token.mhf_kv_alignment",
        **_layouts((True, 10, 10, 10, 10), (False, 5, 9, 9, 9), (True, 20, 20, 20, 20)),
    )
    assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "tokens", "measured")
    assert verdict.evidence == ()
    assert verdict.detail == (
        "2 marked prompt buffers: KV length, attention mask and RoPE offset equal the real "
        "token count"
    )


@pytest.mark.parametrize(
    ("layout", "measured", "said"),
    [
        ((True, 20, 21, 20, 20), 1.0, "kv_length off by 0..1"),
        ((True, 20, 20, 19, 20), 1.0, "attention_mask_length off by -1..0"),
        ((True, 20, 20, 20, 18), 2.0, "rope_offset off by -2..0"),
        ((True, 20, 21, 20, 17), 3.0, "kv_length off by 0..1; rope_offset off by -3..0"),
    ],
)
def test_a_length_off_the_real_count_fails_by_its_largest_deviation(
    layout: tuple, measured: float, said: str
) -> None:
    verdict = judge(
        "token.mhf_kv_alignment",
        **_layouts((True, 10, 10, 10, 10), layout, (False, 5, 9, 9, 9)),
    )
    assert figures(verdict) == ("fail", measured, "<=", 0.0, "tokens", "measured")
    assert shown(verdict) == [("mhf_layouts", [11], 1)]
    assert verdict.detail == f"1 of 2 marked prompt buffers: {said}"


def test_mhf_alignment_without_marked_buffers_is_not_applicable() -> None:
    reason = "no MHF-marked token buffers (mhf: off)"
    assert not_applicable(judge("token.mhf_kv_alignment"), reason)
    unmarked = _layouts((False, 5, 9, 9, 9))
    assert not_applicable(judge("token.mhf_kv_alignment", **unmarked), reason)


# --- engine.fp8_overflow --------------------------------------------------------------

LAYERS = ("row", "layer", "format", "std", "amax", "overflows", "values", "rel_error")


def _layers(*layers: tuple[str, int]) -> dict:
    """(format, overflows) per layer, rows from 10."""
    rows = [
        (10 + k, k, fmt, 1.0, 448.0, over, 1000, 0.01 * (k + 1))
        for k, (fmt, over) in enumerate(layers)
    ]
    return {"engine_layers": table(LAYERS, rows)}


def test_fp8_layers_without_an_overflow_pass() -> None:
    verdict = judge("engine.fp8_overflow", **_layers(("E4M3", 0), ("bf16", 7), ("E5M2", 0)))
    assert figures(verdict) == ("pass", 0.0, "<=", 0.0, "values", "measured")
    assert verdict.evidence == ()
    assert verdict.detail == (
        "2 layers quantised (1 E4M3, 1 E5M2), no value beyond its format; relative error up to 0.03"
    )


def test_fp8_overflows_are_counted_over_every_layer() -> None:
    verdict = judge(
        "engine.fp8_overflow",
        **_layers(("E4M3", 0), ("E4M3", 3), ("bf16", 9), ("E5M2", 1)),
    )
    assert figures(verdict) == ("fail", 4.0, "<=", 0.0, "values", "measured")
    assert shown(verdict) == [("engine_layers", [11, 13], 2)]
    assert verdict.detail == (
        "layer 1 (E4M3, σ=1, |x|max=448): 3 of 1000 values beyond range; "
        "layer 3 (E5M2, σ=1, |x|max=448): 1 of 1000 values beyond range"
    )


def test_fp8_overflow_without_fp8_layers_is_not_applicable() -> None:
    reason = "adaptive FP8 is off (no engine.fp8 section)"
    assert not_applicable(judge("engine.fp8_overflow"), reason)
    assert not_applicable(judge("engine.fp8_overflow", **_layers(("bf16", 3))), reason)
