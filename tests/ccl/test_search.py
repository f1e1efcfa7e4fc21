"""The ring search on one NVSwitch node against docs/ccl_sources.md §3.2: 8x A100 (12
NVLinks) runs 24 channels, as NCCL's log on HGX A100 shows; 8x H100 (18) 24 (derived)."""

from __future__ import annotations

import pytest

from sitssim.ccl.search import ring_search, run_channels
from sitssim.ccl.tuning import SearchResult


def test_a100_searches_twelve_channels_of_20_gbps_and_runs_24() -> None:
    found = ring_search(12, "ampere")
    assert found == SearchResult(12, 20.0)
    assert run_channels(found) == 24


def test_h100_searches_six_of_60_doubled_to_twelve_of_30_and_runs_24() -> None:
    found = ring_search(18, "hopper")
    assert found == SearchResult(12, 30.0)
    assert run_channels(found) == 24


def test_a_slow_search_is_not_doubled() -> None:
    # Two A100 links: 40 GB/s of room, two channels of 20, under 25 GB/s: kept as found.
    assert ring_search(2, "ampere") == SearchResult(2, 20.0)


def test_hopper_doubles_a_search_at_50_gbps_or_more() -> None:
    # 10 links, 206 GB/s: 4 x 50 = 200 is found first (5 x 40 only ties it); 50 GB/s is not
    # under the 50 GB/s bar, so it is doubled.
    assert ring_search(10, "hopper") == SearchResult(8, 25.0)


def test_hopper_keeps_more_than_four_channels_under_50_gbps_as_found() -> None:
    # 16 links, 329.6 GB/s: 8 x 40 = 320 (ahead of 16 x 20, which ties it).
    assert ring_search(16, "hopper") == SearchResult(8, 40.0)
    # The same search on Ampere's rule would be doubled.
    assert ring_search(16, "ampere") == SearchResult(16, 20.0)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="generation"):
        ring_search(12, "blackwell")
    with pytest.raises(ValueError, match="nvlinks"):
        ring_search(0, "hopper")
