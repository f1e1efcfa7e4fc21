"""How NCCL cuts one ring collective into loops, chunks and steps per channel.

Theory of operation
-------------------
A ring collective moves, per loop and channel, one chunk per rank: a loop covers
``channels x ranks x chunk`` bytes of the buffer, where the chunk is the protocol's
(``Protocol.chunk_data_bytes``: 2 MiB for an all-reduce with Simple, 32 KiB with LL, 576,000
bytes with LL128). A buffer smaller than a loop's worth takes smaller chunks, not padding:
each loop's chunk is the smaller of the protocol's and the buffer left over
``channels x ranks``, rounded up to the protocol's grain (``Protocol.grain_bytes``: LL 16,
LL128 1,920, Simple 512 bytes). Each loop is ``ring_steps`` steps of one chunk per channel
(2(n - 1) for an all-reduce: a reduce-scatter then an all-gather), so a buffer takes
``loops x ring_steps`` chunk sends per channel and rank (NCCL 2.20-era ``calcCollChunking``
and ``runRing``; ``docs/ccl_sources.md`` §2.4). Our reading of the rounding is derived.
"""

from __future__ import annotations

from dataclasses import dataclass

from sitssim.ccl.protocols import PROTOCOLS
from sitssim.ccl.tuning import ring_steps


@dataclass(frozen=True)
class RingPlan:
    """A ring collective's chunks: per loop, the chunk each channel moves per step."""

    operation: str
    protocol: str
    n_ranks: int
    channels: int
    chunks: tuple[int, ...]
    steps_per_loop: int

    @property
    def loops(self) -> int:
        return len(self.chunks)

    @property
    def chunk_sends(self) -> int:
        """Chunk sends per channel and rank over the whole call."""
        return self.loops * self.steps_per_loop

    @property
    def covered_bytes(self) -> int:
        """Buffer bytes the loops cover (at least the buffer: the last chunk is rounded up)."""
        return sum(self.chunks) * self.channels * self.n_ranks


def ring_plan(operation: str, protocol: str, n_bytes: int, n_ranks: int, channels: int) -> RingPlan:
    """The loops and chunks of a ring ``operation`` of ``n_bytes`` on ``channels`` channels."""
    if n_bytes < 1 or n_ranks < 2 or channels < 1:
        raise ValueError(
            f"need n_bytes >= 1, n_ranks >= 2, channels >= 1; got {n_bytes}, {n_ranks}, {channels}"
        )
    proto = PROTOCOLS[protocol]
    full = proto.chunk_data_bytes("ring", operation)
    grain = proto.grain_bytes
    lanes = channels * n_ranks
    chunks: list[int] = []
    left = n_bytes
    while left > 0:
        share = -(-left // lanes)
        chunk = min(full, -(-share // grain) * grain)
        chunks.append(chunk)
        left -= chunk * lanes
    return RingPlan(
        operation, protocol, n_ranks, channels, tuple(chunks), ring_steps(operation, n_ranks)
    )
