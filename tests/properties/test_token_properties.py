"""Hypothesis properties of the L5 token layer: token.frame_format, token.emit_window,
token.passthrough and token.mhf_kv_alignment."""

from dataclasses import replace

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from sitssim.protocol.token_frames import (
    FIELD_RANGES,
    NS_PER_MS,
    FrameRangeError,
    LogicalClock,
    Pacer,
    TokenFrame,
    check_emit_spacing,
    check_passthrough,
    decode,
    decode_frames,
    emit_windows_ms,
    encode,
    encode_frames,
    in_range,
    pack_frames,
)
from sitssim.workloads.mhf import MHF_MARKER, derive_layout, prepend_marker

FIELDS = tuple(FIELD_RANGES)
U64_MAX = 2**64 - 1


def _in_range(field: str) -> st.SearchStrategy[int]:
    lo, hi = FIELD_RANGES[field]
    return st.integers(lo, hi)


def _out_of_range(field: str) -> st.SearchStrategy[int]:
    lo, hi = FIELD_RANGES[field]
    return st.integers(lo - 2**70, lo - 1) | st.integers(hi + 1, hi + 2**70)


def _straddling(field: str) -> st.SearchStrategy[int]:
    """Values on both sides of the field's bounds, most of them near a bound."""
    lo, hi = FIELD_RANGES[field]
    near = st.sampled_from([lo - 1, lo, lo + 1, hi - 1, hi, hi + 1])
    return near | _in_range(field) | _out_of_range(field)


frames_st = st.builds(
    TokenFrame, _in_range("token_id"), _in_range("latency_hint"), _in_range("ts_logical")
)


def _columns(frames: list[TokenFrame]) -> tuple[list[int], list[int], list[int]]:
    return (
        [f.token_id for f in frames],
        [f.latency_hint for f in frames],
        [f.ts_logical for f in frames],
    )


@given(st.lists(frames_st, max_size=12))
def test_codec_round_trips_in_range_frames_bit_exactly(frames: list[TokenFrame]) -> None:
    """token.frame_format: every in-range frame round-trips bit-exactly, scalar and vectorised."""
    wires = [encode(f) for f in frames]
    assert all(len(w) == 14 for w in wires)
    assert [decode(w) for w in wires] == frames
    joined = encode_frames(*_columns(frames))
    assert joined == b"".join(wires)
    decoded = decode_frames(joined)
    assert [TokenFrame(*map(int, row)) for row in decoded.tolist()] == frames
    assert decoded.tobytes() == joined


@given(st.sampled_from(FIELDS), st.data())
def test_codec_rejects_every_out_of_range_field(field: str, data: st.DataObject) -> None:
    """token.frame_format: a value outside its field's range is refused, never wrapped."""
    frame = data.draw(frames_st)
    value = data.draw(_out_of_range(field))
    bad = replace(frame, **{field: value})
    try:
        encode(bad)
    except FrameRangeError as error:
        assert (error.field, error.value) == (field, value)
    else:
        raise AssertionError(f"{field}={value} was encoded")
    assert not in_range(*_columns([bad])).any()
    try:
        pack_frames(*_columns([frame, bad]))
    except FrameRangeError as error:
        assert (error.field, error.value, error.index) == (field, value, 1)
    else:
        raise AssertionError(f"{field}={value} was packed")


@given(
    st.lists(
        st.tuples(_straddling("token_id"), _straddling("latency_hint"), _straddling("ts_logical")),
        min_size=1,
        max_size=10,
    )
)
def test_scalar_and_vectorised_checks_agree(rows: list[tuple[int, int, int]]) -> None:
    """token.frame_format: the vectorised in_range mask says exactly which frames encode."""
    frames = [TokenFrame(*row) for row in rows]
    mask = in_range(*_columns(frames))
    for frame, ok in zip(frames, mask, strict=True):
        try:
            encode(frame)
        except FrameRangeError:
            assert not ok
        else:
            assert ok
    good = [f for f, ok in zip(frames, mask, strict=True) if ok]
    assert encode_frames(*_columns(good)) == b"".join(encode(f) for f in good)


hints_st = _in_range("latency_hint")


@given(
    st.lists(st.tuples(hints_st, st.integers(0, 10**11)), min_size=1, max_size=20),
    st.integers(0, 19),
)
def test_pacing_keeps_content_order_and_window(rows: list[tuple[int, int]], cut: int) -> None:
    """token.emit_window: pacing keeps each frame's window, never reorders or alters frames."""
    hints = [h for h, _ in rows]
    ready = np.array([r for _, r in rows], dtype=np.int64)
    frames = pack_frames(np.arange(len(rows)), hints, np.arange(len(rows)) * 3)
    before = frames.copy()
    pacer = Pacer()
    cut = min(cut, len(rows))
    emit = np.concatenate(
        [pacer.pace(frames[:cut], ready[:cut]), pacer.pace(frames[cut:], ready[cut:])]
    )

    assert frames.tobytes() == before.tobytes()
    assert np.all(emit >= ready)
    assert np.all(np.diff(emit) > 0)
    assert np.array_equal(np.argsort(emit, kind="stable"), np.arange(len(rows)))
    window_ns = emit_windows_ms(hints) * NS_PER_MS
    assert np.all(np.diff(emit) >= window_ns[1:])
    earliest = np.maximum(ready[1:], emit[:-1] + window_ns[1:])
    assert np.array_equal(emit[1:], earliest)
    assert emit[0] == ready[0]
    assert check_emit_spacing(emit, hints).size == 0


@given(st.lists(hints_st, min_size=2, max_size=20))
def test_hint_ignoring_pacer_is_caught(hints: list[int]) -> None:
    """token.emit_window: a pacer ignoring hints is flagged at exactly its positive-hint frames."""
    frames = pack_frames(np.arange(len(hints)), hints, np.arange(len(hints)))
    emit = Pacer(honour_hint=False).pace(frames, np.zeros(len(hints)))
    expected = [k for k, hint in enumerate(hints) if k > 0 and hint > 0]
    assert check_emit_spacing(emit, hints).tolist() == expected


requests_st = st.lists(
    st.tuples(st.lists(_in_range("token_id"), max_size=6), st.integers(0, U64_MAX - 6)),
    min_size=1,
    max_size=4,
)


def _identity_pipeline(
    requests: list[tuple[list[int], int]], interleave: list[int]
) -> tuple[list[list[int]], list[list[int]]]:
    """Sent and received (ids, ts, request) columns for an order-keeping pipeline.

    ``interleave`` says which request delivers its next frame at each arrival slot.
    """
    per_request = []
    for request, (ids, start) in enumerate(requests):
        stamps = LogicalClock(start).tick_many(len(ids)).tolist()
        per_request.append(list(zip(ids, stamps, [request] * len(ids), strict=True)))
    sent = [row for rows in per_request for row in rows]
    cursors = [0] * len(requests)
    received = []
    for request in interleave:
        received.append(per_request[request][cursors[request]])
        cursors[request] += 1
    return [list(c) for c in zip(*sent, strict=True)], [
        list(c) for c in zip(*received, strict=True)
    ]


def _interleave_st(requests: list[tuple[list[int], int]]) -> st.SearchStrategy[list[int]]:
    return st.permutations([r for r, (ids, _) in enumerate(requests) for _ in ids])


@given(requests_st, st.data())
def test_passthrough_identity_with_cross_request_reordering_is_clean(
    requests: list[tuple[list[int], int]], data: st.DataObject
) -> None:
    """token.passthrough: an order-keeping pipeline reports no renumbering, loss, duplicate or
    reordering, however frames of different requests interleave."""
    assume(any(ids for ids, _ in requests))
    sent, received = _identity_pipeline(requests, data.draw(_interleave_st(requests)))
    result = check_passthrough(sent[0], sent[1], received[0], received[1], sent[2], received[2])
    flags = result[["renumbered", "lost", "duplicated", "order_violations"]].to_numpy()
    assert flags.sum() == 0
    assert result["received"].tolist() == result["sent"].tolist()


@given(requests_st, st.sampled_from(["renumber_id", "renumber_ts", "drop", "duplicate"]), st.data())
def test_passthrough_flags_each_fault(
    requests: list[tuple[list[int], int]], fault: str, data: st.DataObject
) -> None:
    """token.passthrough: one renumbered, dropped or duplicated frame is counted exactly once,
    against its own request."""
    assume(any(ids for ids, _ in requests))
    sent, received = _identity_pipeline(requests, data.draw(_interleave_st(requests)))
    ids, stamps, labels = (list(c) for c in received)
    k = data.draw(st.integers(0, len(ids) - 1))
    request = labels[k]
    expected = {"renumbered": 0, "lost": 0, "duplicated": 0}
    if fault == "renumber_id":
        ids[k] = (ids[k] + data.draw(st.integers(1, 2**32 - 1))) % 2**32
        expected["renumbered"] = 1
    elif fault == "renumber_ts":
        new_ts = data.draw(_in_range("ts_logical"))
        assume(new_ts not in {t for t, r in zip(sent[1], sent[2], strict=True) if r == request})
        stamps[k] = new_ts
        expected["renumbered"] = 1
    elif fault == "drop":
        del ids[k], stamps[k], labels[k]
        expected["lost"] = 1
    else:
        ids.insert(k + 1, ids[k])
        stamps.insert(k + 1, stamps[k])
        labels.insert(k + 1, request)
        expected["duplicated"] = 1
    result = check_passthrough(sent[0], sent[1], ids, stamps, sent[2], labels)
    assert result.loc[request, list(expected)].to_dict() == expected
    assert result["order_violations"].sum() == 0
    others = result.drop(index=request)[["renumbered", "lost", "duplicated"]]
    assert others.to_numpy().sum() == 0
    assert (result["received"] - result["sent"]).equals(result["duplicated"] - result["lost"])


token_ids_st = st.lists(st.integers(0, 2**32 - 1).filter(lambda t: t != MHF_MARKER), max_size=40)


@given(token_ids_st)
def test_mhf_strip_aligns_and_naive_is_one_off(ids: list[int]) -> None:
    """token.mhf_kv_alignment: stripping the marker gives KV length, mask length and RoPE offset
    equal to the real token count; treating it as a token gives exactly one more on each."""
    buffer = prepend_marker(ids)
    strip = derive_layout(buffer, "strip")
    naive = derive_layout(buffer, "naive")
    n = len(ids)
    assert (strip.kv_length, strip.attention_mask_length, strip.rope_offset) == (n, n, n)
    assert strip.kv_tokens.tolist() == ids
    assert strip.rope_positions.tolist() == list(range(n))
    assert (naive.kv_length, naive.attention_mask_length, naive.rope_offset) == (n + 1,) * 3
    assert naive.kv_tokens[1:].tolist() == ids
    assert naive.rope_positions[1:].tolist() == list(range(1, n + 1))
