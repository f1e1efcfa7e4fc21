"""When each kernel of an inference step starts: launched one by one, or replayed as a CUDA graph.

Theory of operation
-------------------
A step's kernels run in stream order on a stage's GPUs: a layer's attention block (RMSNorm,
QKV GEMM, attention core, output GEMM, residual add), its all-reduce, its MLP block
(RMSNorm, gate/up GEMM, gating, down GEMM, add), its all-reduce, and at the end the
output head and its all-gather. A kernel starts once the one before it has ended and once
the host has launched it, and then a GPU-side ``gap`` later: the front end fetching the
next launch, setting up its grid and filling the SMs.

* **eager** (``EagerLaunch``): the host launches every kernel itself, one after the other,
  at ``enqueue`` each, from the step's start: it must read the sampled tokens before it can
  build the next step. While the host is ahead, the GPU runs kernel after kernel ``gap``
  apart; when the kernels are shorter than ``enqueue``, the GPU waits on the host, and the
  step takes the host's time. Decode at small batch lives there.
* **graph** (``GraphLaunch``): the step was captured once as a CUDA graph, and the host
  launches the whole graph at the step's start for ``graph``; from then on the GPU runs the
  graph's kernels ``gap`` apart, whatever their number. Serving engines (vLLM, SGLang,
  TensorRT-LLM) replay decode steps this way and run prefill eagerly.
* **ideal** (``IdealLaunch``): kernels back to back, no launch cost at all: the engine's
  roofline and the fabric alone.

The engine's roofline times a block, not its kernels (``sitssim.workloads.engine``), so a
block's time is split evenly over its kernels: exact while the GPU is the slower side (the
block then takes its roofline time plus one gap per kernel), and an approximation of the
block's last kernel while the host is. A collective is one kernel whose length the fabric
decides. Pipeline sends are not counted as kernels.

Costs (``sitssim.config.inference_config.LaunchOptions``) are host and driver times, not
published for A100 or H100; the defaults come from measurements on other GPUs
(``docs/scenario.md``): a launch of about 3 µs (``cuLaunchKernel`` of an empty kernel on
GB200, meta-pytorch/tritonbench#1017; 2.6–2.8 µs enqueued back to back on an RTX 5070 Ti,
ahrefs/ocannl#488), a graph launch of about 15 µs and 0.58 µs per kernel in it (the same
ocannl#488 measurement). A framework that dispatches each kernel from Python adds its own
host time to ``enqueue``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sitssim.config.inference_config import LaunchMode, LaunchOptions


@dataclass(frozen=True)
class LaunchCosts:
    """Host time per kernel launch and per graph launch, GPU time between kernels (ns)."""

    enqueue_ns: float
    graph_ns: float
    gap_ns: float

    @classmethod
    def from_options(cls, options: LaunchOptions) -> LaunchCosts:
        return cls(options.enqueue, options.graph, options.gap)


class KernelStream(Protocol):
    """The kernels of one step on one stage, launched in stream order."""

    def start(self, ready_ns: float) -> float:
        """When the next kernel starts, its inputs being ready (the one before it ended) at
        ``ready_ns``."""
        ...


class IdealLaunch:
    """No launch cost: a kernel starts as soon as its inputs are ready."""

    def __init__(self, host_start_ns: float, costs: LaunchCosts) -> None:
        del host_start_ns, costs

    def start(self, ready_ns: float) -> float:
        return ready_ns


class EagerLaunch:
    """The host launches kernel ``k`` of the step at ``host_start + (k + 1) · enqueue``."""

    def __init__(self, host_start_ns: float, costs: LaunchCosts) -> None:
        self._host_ns = host_start_ns
        self._enqueue_ns = costs.enqueue_ns
        self._gap_ns = costs.gap_ns

    def start(self, ready_ns: float) -> float:
        self._host_ns += self._enqueue_ns
        return max(ready_ns, self._host_ns) + self._gap_ns


class GraphLaunch:
    """The host launches the step's graph at its start; every kernel of it is then queued."""

    def __init__(self, host_start_ns: float, costs: LaunchCosts) -> None:
        self._launched_ns = host_start_ns + costs.graph_ns
        self._gap_ns = costs.gap_ns

    def start(self, ready_ns: float) -> float:
        return max(ready_ns, self._launched_ns) + self._gap_ns


LAUNCHES: dict[LaunchMode, type[IdealLaunch | EagerLaunch | GraphLaunch]] = {
    "ideal": IdealLaunch,
    "eager": EagerLaunch,
    "graph": GraphLaunch,
}
"""The stream model of each launch mode, chosen once per workload and phase."""
