"""Calls run as NCCL runs them over one group of GPUs: NCCL's choice per size, set up to run.

Both ``kind: collective`` workloads and the tensor-parallel collectives of ``kind:
inference`` run through this: ``CallChooser`` picks the algorithm, protocol and channels,
and the call is a ``CclRing`` or, for NVLS, a ``CclNvls`` over every switch of the node
(each plane with the links a GPU has to it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sitssim.config.collective_config import CollectiveWorkload
from sitssim.config.switch_capabilities import SwitchCapabilities
from sitssim.workloads.ccl_choice import CallChooser
from sitssim.workloads.ccl_nvls import CclNvls
from sitssim.workloads.ccl_ring import CclRing

if TYPE_CHECKING:
    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport


class NcclCalls:
    """NCCL's calls of ``wl``'s operation over ``gpus``, made ready to start."""

    def __init__(
        self,
        wl: CollectiveWorkload,
        fabric: Fabric,
        transport: Transport,
        gpus: list[str],
        switches: SwitchCapabilities,
        tenant: int,
        workload: int,
    ) -> None:
        self.wl = wl
        self.transport = transport
        self.gpus = gpus
        self.switches = switches
        self.tenant = tenant
        self.workload = workload
        self.chooser = CallChooser(wl, fabric, gpus, switches)
        nvls = "nvls" in self.chooser.searches
        self.planes = fabric.switches if nvls else []
        self.plane_links = [fabric.graph.edges[gpus[0], s].get("links", 1) for s in self.planes]

    def run(self, size: int, on_done: Callable[[float], None] | None) -> CclRing | CclNvls:
        """The call NCCL would make for ``size``, set up but not started."""
        wl = self.wl
        call = self.chooser.call(size)
        if call.algorithm == "nvls":
            return CclNvls(
                self.transport,
                self.gpus,
                size,
                call,
                self.planes,
                self.plane_links,
                self.switches.reduction_bytes_per_ns,
                self.tenant,
                self.workload,
                on_done,
                wl.max_message_bytes,
            )
        return CclRing(
            self.transport,
            self.gpus,
            size,
            wl.operation,
            call,
            self.tenant,
            self.workload,
            on_done,
            wl.max_message_bytes,
            wl.reduction_bandwidth,
        )
