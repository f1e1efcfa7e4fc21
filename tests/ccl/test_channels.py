"""Channels and threads per call against docs/ccl_sources.md §3.3's derived example (ring LL
on 8 ranks: one channel per 32 KiB of buffer, all 24 from 768 KiB)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sitssim.ccl.channels import MAX_THREADS, Launch, launch_for


@pytest.mark.parametrize(
    ("n_bytes", "channels"),
    [(64 * 1024, 2), (32 * 1024, 1), (768 * 1024, 24), (768 * 1024 - 1, 23), (1 << 30, 24)],
)
def test_ring_ll_on_eight_ranks_takes_a_channel_per_32_kib(n_bytes: int, channels: int) -> None:
    assert launch_for("ring", "ll", n_bytes, 8, 24).channels == channels


def test_a_full_launch_has_the_protocol_s_threads_plus_its_sync_warps() -> None:
    assert launch_for("ring", "ll", 1 << 30, 8, 24) == Launch(24, 512)
    assert launch_for("ring", "simple", 1 << 30, 8, 24) == Launch(24, 512 + 32)
    assert launch_for("tree", "simple", 1 << 30, 8, 24) == Launch(24, 512 + 128)
    assert launch_for("nvls", "simple", 8, 8, 24) == Launch(16, 640)


def test_a_tiny_buffer_runs_one_block_of_few_threads() -> None:
    # 8 bytes: one channel, threads halved while a multiple of 128 (512 -> 64), then the
    # three-warp floor.
    assert launch_for("ring", "ll", 8, 8, 24) == Launch(1, 96)
    with pytest.raises(ValueError, match="launch rule"):
        launch_for("nvls", "ll", 8, 8, 24)


@given(
    key=st.sampled_from(sorted(k for k in MAX_THREADS if k[0] != "nvls")),
    small=st.integers(1, 1 << 26),
    extra=st.integers(0, 1 << 26),
    ranks=st.integers(2, 16),
    comm=st.integers(1, 32),
)
def test_a_bigger_buffer_never_gets_fewer_channels_or_threads(
    key: tuple[str, str], small: int, extra: int, ranks: int, comm: int
) -> None:
    a = launch_for(*key, small, ranks, comm)
    b = launch_for(*key, small + extra, ranks, comm)
    assert 1 <= a.channels <= b.channels <= comm
    assert a.channels < b.channels or a.threads <= b.threads
