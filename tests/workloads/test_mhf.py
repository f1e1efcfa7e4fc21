"""Unit tests for the MHF marker and the consumer's KV / mask / RoPE layout."""

import numpy as np
import pytest

from sitssim.workloads.mhf import MHF_MARKER, MHF_MARKER_BYTES, derive_layout, prepend_marker


def _layout_numbers(buffer: bytes, mode: str) -> tuple[int, int, int]:
    layout = derive_layout(buffer, mode)  # type: ignore[arg-type]
    return layout.kv_length, layout.attention_mask_length, layout.rope_offset


def test_marker_is_four_little_endian_bytes() -> None:
    assert MHF_MARKER == 0x80000001
    assert MHF_MARKER_BYTES == b"\x01\x00\x00\x80"


def test_prepend_marker_to_ids_and_to_bytes_agree() -> None:
    ids = [5, 0, 2**32 - 1]
    raw = np.asarray(ids, dtype="<u4").tobytes()
    assert prepend_marker(ids) == prepend_marker(raw) == MHF_MARKER_BYTES + raw
    assert prepend_marker(np.asarray(ids, dtype=np.uint64)) == MHF_MARKER_BYTES + raw


def test_naive_consumer_caches_the_marker_as_a_token() -> None:
    layout = derive_layout(prepend_marker([5, 6, 7]), "naive")
    assert layout.kv_tokens.tolist() == [MHF_MARKER, 5, 6, 7]
    assert (layout.kv_length, layout.attention_mask_length, layout.rope_offset) == (4, 4, 4)
    assert layout.rope_positions.tolist() == [0, 1, 2, 3]


def test_strip_consumer_removes_the_marker() -> None:
    layout = derive_layout(prepend_marker([5, 6, 7]), "strip")
    assert layout.kv_tokens.tolist() == [5, 6, 7]
    assert (layout.kv_length, layout.attention_mask_length, layout.rope_offset) == (3, 3, 3)
    assert layout.rope_positions.tolist() == [0, 1, 2]


def test_unmarked_buffer_is_the_same_in_both_modes() -> None:
    raw = np.asarray([9, 8], dtype="<u4").tobytes()
    assert _layout_numbers(raw, "naive") == _layout_numbers(raw, "strip") == (2, 2, 2)


def test_marker_only_buffer() -> None:
    buffer = prepend_marker([])
    assert buffer == MHF_MARKER_BYTES
    assert _layout_numbers(buffer, "naive") == (1, 1, 1)
    assert _layout_numbers(buffer, "strip") == (0, 0, 0)
    assert _layout_numbers(b"", "strip") == (0, 0, 0)


def test_strip_removes_only_a_leading_marker() -> None:
    raw = np.asarray([3, MHF_MARKER], dtype="<u4").tobytes()
    assert derive_layout(raw, "strip").kv_tokens.tolist() == [3, MHF_MARKER]
    doubled = MHF_MARKER_BYTES + MHF_MARKER_BYTES
    assert derive_layout(doubled, "strip").kv_length == 1


def test_prepend_refuses_ids_that_clash_or_do_not_fit() -> None:
    with pytest.raises(ValueError, match="marker"):
        prepend_marker([1, MHF_MARKER])
    with pytest.raises(ValueError, match="uint32"):
        prepend_marker([2**32])
    with pytest.raises(ValueError, match="uint32"):
        prepend_marker([-1])
    with pytest.raises(TypeError):
        prepend_marker([1.5])
    with pytest.raises(ValueError, match="multiple of 4"):
        prepend_marker(b"\x00\x01\x02")


def test_derive_layout_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="mode"):
        derive_layout(MHF_MARKER_BYTES, "drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="multiple of 4"):
        derive_layout(MHF_MARKER_BYTES + b"\x00", "strip")
