"""Ring chunking against docs/ccl_sources.md §2.4: whole loops of the protocol's chunk, a
last loop of smaller chunks rather than padding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sitssim.ccl.plan import ring_plan
from sitssim.ccl.protocols import PROTOCOLS


def test_a_gib_all_reduce_with_simple_on_24_channels_of_8_ranks() -> None:
    plan = ring_plan("all_reduce", "simple", 1 << 30, 8, 24)
    # A loop covers 24 x 8 x 2 MiB = 384 MiB: two full loops, and 256 MiB in smaller chunks.
    assert plan.chunks[:2] == (2 << 20, 2 << 20)
    assert plan.loops == 3
    assert plan.chunks[2] == -(-(256 << 20) // (24 * 8) // 512) * 512
    assert plan.chunk_sends == 3 * 14


def test_a_small_buffer_takes_one_loop_of_small_chunks() -> None:
    plan = ring_plan("all_reduce", "ll", 8 * 1024, 8, 1)
    assert plan.loops == 1 and plan.chunks == (1024,)
    assert ring_plan("all_reduce", "ll", 8, 8, 1).chunks == (16,)


@given(
    protocol=st.sampled_from(sorted(PROTOCOLS)),
    operation=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]),
    n_bytes=st.integers(1, 1 << 32),
    ranks=st.integers(2, 16),
    channels=st.integers(1, 32),
)
def test_the_loops_cover_the_buffer_with_less_than_a_grain_per_lane_to_spare(
    protocol: str, operation: str, n_bytes: int, ranks: int, channels: int
) -> None:
    plan = ring_plan(operation, protocol, n_bytes, ranks, channels)
    full = PROTOCOLS[protocol].chunk_data_bytes("ring", operation)
    lanes = ranks * channels
    assert plan.covered_bytes >= n_bytes
    assert plan.covered_bytes - n_bytes < lanes * (PROTOCOLS[protocol].grain_bytes + 1)
    assert all(c <= full for c in plan.chunks)
    assert all(c == full for c in plan.chunks[:-1])


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="n_ranks"):
        ring_plan("all_reduce", "simple", 1024, 1, 1)
