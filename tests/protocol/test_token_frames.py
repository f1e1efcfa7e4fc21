"""Unit tests for the token frame codec, emit-window pacing, logical clock and judges' helpers."""

import numpy as np
import pandas as pd
import pytest

from sitssim.protocol.token_frames import (
    EMIT_WINDOW_BASE_MS,
    FIELD_RANGES,
    FRAME_DTYPE,
    FRAME_SIZE_BYTES,
    NS_PER_MS,
    PASSTHROUGH_COLUMNS,
    ClockWrapError,
    FrameRangeError,
    LogicalClock,
    Pacer,
    TokenFrame,
    check_emit_spacing,
    check_passthrough,
    decode,
    decode_frames,
    emit_window_ms,
    emit_windows_ms,
    encode,
    encode_frames,
    field_array,
    field_in_range,
    in_range,
    pack_frames,
)

MS = NS_PER_MS
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1

BOUNDARY_FRAMES = [
    TokenFrame(0, 0, 0),
    TokenFrame(U32_MAX, 32767, U64_MAX),
    TokenFrame(0, -32768, U64_MAX),
    TokenFrame(U32_MAX, -32768, 0),
    TokenFrame(1, -1, 1),
]

OUT_OF_RANGE = [
    ("token_id", -1),
    ("token_id", 2**32),
    ("latency_hint", -32769),
    ("latency_hint", 32768),
    ("ts_logical", -1),
    ("ts_logical", 2**64),
]


def _frame_with(field: str, value: int) -> TokenFrame:
    values = {"token_id": 7, "latency_hint": 3, "ts_logical": 11, field: value}
    return TokenFrame(**values)


# --- scalar codec ---------------------------------------------------------------------------


def test_layout_is_14_packed_bytes() -> None:
    assert FRAME_SIZE_BYTES == 14
    assert FRAME_DTYPE.itemsize == 14
    assert [FRAME_DTYPE.fields[name][1] for name in FIELD_RANGES] == [0, 4, 6]


def test_known_answer_little_endian() -> None:
    frame = TokenFrame(0x01020304, -2, 0x1122334455667788)
    expected = bytes.fromhex("04030201 feff 8877665544332211")
    assert encode(frame) == expected
    assert decode(expected) == frame


@pytest.mark.parametrize("frame", BOUNDARY_FRAMES)
def test_boundary_values_round_trip(frame: TokenFrame) -> None:
    wire = encode(frame)
    assert len(wire) == FRAME_SIZE_BYTES
    assert decode(wire) == frame


def test_extreme_bit_patterns() -> None:
    assert encode(TokenFrame(U32_MAX, -1, U64_MAX)) == b"\xff" * 14
    assert encode(TokenFrame(0, -32768, 0)) == bytes(4) + b"\x00\x80" + bytes(8)
    assert decode(b"\xff" * 14) == TokenFrame(U32_MAX, -1, U64_MAX)


@pytest.mark.parametrize(("field", "value"), OUT_OF_RANGE)
def test_encode_rejects_just_out_of_range(field: str, value: int) -> None:
    with pytest.raises(FrameRangeError) as info:
        encode(_frame_with(field, value))
    error = info.value
    lo, hi = FIELD_RANGES[field]
    assert (error.field, error.value, error.index) == (field, value, None)
    assert field in str(error) and str(value) in str(error)
    assert str(lo) in str(error) and str(hi) in str(error)
    assert isinstance(error, ValueError)


def test_encode_refuses_non_integers() -> None:
    with pytest.raises(TypeError):
        encode(TokenFrame(1.0, 0, 0))  # type: ignore[arg-type]


def test_encode_accepts_numpy_integers() -> None:
    frame = TokenFrame(np.uint32(5), np.int16(-3), np.uint64(U64_MAX))
    assert decode(encode(frame)) == TokenFrame(5, -3, U64_MAX)


@pytest.mark.parametrize("length", [0, 13, 15, 28])
def test_decode_rejects_wrong_length(length: int) -> None:
    with pytest.raises(FrameRangeError) as info:
        decode(bytes(length))
    assert info.value.field == "length"
    assert info.value.value == length
    assert "14" in str(info.value)


def test_decode_accepts_bytearray_and_memoryview() -> None:
    wire = encode(TokenFrame(9, 8, 7))
    assert decode(bytearray(wire)) == decode(memoryview(wire)) == TokenFrame(9, 8, 7)


# --- vectorised codec -----------------------------------------------------------------------


def test_vectorised_encoding_equals_scalar() -> None:
    ids = [f.token_id for f in BOUNDARY_FRAMES]
    hints = [f.latency_hint for f in BOUNDARY_FRAMES]
    stamps = [f.ts_logical for f in BOUNDARY_FRAMES]
    wire = encode_frames(ids, hints, stamps)
    assert wire == b"".join(encode(f) for f in BOUNDARY_FRAMES)
    decoded = decode_frames(wire)
    assert decoded.dtype == FRAME_DTYPE
    assert [TokenFrame(*map(int, row)) for row in decoded.tolist()] == BOUNDARY_FRAMES


def test_pack_frames_broadcasts_scalars() -> None:
    frames = pack_frames(np.arange(3), 5, 2**63)
    assert frames["latency_hint"].tolist() == [5, 5, 5]
    assert frames["ts_logical"].tolist() == [2**63] * 3


@pytest.mark.parametrize(("field", "value"), OUT_OF_RANGE)
def test_pack_frames_names_first_bad_element(field: str, value: int) -> None:
    columns = {"token_id": [1, 2, 3], "latency_hint": [0, 0, 0], "ts_logical": [4, 5, 6]}
    columns[field] = [columns[field][0], value, value]
    with pytest.raises(FrameRangeError) as info:
        pack_frames(**columns)
    assert (info.value.field, info.value.value, info.value.index) == (field, value, 1)


def test_decode_frames_rejects_partial_frame() -> None:
    with pytest.raises(FrameRangeError) as info:
        decode_frames(bytes(29))
    assert info.value.field == "length"
    assert decode_frames(b"").size == 0


def test_in_range_mask_counts_bad_frames() -> None:
    ids = [0, U32_MAX, 2**32, -1, 5]
    hints = [32767, -32768, 0, 0, 32768]
    stamps = [U64_MAX, 0, 0, 0, 0]
    assert in_range(ids, hints, stamps).tolist() == [True, True, False, False, False]


def test_field_in_range_handles_recorded_column_dtypes() -> None:
    hints = pd.Series([32767, 32768, -32768, -32769], dtype="int64")
    assert field_in_range("latency_hint", hints).tolist() == [True, False, True, False]
    stamps = pd.Series([0, U64_MAX], dtype="uint64")
    assert field_in_range("ts_logical", stamps).tolist() == [True, True]
    assert field_in_range("ts_logical", np.array([-1, 0], dtype=np.int64)).tolist() == [
        False,
        True,
    ]
    floats = np.array([np.nan, 1.5, 3.0, 2.0**32, np.inf])
    assert field_in_range("token_id", floats).tolist() == [False, False, True, False, False]


def test_field_in_range_does_not_round_mixed_python_ints() -> None:
    # numpy would hold this list as float64, where 2**64 - 1 rounds to 2**64.
    assert field_in_range("ts_logical", [-1, U64_MAX, 2**64]).tolist() == [False, True, False]
    assert field_array("ts_logical", [0, U64_MAX]).tolist() == [0, U64_MAX]


def test_field_in_range_refuses_non_numbers() -> None:
    with pytest.raises(TypeError):
        field_in_range("token_id", np.array(["a"]))


# --- emit window and pacing -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "window"), [(0, 5), (1, 6), (-1, 5), (-32768, 5), (32767, 32772), (100, 105)]
)
def test_emit_window_formula(hint: int, window: int) -> None:
    assert emit_window_ms(hint) == window
    assert emit_windows_ms([hint]).tolist() == [window]


def test_vectorised_window_matches_scalar() -> None:
    hints = np.arange(-40, 41)
    assert emit_windows_ms(hints).tolist() == [emit_window_ms(int(h)) for h in hints]


def test_pacer_spaces_backlogged_frames_by_each_frames_window() -> None:
    frames = pack_frames([10, 11, 12, 13], [0, 10, -3, 1], [1, 2, 3, 4])
    emit = Pacer().pace(frames, [0, 0, 0, 0])
    assert emit.tolist() == [0, 15 * MS, 20 * MS, 26 * MS]


def test_pacer_waits_for_ready_time() -> None:
    frames = [TokenFrame(1, 10, 1), TokenFrame(2, 10, 2), TokenFrame(3, 0, 3)]
    emit = Pacer().pace(frames, [3 * MS, 100 * MS, 101 * MS])
    assert emit.tolist() == [3 * MS, 100 * MS, 105 * MS]


def test_pacer_keeps_order_when_ready_times_go_backwards() -> None:
    frames = pack_frames([1, 2, 3], [0, 0, 0], [1, 2, 3])
    emit = Pacer().pace(frames, [50 * MS, 10 * MS, 0])
    assert emit.tolist() == [50 * MS, 55 * MS, 60 * MS]


def test_pacer_reads_frames_without_changing_them() -> None:
    frames = pack_frames([4, 5, 6], [20, -1, 7], [7, 8, 9])
    before = frames.copy()
    Pacer().pace(frames, [0, 1, 2])
    assert frames.tobytes() == before.tobytes()


def test_pacer_state_carries_across_calls() -> None:
    frames = pack_frames(np.arange(6), [3, 0, 40, 2, 0, 9], np.arange(6))
    ready = [0, 1 * MS, 2 * MS, 90 * MS, 91 * MS, 92 * MS]
    whole = Pacer().pace(frames, ready)
    split = Pacer()
    parts = [split.pace(frames[:2], ready[:2]), split.pace(frames[2:3], ready[2:3])]
    singles = [split.emit(TokenFrame(*map(int, frames[k].tolist())), ready[k]) for k in (3, 4, 5)]
    assert np.concatenate([*parts, singles]).tolist() == whole.tolist()
    assert split.last_emit_ns == whole[-1]


def test_pacer_empty_batch_keeps_state() -> None:
    pacer = Pacer()
    assert pacer.last_emit_ns is None
    assert pacer.pace(pack_frames([], [], []), []).size == 0
    assert pacer.last_emit_ns is None


def test_pacer_needs_one_ready_time_per_frame() -> None:
    with pytest.raises(ValueError):
        Pacer().pace(pack_frames([1, 2], [0, 0], [1, 2]), [0])


def test_faulty_pacer_ignores_hint_and_spacing_check_catches_it() -> None:
    hints = [0, 10, 0, 30, -4]
    frames = pack_frames(np.arange(5), hints, np.arange(5))
    faulty = Pacer(honour_hint=False).pace(frames, np.zeros(5))
    assert np.diff(faulty).tolist() == [EMIT_WINDOW_BASE_MS * MS] * 4
    assert check_emit_spacing(faulty, hints).tolist() == [1, 3]
    honest = Pacer().pace(frames, np.zeros(5))
    assert check_emit_spacing(honest, hints).size == 0


def test_faulty_pacer_is_indistinguishable_without_positive_hints() -> None:
    hints = [0, -1, -32768, 0]
    frames = pack_frames(np.arange(4), hints, np.arange(4))
    faulty = Pacer(honour_hint=False).pace(frames, np.zeros(4))
    assert faulty.tolist() == Pacer().pace(frames, np.zeros(4)).tolist()
    assert check_emit_spacing(faulty, hints).size == 0


def test_emit_spacing_boundary_is_inclusive() -> None:
    assert check_emit_spacing([0, 15 * MS], [0, 10]).size == 0
    assert check_emit_spacing([0, 15 * MS - 1], [0, 10]).tolist() == [1]
    assert check_emit_spacing([10 * MS, 0], [0, 0]).tolist() == [1]


def test_emit_spacing_per_stream() -> None:
    emit = [0, 1 * MS, 5 * MS, 6 * MS, 9 * MS]
    stream = ["a", "b", "a", "b", "a"]
    assert check_emit_spacing(emit, [0, 0, 0, 0, 0], stream).tolist() == [4]
    assert check_emit_spacing(emit, [0, 0, 0, 0, 0]).tolist() == [1, 2, 3, 4]


def test_emit_spacing_accepts_hints_beyond_int16() -> None:
    assert check_emit_spacing([0, 40_000 * MS], [0, 40_000]).tolist() == [1]


# --- logical clock --------------------------------------------------------------------------


def test_logical_clock_counts_up_from_start() -> None:
    clock = LogicalClock()
    assert clock.last is None
    assert [clock.tick() for _ in range(3)] == [0, 1, 2]
    assert clock.tick_many(3).tolist() == [3, 4, 5]
    assert clock.tick_many(0).size == 0
    assert clock.last == 5


def test_logical_clock_refuses_to_wrap() -> None:
    clock = LogicalClock(U64_MAX - 1)
    assert clock.tick() == U64_MAX - 1
    with pytest.raises(ClockWrapError):
        clock.tick_many(2)
    assert clock.tick() == U64_MAX
    with pytest.raises(ClockWrapError):
        clock.tick()
    assert clock.last == U64_MAX
    assert clock.tick_many(0).size == 0


def test_logical_clock_start_must_be_uint64() -> None:
    with pytest.raises(FrameRangeError):
        LogicalClock(-1)
    with pytest.raises(FrameRangeError):
        LogicalClock(2**64)
    with pytest.raises(ValueError):
        LogicalClock().tick_many(-1)


# --- passthrough checker --------------------------------------------------------------------

SENT_IDS = [100, 101, 102, 200, 201]
SENT_TS = [0, 1, 2, 0, 1]
SENT_REQ = ["r1", "r1", "r1", "r2", "r2"]


def _check(ids: list[int], ts: list[int], req: list[str]) -> pd.DataFrame:
    return check_passthrough(SENT_IDS, SENT_TS, ids, ts, SENT_REQ, req)


def test_passthrough_identity_across_interleaving_is_clean() -> None:
    result = _check([200, 100, 101, 201, 102], [0, 0, 1, 1, 2], ["r2", "r1", "r1", "r2", "r1"])
    assert list(result.columns) == list(PASSTHROUGH_COLUMNS)
    assert result[["renumbered", "lost", "duplicated", "order_violations"]].to_numpy().sum() == 0
    assert result.loc["r1", "sent"] == result.loc["r1", "received"] == 3


def test_passthrough_flags_renumbered_token_id() -> None:
    result = _check([100, 999, 102, 200, 201], SENT_TS, SENT_REQ)
    assert result.loc["r1"].to_dict() == {
        "sent": 3,
        "received": 3,
        "renumbered": 1,
        "lost": 0,
        "duplicated": 0,
        "order_violations": 0,
    }
    assert result.loc["r2", ["renumbered", "lost", "duplicated"]].sum() == 0


def test_passthrough_flags_renumbered_ts_logical() -> None:
    result = _check(SENT_IDS, [0, 1, 2, 0, 7], SENT_REQ)
    assert result.loc["r2", "renumbered"] == 1
    assert result.loc["r2", "lost"] == 0


def test_passthrough_flags_loss() -> None:
    result = _check([100, 102, 200, 201], [0, 2, 0, 1], ["r1", "r1", "r2", "r2"])
    assert result.loc["r1", ["lost", "renumbered", "duplicated"]].tolist() == [1, 0, 0]


def test_passthrough_flags_duplicate() -> None:
    result = _check(
        [100, 101, 101, 102, 200, 201], [0, 1, 1, 2, 0, 1], ["r1", "r1", "r1", "r1", "r2", "r2"]
    )
    assert result.loc["r1", ["duplicated", "lost", "order_violations"]].tolist() == [1, 0, 0]


def test_passthrough_flags_reorder_within_request() -> None:
    result = _check([102, 100, 101, 200, 201], [2, 0, 1, 0, 1], SENT_REQ)
    assert result.loc["r1", "order_violations"] == 2
    assert result.loc["r2", "order_violations"] == 0
    assert result.loc["r1", ["renumbered", "lost", "duplicated"]].sum() == 0


def test_passthrough_frame_moved_to_other_request_counts_on_both() -> None:
    result = _check(SENT_IDS, SENT_TS, ["r1", "r1", "r2", "r2", "r2"])
    assert result.loc["r1", "lost"] == 1
    assert result.loc["r2", "duplicated"] == 1


def test_passthrough_request_unknown_to_sender_is_reported() -> None:
    result = _check([*SENT_IDS, 5], [*SENT_TS, 0], [*SENT_REQ, "r9"])
    assert result.loc["r9"].tolist() == [0, 1, 0, 0, 1, 0]


def test_passthrough_defaults_to_one_request_and_handles_empty() -> None:
    result = check_passthrough([1, 2], [0, 1], [1], [0])
    assert result.loc[0, "lost"] == 1
    empty = check_passthrough([], [], [], [])
    assert empty.empty
    assert list(empty.columns) == list(PASSTHROUGH_COLUMNS)


def test_passthrough_refuses_values_no_frame_can_carry() -> None:
    with pytest.raises(FrameRangeError):
        check_passthrough([2**32], [0], [0], [0])
    with pytest.raises(ValueError):
        check_passthrough([1, 2], [0], [1], [0])
