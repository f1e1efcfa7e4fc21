"""How NCCL cuts an NVLS (NVLink SHARP) all-reduce, and what its topology search finds.

Theory of operation
-------------------
NVLS runs on its own channels (``NCCL_NVLS_NCHANNELS``, 16), with one *head* per GPU: each
GPU reduces, through the switch, 1/heads of every chunk (``docs/ccl_sources.md`` §5). A loop
covers ``channels x heads`` chunks, one step per loop. The chunk starts at 128 KiB (the
2.20-era ``nvlsChunkSize``) and shrinks for small buffers, one test after the other on the
chunk as it stands: with ``channels x heads`` concurrent operations, to 64 KiB when the
buffer is under 64 rounds of them at the chunk, then to 32 KiB under 8 rounds, then to 16
KiB under 2 (``calcCollChunking``, our reading of the 2.20-era code). NCCL's search gives
NVLS one channel per head; we take its bandwidth per channel as the fastest of NCCL's speeds
at which every head's channel fits in a GPU's NVLinks (derived: 40 GB/s on 8x H100's 18
links, as the NVLS graph line "nChannels 8, bw 40.000000/60.000000" quoted from an 8x H100
log of NCCL 2.19.4 shows), and its bandwidth to the switch as the fastest speed of the list
(60 GB/s on Hopper: that line's second figure, and what NCCL 2.29.2's printed NVLS
bandwidths for 2, 4 and 6 H100s solve to; ``docs/ccl_sources.md`` §1.11).
"""

from __future__ import annotations

from dataclasses import dataclass

from sitssim.ccl.search import HOPPER_INTRA_SPEEDS_GBPS, INTRA_SPEEDS_GBPS, NVLINK_GBPS_PER_LINK
from sitssim.ccl.tuning import SearchResult

NVLS_CHUNK_BYTES = 128 * 1024
"""The 2.20-era NVLS chunk (``docs/ccl_sources.md`` §5.2)."""
SHRINK = ((64, 64 * 1024), (8, 32 * 1024), (2, 16 * 1024))
"""(rounds, chunk), in NCCL's order: a buffer under ``rounds x channels x heads`` times the
chunk so far takes the smaller chunk."""


@dataclass(frozen=True)
class NvlsPlan:
    """An NVLS all-reduce's loops: each of ``channels x heads`` chunks of ``chunk`` bytes."""

    n_bytes: int
    heads: int
    channels: int
    chunk: int

    @property
    def loop_bytes(self) -> int:
        return self.channels * self.heads * self.chunk

    @property
    def loops(self) -> int:
        return -(-self.n_bytes // self.loop_bytes)

    def lane_bytes(self, loop: int, channel: int, head: int) -> int:
        """The payload of one chunk: the buffer cut loop by loop, channel by channel."""
        offset = loop * self.loop_bytes + (channel * self.heads + head) * self.chunk
        return max(0, min(self.chunk, self.n_bytes - offset))


def nvls_plan(n_bytes: int, heads: int, channels: int) -> NvlsPlan:
    """The chunking of an NVLS all-reduce of ``n_bytes`` over ``heads`` GPUs."""
    if n_bytes < 1 or heads < 2 or channels < 1:
        raise ValueError(
            f"need n_bytes >= 1, heads >= 2, channels >= 1; got {n_bytes}, {heads}, {channels}"
        )
    concurrent = channels * heads
    chunk = NVLS_CHUNK_BYTES
    for rounds, smaller in SHRINK:
        if n_bytes < rounds * concurrent * chunk and chunk > smaller:
            chunk = smaller
    return NvlsPlan(n_bytes, heads, channels, chunk)


def nvls_search(nvlinks: int, generation: str, heads: int) -> SearchResult:
    """NVLS's search result: one channel per head, at the fastest speed all of them fit within
    the node, and the fastest of NCCL's speeds to the switch."""
    room = nvlinks * NVLINK_GBPS_PER_LINK[generation]
    speeds = HOPPER_INTRA_SPEEDS_GBPS if generation == "hopper" else INTRA_SPEEDS_GBPS
    fitting = [s for s in speeds if heads * s <= room]
    if not fitting:
        raise ValueError(f"{heads} NVLS heads fit no speed on {nvlinks} NVLinks")
    return SearchResult(heads, max(fitting), inter_GBps=max(speeds))


def plane_shares(links: list[int]) -> list[float]:
    """Each switch plane's share of NVLS traffic: a GPU's links to it over all its links (the
    planes split the multicast address space by interleaving)."""
    total = sum(links)
    if total < 1 or min(links) < 0:
        raise ValueError(f"need links >= 0 on each plane and some in all, got {links}")
    return [n / total for n in links]
