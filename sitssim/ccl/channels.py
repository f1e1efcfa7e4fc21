"""How many channels and threads NCCL gives one call: fewer for small buffers.

Theory of operation
-------------------
A communicator has a channel count from its topology search (each channel one CUDA block
running its own ring or tree over its own links). A call does not always use them all:
NCCL keeps at least a threshold of bytes of work per thread, so it drops channels while
the buffer is smaller than ``channels x threads x threshold``, down to one, and then halves
the block's threads while it still is and the count stays a multiple of 128; a ring with
Simple then adds a warp for synchronisation, and no block has fewer than three warps
(``getChannnelThreadInfo`` / ``topoGetAlgoInfo`` of the NCCL 2.20 era;
``docs/ccl_sources.md`` §3.3, §3.4). NVLS runs on its own channel count (16 by default),
as is. Thresholds are per protocol (``Protocol.thread_threshold_bytes``: LL 8, LL128 8, Simple
64 bytes per thread), a ring with LL multiplying its own by the rank count.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from sitssim.ccl.protocols import PROTOCOLS

WARP = 32
MIN_WARPS = 3
NVLS_CHANNELS = 16
"""``NCCL_NVLS_NCHANNELS``' default (NCCL 2.20.3 ``nvls.cc``)."""

MAX_THREADS = MappingProxyType(
    {
        ("ring", "ll"): 512,
        ("ring", "ll128"): 640,
        ("ring", "simple"): 512,
        ("tree", "ll"): 512,
        ("tree", "ll128"): 640,
        ("tree", "simple"): 512,
        ("nvls", "simple"): 640,
    }
)
"""Threads per block (``maxThreads`` of ``ncclTopoTuneModel``; NCCL_*_MAX_NTHREADS)."""


@dataclass(frozen=True)
class Launch:
    """The blocks of one call: channels (one block each) and threads per block."""

    channels: int
    threads: int


def launch_for(
    algorithm: str, protocol: str, n_bytes: int, n_ranks: int, comm_channels: int
) -> Launch:
    """The channels and threads NCCL uses for a call of ``n_bytes`` on ``n_ranks`` ranks of a
    communicator with ``comm_channels`` channels."""
    if comm_channels < 1:
        raise ValueError(f"comm_channels must be >= 1, got {comm_channels}")
    key = (algorithm, protocol)
    if key not in MAX_THREADS:
        raise ValueError(f"no launch rule for {algorithm!r} / {protocol!r}")
    if algorithm == "nvls":
        return Launch(NVLS_CHANNELS, MAX_THREADS[key])
    threshold = PROTOCOLS[protocol].thread_threshold_bytes
    if key == ("ring", "ll"):
        threshold *= n_ranks
    nc = comm_channels
    nt = MAX_THREADS[key]
    while nc > 1 and n_bytes < nc * nt * threshold:
        nc -= 1
    while n_bytes < nc * nt * threshold and nt % 128 == 0:
        nt //= 2
    if key == ("ring", "simple"):
        nt += WARP
    elif key == ("tree", "simple"):
        nt += 4 * WARP
    return Launch(nc, max(nt, MIN_WARPS * WARP))
