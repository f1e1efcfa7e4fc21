"""NCCL's three wire protocols, LL, LL128 and Simple, as data.

Theory of operation
-------------------
A protocol fixes how a connection's buffer is laid out and how the receiver learns that
data has arrived (``docs/ccl_sources.md`` §2; NCCL 2.26.3 ``src/include/device.h``, 2.20.3
``src/init.cc`` and ``src/include/collectives.h``):

* **LL** (low latency) writes 16-byte lines of 8 data bytes and two 4-byte flags, so a
  receiver polls the flags and needs no fence: half the wire carries data.
* **LL128** writes 128-byte lines of 15 data words and one flag word: 120 of 128 bytes.
* **Simple** writes whole buffer slots and signals them with head and tail counters behind
  memory fences: every byte is data, at the cost of a synchronisation per step.

Each connection buffer is a ring of ``NCCL_STEPS`` slots; a step moves one slot. The chunk a
channel moves per step of an algorithm is the slot's data bytes times the chunk steps, which
only a ring with Simple uses (4 for all-reduce, all-gather and reduce-scatter); every other
pairing moves one slot's data per step (``calcCollChunking``).

Under LL and LL128 a block works through a step in passes of its loop, each thread (LL) or
warp (LL128) storing its own lines and the receiver's thread or warp polling the flags of
those lines alone: a receiver acts on a pass as it lands, whatever the rest of the step is
doing (``Protocol.pass_data_bytes``; NCCL ``prims_ll.h`` and ``prims_ll128.h``). The passes
are whole until the step's last, which takes what is left. Under Simple
the receiver waits for a slice's tail counter, so a slice is the least it acts on.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

NCCL_STEPS = 8
"""Slots per connection buffer (NCCL ``device.h``)."""
WARP_SIZE = 32
LL_MAX_NTHREADS = 512
"""``NCCL_LL_MAX_NTHREADS``: an LL block's threads, each storing one 16-byte line a pass."""
LL128_MAX_NTHREADS = 640
"""``NCCL_LL128_MAX_NTHREADS``."""
LL128_SHMEM_ELEMS_PER_THREAD = 8
"""``NCCL_LL128_SHMEM_ELEMS_PER_THREAD``: eight-byte words a thread holds per pass."""
LL128_LINES_PER_WARP_PASS = WARP_SIZE * LL128_SHMEM_ELEMS_PER_THREAD * 8 // 128
"""An LL128 warp's slice per pass, 16 lines of 128 bytes (``prims_ll128.h``,
``WireWordPerSlice``)."""

RING_SIMPLE_CHUNK_STEPS = MappingProxyType(
    {
        "all_reduce": NCCL_STEPS // 2,
        "all_gather": NCCL_STEPS // 2,
        "reduce_scatter": NCCL_STEPS // 2,
    }
)
"""``*_CHUNKSTEPS`` of NCCL 2.20.3 ``collectives.h``, used by a ring with Simple only."""
RING_SIMPLE_SLICE_STEPS = NCCL_STEPS // 4
"""``*_SLICESTEPS`` (the same for the three operations): a Simple chunk is posted to the
receiver a slice, two slots, at a time."""


@dataclass(frozen=True)
class Protocol:
    """One protocol's line format, default buffer and work sizes (bytes)."""

    name: str
    line_bytes: int
    data_bytes_per_line: int
    buffer_bytes: int
    grain_bytes: int
    """What a chunk is rounded to (``ncclProtoGrainSize``)."""
    thread_threshold_bytes: int
    """Work per thread before a call takes another channel or more threads
    (``NCCL_*_THREAD_THRESHOLD``)."""
    pass_data_bytes: int | None
    """Payload one pass of a block's loop moves at the protocol's most threads, the least a
    receiver acts on as it lands: LL's 512 threads store one line of 8 data bytes each,
    4,096 bytes; LL128's 20 warps 16 lines of 120 data bytes each, 38,400 bytes (a warp's
    ``DataEltPerSlice``, the loop striding by the block's warps). None for Simple, whose
    receiver acts on whole slices (``slices_per_chunk``)."""
    unpacks: bool
    """Whether a ring's last receive copies the data out of the connection's buffer into the
    output: LL's and LL128's lines carry flags and must be unpacked; under Simple the peer
    stored straight into the output through NCCL's direct peer-to-peer pointers, and the last
    receive only waits for it (``directRecv``, the ring all-reduce's "final copy from buffer
    to dest", which copies nothing when the buffer is the destination)."""

    @property
    def wire_efficiency(self) -> float:
        """Data bytes per byte on the wire."""
        return self.data_bytes_per_line / self.line_bytes

    def wire_bytes(self, data_bytes: int) -> int:
        """Bytes on the wire for ``data_bytes`` of payload, in whole lines."""
        if data_bytes < 0:
            raise ValueError(f"data_bytes must be >= 0, got {data_bytes}")
        lines = -(-data_bytes // self.data_bytes_per_line)
        return lines * self.line_bytes

    @property
    def step_data_bytes(self) -> int:
        """Payload of one buffer slot: the slot's bytes at the protocol's wire efficiency."""
        return self.buffer_bytes // NCCL_STEPS * self.data_bytes_per_line // self.line_bytes

    def chunk_data_bytes(self, algorithm: str, operation: str) -> int:
        """Payload a channel moves per step of ``algorithm`` running ``operation``."""
        steps = RING_SIMPLE_CHUNK_STEPS.get(operation, 1) if self._ring_simple(algorithm) else 1
        return self.step_data_bytes * steps

    def slices_per_chunk(self, algorithm: str, operation: str) -> int:
        """Slices a receiver sees of one chunk, each signalled on its own: a ring with Simple
        posts its chunk steps a slice at a time; every other pairing signals one slot (LL and
        LL128 flag each line within it, and a receiver acts on each pass of lines as it lands:
        ``pass_data_bytes``)."""
        if not self._ring_simple(algorithm):
            return 1
        return RING_SIMPLE_CHUNK_STEPS.get(operation, 1) // RING_SIMPLE_SLICE_STEPS or 1

    def _ring_simple(self, algorithm: str) -> bool:
        return algorithm == "ring" and self.name == "simple"


# Simple has no line structure: a "line" is one byte, all of it data.
LL = Protocol(
    "ll",
    line_bytes=16,
    data_bytes_per_line=8,
    buffer_bytes=8 * LL_MAX_NTHREADS * NCCL_STEPS * 16,
    grain_bytes=16,
    thread_threshold_bytes=8,
    pass_data_bytes=LL_MAX_NTHREADS * 8,
    unpacks=True,
)
LL128 = Protocol(
    "ll128",
    line_bytes=128,
    data_bytes_per_line=120,
    buffer_bytes=120 * LL128_MAX_NTHREADS * NCCL_STEPS * 8,
    grain_bytes=1920,
    thread_threshold_bytes=8,
    pass_data_bytes=LL128_MAX_NTHREADS // WARP_SIZE * LL128_LINES_PER_WARP_PASS * 120,
    unpacks=True,
)
SIMPLE = Protocol(
    "simple",
    line_bytes=1,
    data_bytes_per_line=1,
    buffer_bytes=1 << 22,
    grain_bytes=512,
    thread_threshold_bytes=64,
    pass_data_bytes=None,
    unpacks=False,
)

PROTOCOLS: MappingProxyType[str, Protocol] = MappingProxyType(
    {p.name: p for p in (LL, LL128, SIMPLE)}
)
"""The protocols by the names a scenario gives them (NCCL_PROTO's, lower-cased)."""
