"""What NCCL would run for each call of a ``kind: collective`` workload on an NVSwitch node.

Per workload, once: the GPU generation (from the GPU's compute capability), the NVLinks of
each GPU (from the built fabric: the fewest any of its GPUs has), the ring search's result
(and NVLS's, where NCCL would set NVLS up: ``nvls_unavailable``) and the communicator's
channels (``ccl.search``; ``channels`` in the scenario fixes them, as
NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS together do). Per call: the (algorithm,
protocol) pair NCCL's cost model picks among those sitssim runs as NCCL does and the
scenario allows (``ccl.tuning.choose``), the channels and threads the call launches
(``ccl.channels.launch_for``), and its endpoint costs (``ccl.endpoint``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sitssim.ccl.channels import launch_for
from sitssim.ccl.endpoint import nccl_endpoint_costs
from sitssim.ccl.nvls import nvls_search
from sitssim.ccl.search import ring_search, run_channels
from sitssim.ccl.tuning import COST_MODELS, Key, choose, generation_of
from sitssim.config.catalog import GPUS
from sitssim.config.collective_config import CollectiveWorkload
from sitssim.config.switch_capabilities import SwitchCapabilities
from sitssim.workloads.ccl_ring import CclCall

if TYPE_CHECKING:
    from sitssim.fabric.topology import Fabric

RUN_AS_NCCL = frozenset({"ring", "nvls"})
"""The algorithms of NCCL's cost model that sitssim runs as NCCL does."""

NCCL_FABRICS = frozenset({"nvswitch"})
"""Fabric kinds NCCL's search is modelled on: one NVSwitch node."""


def not_an_nccl_fabric(fabric: Fabric) -> str:
    """Why NCCL's choices cannot be made on ``fabric`` ('' if they can)."""
    if fabric.kind in NCCL_FABRICS:
        return ""
    return f"NCCL's choices are modelled on one NVSwitch node; this fabric is {fabric.kind!r}"


NVLS_MIN_RANKS = 3
"""NCCL sets NVLS up only for more than two GPUs (``ncclNvlsInit``)."""


def nvls_unavailable(wl: CollectiveWorkload, n_ranks: int, switches: SwitchCapabilities) -> str:
    """Why NCCL would not run NVLS for ``wl`` ('' if it would): it needs switches that
    multicast and reduce, Hopper or later, and more than two GPUs."""
    if not switches.nvls:
        return "NVLS needs switches with 'multicast: true' and 'reduction: true'"
    capability = GPUS[wl.gpu].compute_capability or 0.0
    if generation_of(capability) != "hopper":
        return f"NVLS needs Hopper or later (compute capability 9.0); {wl.gpu!r} has {capability}"
    if n_ranks < NVLS_MIN_RANKS:
        return f"NCCL runs NVLS on more than two GPUs, not {n_ranks}"
    return ""


def nvlinks_of(fabric: Fabric, gpu: str) -> int:
    """The links of ``gpu`` to the switches of its fabric."""
    return sum(links for _, _, links in fabric.graph.edges(gpu, data="links", default=1))


class CallChooser:
    """NCCL's choices for one workload's calls over ``gpus`` of ``fabric``."""

    def __init__(
        self,
        wl: CollectiveWorkload,
        fabric: Fabric,
        gpus: list[str],
        switches: SwitchCapabilities | None = None,
    ) -> None:
        capability = GPUS[wl.gpu].compute_capability
        if capability is None:
            raise ValueError(f"GPU {wl.gpu!r} has no compute capability")
        self.wl = wl
        self.model = COST_MODELS[wl.nccl]
        self.n_ranks = len(gpus)
        self.generation = generation_of(capability)
        nvlinks = min(nvlinks_of(fabric, g) for g in gpus)
        self.search = ring_search(nvlinks, self.generation)
        self.comm_channels = wl.channels or run_channels(self.search)
        self.searches = {"ring": self.search}
        if not nvls_unavailable(wl, self.n_ranks, switches or SwitchCapabilities()):
            self.searches["nvls"] = nvls_search(nvlinks, self.generation, self.n_ranks)

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
        algorithm, protocol = choose(
            self.model,
            op,
            n_bytes,
            self.n_ranks,
            self.searches,
            self.generation,
            nvswitch=True,
            allowed=self._allowed,
        )
        launch = launch_for(algorithm, protocol, n_bytes, self.n_ranks, self.comm_channels)
        costs = nccl_endpoint_costs(
            self.model,
            algorithm,
            protocol,
            op,
            self.searches[algorithm],
            self.generation,
            launch.channels,
        )
        return CclCall(algorithm, protocol, launch.channels, costs)
