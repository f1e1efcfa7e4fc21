"""How a GPU's stores to a peer's memory cross NVLink: write packets of bounded payload.

Theory of operation
-------------------
A GPU does not put a collective's bytes on the link as one stream. Each store to a peer's
memory leaves as a write request, a packet of a header and at most so many data bytes, and
the link carries the headers as well as the data (``docs/ccl_sources.md`` §6):

* **from an SM** (what NCCL's kernels issue, under every protocol), a write carries at most
  128 data bytes, one L2 line (NCCL's maintainer, NVIDIA/nccl-tests#149, 2023-07-05);
* **from a copy engine** (what ``cudaMemcpyPeer`` and p2pBandwidthLatencyTest use by
  default), at most 256 (the same comment);
* either way the request's header is 16 bytes (NVIDIA/nccl-tests#258, after the paper
  "Scalable Irregular Parallelism with GPUs: Getting CPUs Out of the Way"), which
  NVIDIA/nccl#1397 saw on Hopper as request overhead of 1/8 of the user data under Nsight.

So an SM's payload reaches the link at 128/144 of what its flits carry. The headers are part
of the transaction-layer bytes a message puts in its flits; the link layer adds its own flit
overhead on top (``sitssim.link.flit``). Read requests and completions for loads are not
modelled: NCCL's ring and NVLS kernels push their data with stores.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WritePackets:
    """The write requests a GPU's stores become: their data and header bytes."""

    name: str
    payload_bytes: int
    header_bytes: int

    def __post_init__(self) -> None:
        if self.payload_bytes < 1 or self.header_bytes < 0:
            raise ValueError(f"need payload_bytes >= 1 and header_bytes >= 0: {self}")

    @property
    def packet_bytes(self) -> int:
        return self.payload_bytes + self.header_bytes

    def wire_bytes(self, data_bytes: int) -> int:
        """Transaction-layer bytes that carry ``data_bytes`` of stores: data and headers."""
        if data_bytes < 0:
            raise ValueError(f"data_bytes must be >= 0, got {data_bytes}")
        return data_bytes + -(-data_bytes // self.payload_bytes) * self.header_bytes

    def data_within(self, wire_bytes: int) -> int:
        """The data of the whole packets that fit in ``wire_bytes`` (of one packet's worth,
        at least one byte, if none fits whole)."""
        whole = wire_bytes // self.packet_bytes
        if whole:
            return whole * self.payload_bytes
        return max(1, wire_bytes - self.header_bytes)


SM_WRITES = WritePackets("sm", payload_bytes=128, header_bytes=16)
"""Stores from a kernel's threads: NCCL's blocks, a serving engine's custom all-reduce."""
CE_WRITES = WritePackets("copy_engine", payload_bytes=256, header_bytes=16)
"""Copies by a copy engine (``cudaMemcpyPeer``, p2pBandwidthLatencyTest's default)."""
