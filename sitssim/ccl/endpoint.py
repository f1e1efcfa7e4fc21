"""What a GPU spends on a collective besides moving its bytes over the fabric.

Theory of operation
-------------------
A collective's kernel runs one block per channel on every rank. Three costs sit at the
endpoints, apart from the links and switches the messages cross:

* **the kernel's fixed cost** (``kernel_ns``), paid once per call before a block takes its
  first step: the work the kernel does whatever the size (loading its work, setting up its
  connections, the first and last synchronisations);
* **a step's handshake** (``step_ns``), from a step's data landing at the receiver to the
  receiving block acting on it: polling LL's per-line flags, LL128's per-line flag, or
  Simple's tail counter written behind a memory fence;
* **a block's copy rate** (``block_bytes_per_ns``): a block moves data through its threads'
  loads and stores, and under LL and LL128 it packs and polls flags as it goes, so one block
  moves at most so many payload bytes per ns whatever the links could carry.

No NCCL source states these costs as such. Their only published estimates are the inputs of
NCCL's own cost model, and that is where ``nccl_endpoint_costs`` takes them from (NCCL
2.20.3 ``src/graph/tuning.cc``; ``docs/ccl_sources.md`` §1, §4): the fixed cost is the
model's base latency ``baseLat`` and the handshake its per-step NVLink latency ``hwLat`` for
the same algorithm and protocol; the copy rate of an LL block is the model's cap on LL's bus
bandwidth on one node, ``llMaxBw``, shared by the communicator's channels, and of an LL128
block the model's cap per channel, ``perChMaxRingLL128Bw``. A Simple block has no cap of its
own: its links limit it. NVLS is the exception to the split: the model gives it one hardware
latency per call in place of a base and no latency per step, so its kernel's fixed cost is
that latency and its handshakes cost nothing. The fabric adds the flight and switching of
every message on top; on an NVSwitch node that is tens of ns per hop, against the 0.6 µs of
the smallest handshake. These are estimates NCCL uses to choose, not measurements: the
calibration notebook judges the result against measured nccl-tests output only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sitssim.ccl.tuning import (
    BASE_LATENCY_US,
    HW_LATENCY_US,
    LL_MAX_GBPS,
    RING_LL128_MAX_PER_CHANNEL_GBPS,
)

NS_PER_US = 1000.0


@dataclass(frozen=True)
class EndpointCosts:
    """A collective kernel's costs at the GPUs (ns, and payload bytes per ns per block)."""

    kernel_ns: float
    step_ns: float
    block_bytes_per_ns: float

    def __post_init__(self) -> None:
        if not (self.kernel_ns >= 0 and self.step_ns >= 0 and math.isfinite(self.kernel_ns)):
            raise ValueError(f"costs must be finite and >= 0: {self}")
        if not self.block_bytes_per_ns > 0:
            raise ValueError(f"block_bytes_per_ns must be > 0, got {self.block_bytes_per_ns}")

    def copy_ns(self, data_bytes: int) -> float:
        """How long one block spends moving ``data_bytes`` of payload."""
        return data_bytes / self.block_bytes_per_ns


def nccl_endpoint_costs(
    algorithm: str, protocol: str, generation: str, comm_channels: int
) -> EndpointCosts:
    """The endpoint costs of (``algorithm``, ``protocol``) on one NVLink node, from the inputs
    of NCCL 2.20.3's cost model (module docstring)."""
    key = (algorithm, protocol)
    if key not in BASE_LATENCY_US:
        raise ValueError(f"no endpoint costs for {algorithm!r} / {protocol!r}")
    if comm_channels < 1:
        raise ValueError(f"comm_channels must be >= 1, got {comm_channels}")
    if protocol == "ll":
        block = LL_MAX_GBPS[generation] / comm_channels
    elif protocol == "ll128":
        block = RING_LL128_MAX_PER_CHANNEL_GBPS[generation]
    else:
        block = math.inf
    kernel_us = BASE_LATENCY_US[key]
    step_us = HW_LATENCY_US["nvlink"][key]
    if algorithm == "nvls":
        kernel_us, step_us = step_us, 0.0
    # GB/s is bytes per ns.
    return EndpointCosts(
        kernel_ns=kernel_us * NS_PER_US,
        step_ns=step_us * NS_PER_US,
        block_bytes_per_ns=block,
    )
