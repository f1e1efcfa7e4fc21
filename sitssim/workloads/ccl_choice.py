"""What NCCL would run for each call of a ``kind: collective`` workload on an NVSwitch node.

Per workload, once: the GPU generation (from the GPU's compute capability), the NVLinks of
each GPU (from the built fabric: the fewest any of its GPUs has), the ring search's result
and the communicator's channels (``ccl.search``; ``channels`` in the scenario fixes them, as
NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS together do). Per call: the (algorithm,
protocol) pair NCCL's cost model picks among those sitssim runs as NCCL does and the
scenario allows (``ccl.tuning.choose``), the channels and threads the call launches
(``ccl.channels.launch_for``), and its endpoint costs (``ccl.endpoint``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sitssim.ccl.channels import launch_for
from sitssim.ccl.endpoint import nccl_endpoint_costs
from sitssim.ccl.search import ring_search, run_channels
from sitssim.ccl.tuning import Key, choose, generation_of
from sitssim.config.catalog import GPUS
from sitssim.config.collective_config import CollectiveWorkload
from sitssim.workloads.ccl_ring import CclCall

if TYPE_CHECKING:
    from sitssim.fabric.topology import Fabric

RUN_AS_NCCL = frozenset({"ring"})
"""The algorithms of NCCL's cost model that sitssim runs as NCCL does."""

NCCL_FABRICS = frozenset({"nvswitch"})
"""Fabric kinds NCCL's search is modelled on: one NVSwitch node."""


def nvlinks_of(fabric: Fabric, gpu: str) -> int:
    """The links of ``gpu`` to the switches of its fabric."""
    return sum(links for _, _, links in fabric.graph.edges(gpu, data="links", default=1))


class CallChooser:
    """NCCL's choices for one workload's calls over ``gpus`` of ``fabric``."""

    def __init__(self, wl: CollectiveWorkload, fabric: Fabric, gpus: list[str]) -> None:
        capability = GPUS[wl.gpu].compute_capability
        if capability is None:
            raise ValueError(f"GPU {wl.gpu!r} has no compute capability")
        self.wl = wl
        self.n_ranks = len(gpus)
        self.generation = generation_of(capability)
        self.search = ring_search(min(nvlinks_of(fabric, g) for g in gpus), self.generation)
        self.comm_channels = wl.channels or run_channels(self.search)

    def _allowed(self, key: Key) -> bool:
        algorithm, protocol = key
        wl = self.wl
        if algorithm not in RUN_AS_NCCL:
            return False
        if wl.algorithm != "auto" and algorithm != wl.algorithm:
            return False
        return wl.protocol in (None, "auto") or protocol == wl.protocol

    def call(self, n_bytes: int) -> CclCall:
        """What NCCL runs for one call of ``n_bytes``."""
        op = self.wl.operation
        searches = {"ring": self.search}
        algorithm, protocol = choose(
            op,
            n_bytes,
            self.n_ranks,
            searches,
            self.generation,
            nvswitch=True,
            allowed=self._allowed,
        )
        launch = launch_for(algorithm, protocol, n_bytes, self.n_ranks, self.comm_channels)
        costs = nccl_endpoint_costs(algorithm, protocol, self.generation, self.comm_channels)
        return CclCall(algorithm, protocol, launch.channels, costs)
