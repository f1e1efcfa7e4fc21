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
NCCL's own cost model, of the release the GPUs run, and that is where ``nccl_endpoint_costs``
takes them from (``ccl.tuning.CostModel``; ``docs/ccl_sources.md`` §1, §4): the fixed cost is the
model's base latency ``baseLat`` and the handshake its per-step NVLink latency ``hwLat`` for
the same algorithm and protocol. The copy rate comes from the bus bandwidth the model gives
the pair (``tuning.bus_bandwidth_GBps``: the search's bandwidth for Simple, 92 % of it capped
per search channel for LL128, a quarter or a half of it capped at ``llMaxBw`` for LL): a
block moves at most what the model gives one channel of the search, and the blocks the call
runs together at most the whole bus. So a call on few channels is limited by its blocks, one
on many by what the GPU's blocks move together. (NCCL's estimate shares the bus by the
communicator's channels, scaling a call on fewer channels down; a block is not slowed by
blocks that do not run. One-process-per-GPU nccl-tests runs show a one-channel LL ring
taking about 0.1 µs more per ring step for each 1 KiB more per step on H100 and 0.2 µs on
A100; the one-channel estimates, 15 and 5 GB/s, give 0.07 and 0.2 µs:
``docs/ccl_sources.md`` §4.1.)

NVLS pays the model's NVLS hardware latency as its fixed cost (the model gives NVLS that
latency in place of a base). Its kernel signals chunk by chunk between the GPUs' scatter,
the head's reduction and the GPUs' gather through connections of the Simple protocol, so a
step costs Simple's NVLink handshake, the same act as a ring's Simple step; its scatter and
gather copy within a GPU, and the switch's reduction and the links set its pace. The fabric
adds the flight and switching of every message on top; on an NVSwitch node that is tens of
ns per hop, against the 0.6 µs of the smallest handshake. These are estimates NCCL uses to
choose, not measurements: the calibration notebook judges the result against measured
nccl-tests output only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sitssim.ccl.tuning import CostModel, SearchResult, bus_bandwidth_GBps

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
    model: CostModel,
    algorithm: str,
    protocol: str,
    operation: str,
    search: SearchResult,
    generation: str,
    channels: int,
) -> EndpointCosts:
    """The endpoint costs of (``algorithm``, ``protocol``) running ``operation`` on
    ``channels`` blocks per GPU of one NVLink node whose topology search found ``search``,
    from the inputs of ``model``, the cost model of the NCCL release the GPUs run (module
    docstring)."""
    key = (algorithm, protocol)
    if key not in model.base_latency_us:
        raise ValueError(f"no endpoint costs for {algorithm!r} / {protocol!r}")
    if channels < 1:
        raise ValueError(f"channels must be >= 1, got {channels}")
    if algorithm == "nvls":
        return EndpointCosts(
            kernel_ns=model.hw_latency_us["nvlink"][key] * NS_PER_US,
            step_ns=model.hw_latency_us["nvlink"][("ring", "simple")] * NS_PER_US,
            block_bytes_per_ns=math.inf,
        )
    bus = bus_bandwidth_GBps(model, algorithm, protocol, operation, search, generation)
    one = bus_bandwidth_GBps(
        model, algorithm, protocol, operation, replace(search, channels=1), generation
    )
    # GB/s is bytes per ns.
    return EndpointCosts(
        kernel_ns=model.base_latency_us[key] * NS_PER_US,
        step_ns=model.hw_latency_us["nvlink"][key] * NS_PER_US,
        block_bytes_per_ns=min(one, bus / channels),
    )
