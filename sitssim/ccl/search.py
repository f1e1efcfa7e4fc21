"""What NCCL's topology search finds for rings on one NVSwitch node, and the channels it runs.

Theory of operation
-------------------
NCCL searches for rings (the tree reuses their count) at a bandwidth per channel taken from
a list, highest first (``sm90SpeedArrayIntra`` on Hopper, ``speedArrayIntra`` otherwise, in
NCCL 2.20.3 ``src/graph/search.cc``), and keeps the solution moving the most, channels times
speed. Behind an NVSwitch every channel crosses each GPU's NVLinks to the switch, so at one
speed a GPU holds as many channels as its NVLink bandwidth (links times NCCL's bandwidth
per link) has room for, up to half of ``MAXCHANNELS``. The search then doubles its channels
at half the speed unless that speed is under 25 GB/s, or the GPU is newer than Ampere with a
speed under 50 GB/s and more than 4 channels (``ncclTopoDupChannels``); and the channels the
kernels run are twice the search's, up to ``MAXCHANNELS`` (``ncclTopoPostset``). Our reading
of the search on a switch is derived, not read off a log (``docs/ccl_sources.md`` §3.2): it
gives 24 channels on 8x A100, as NCCL's log there shows.
"""

from __future__ import annotations

import math
from types import MappingProxyType

from sitssim.ccl.tuning import GENERATIONS, SearchResult

HOPPER_INTRA_SPEEDS_GBPS = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0)
"""``sm90SpeedArrayIntra`` (GB/s per channel), NCCL 2.20.3 search.cc."""
INTRA_SPEEDS_GBPS = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
"""``speedArrayIntra`` (GB/s per channel), NCCL 2.20.3 search.cc."""
NVLINK_GBPS_PER_LINK = MappingProxyType({"volta": 20.0, "ampere": 20.0, "hopper": 20.6})
"""NCCL's bandwidth per NVLink (``SM80_NVLINK_BW``, ``SM90_NVLINK_BW``; ``topo.h``)."""
MAX_CHANNELS = 32
"""``MAXCHANNELS`` of the NCCL 2.20 era (docs/ccl_sources.md §3.1: not read at 2.20.3)."""
NO_DUP_BELOW_GBPS = 25.0
NEWER_NO_DUP_BELOW_GBPS = 50.0
NEWER_NO_DUP_ABOVE_CHANNELS = 4


def ring_search(nvlinks: int, generation: str) -> SearchResult:
    """The ring search's result for GPUs with ``nvlinks`` NVLinks each to an NVSwitch."""
    if generation not in GENERATIONS:
        raise ValueError(f"generation must be one of {GENERATIONS}, got {generation!r}")
    if nvlinks < 1:
        raise ValueError(f"nvlinks must be >= 1, got {nvlinks}")
    room = nvlinks * NVLINK_GBPS_PER_LINK[generation]
    speeds = HOPPER_INTRA_SPEEDS_GBPS if generation == "hopper" else INTRA_SPEEDS_GBPS
    best = SearchResult(0, 0.0)
    for speed in speeds:
        channels = min(MAX_CHANNELS // 2, math.floor(room / speed))
        if channels * speed > best.channels * best.per_channel_GBps:
            best = SearchResult(channels, speed)
    if best.channels == 0:
        raise ValueError(f"{nvlinks} NVLinks carry no channel at NCCL's lowest speed")
    return _doubled(best, generation)


def _doubled(found: SearchResult, generation: str) -> SearchResult:
    speed = found.per_channel_GBps
    newer = GENERATIONS.index(generation) > GENERATIONS.index("ampere")
    if speed < NO_DUP_BELOW_GBPS or (
        newer and speed < NEWER_NO_DUP_BELOW_GBPS and found.channels > NEWER_NO_DUP_ABOVE_CHANNELS
    ):
        return found
    channels = min(MAX_CHANNELS, 2 * found.channels)
    return SearchResult(channels, speed * found.channels / channels)


def run_channels(search: SearchResult) -> int:
    """The channels the kernels run: twice the search's, up to ``MAXCHANNELS``."""
    return min(MAX_CHANNELS, 2 * search.channels)
