"""NCCL's protocols against the figures NCCL's own sources give (docs/ccl_sources.md §2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sitssim.ccl.protocols import LL, LL128, PROTOCOLS, SIMPLE, Protocol


def test_buffers_are_nccl_defaults() -> None:
    # DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE, DEFAULT_BUFFSIZE (NCCL 2.20.3 init.cc).
    assert (LL.buffer_bytes, LL128.buffer_bytes, SIMPLE.buffer_bytes) == (
        524_288,
        4_915_200,
        4_194_304,
    )


def test_a_pass_of_the_blocks_loop_is_nccls_threads_lines() -> None:
    # prims_ll.h: each of NCCL_LL_MAX_NTHREADS (512) threads stores one 16-byte line of 8
    # data bytes a pass; prims_ll128.h: each of 640 / 32 = 20 warps a slice of 32 x 8
    # eight-byte words, 16 lines of 120 data bytes. Simple signals whole slices.
    assert (LL.pass_data_bytes, LL128.pass_data_bytes, SIMPLE.pass_data_bytes) == (
        4096,
        38_400,
        None,
    )


@pytest.mark.parametrize(
    ("protocol", "chunk"),
    [(SIMPLE, 2 * 1024 * 1024), (LL, 32 * 1024), (LL128, 576_000)],
)
def test_a_ring_all_reduce_moves_nccl_chunk_per_channel_and_step(
    protocol: Protocol, chunk: int
) -> None:
    assert protocol.chunk_data_bytes("ring", "all_reduce") == chunk


def test_only_a_ring_with_simple_moves_several_slots_per_step() -> None:
    assert SIMPLE.chunk_data_bytes("tree", "all_reduce") == 512 * 1024
    assert SIMPLE.chunk_data_bytes("ring", "broadcast") == 512 * 1024
    assert LL.chunk_data_bytes("ring", "all_gather") == LL.step_data_bytes


def test_wire_efficiencies() -> None:
    assert [PROTOCOLS[n].wire_efficiency for n in ("ll", "ll128", "simple")] == [
        0.5,
        120 / 128,
        1.0,
    ]


def test_a_partial_line_costs_a_whole_line() -> None:
    assert LL.wire_bytes(9) == 32 and LL.wire_bytes(8) == 16 and LL.wire_bytes(0) == 0
    assert LL128.wire_bytes(121) == 256
    assert SIMPLE.wire_bytes(1000) == 1000
    with pytest.raises(ValueError, match="data_bytes"):
        LL.wire_bytes(-1)


@given(name=st.sampled_from(sorted(PROTOCOLS)), data=st.integers(0, 1 << 31))
def test_wire_bytes_are_the_fewest_whole_lines_that_hold_the_data(name: str, data: int) -> None:
    p = PROTOCOLS[name]
    wire = p.wire_bytes(data)
    assert wire % p.line_bytes == 0
    assert wire // p.line_bytes * p.data_bytes_per_line >= data
    assert (wire // p.line_bytes - 1) * p.data_bytes_per_line < max(data, 1)
