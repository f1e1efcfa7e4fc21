"""Scenario schema of ``kind: collective`` workloads, apart from the driver that runs them.

A config leaf: ``sitssim.scenario`` imports it, and so does the driver,
``sitssim.workloads.collectives``, which needs networkx, numpy and pandas; loading a
scenario costs none of those. Nothing here imports the scenario at module level.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from sitssim.config.catalog import GPUS
from sitssim.errors import LocatedValueError, reject_repeats, shown
from sitssim.quantities import MAX_BYTES, MAX_ITEMS, PositiveTime, Size, Time, count
from sitssim.units import UnitError, parse_size_bytes

OPERATIONS = ("all_reduce", "all_gather", "reduce_scatter")
ALGORITHMS = ("ring", "tree", "direct", "one_shot")
ALL_REDUCE_ONLY = frozenset({"tree", "one_shot", "nvls", "custom"})
PROTOCOL_CHOICES = ("auto", "ll", "ll128", "simple")
CCL_ALGORITHMS = frozenset({"auto", "ring", "nvls"})
"""The algorithms sitssim runs as NCCL does (channels, protocol, endpoint costs)."""
DEFAULT_GPU = "H100-SXM"
NcclRelease = Literal["2.20", "2.29"]
"""The NCCL releases ``sitssim.ccl.tuning.COST_MODELS`` holds."""
MIN_NCCL_COMPUTE_CAPABILITY = 7.0
DEFAULT_MAX_MESSAGE_BYTES = 262144

PositiveSize = Size
NonNegDuration = Time
# Messages per chunk: each is in flight as its own object; 65,536 splits even a 4 GiB
# chunk into 64 KiB messages, finer than any transport cuts a collective.
MessagesPerChunk = count(1, 2**16)
NodeName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]


def parse_bandwidth_bytes_per_ns(text: object) -> float:
    """``'3350GB/s'`` -> 3350.0 (bytes per ns = GB/s): a size unit per second."""
    if isinstance(text, str) and text.strip().endswith("/s"):
        try:
            per_second = parse_size_bytes(text.strip()[:-2])
        except UnitError:
            pass
        else:
            return per_second / 1e9
    raise UnitError(
        f"expected a bandwidth like '3350GB/s' (a size unit per second), got {shown(text)}"
    )


# 1 MB/s to 1 PB/s (bytes per ns), around HBM's few TB/s: a reduction always finishes.
Bandwidth = Annotated[
    float,
    BeforeValidator(parse_bandwidth_bytes_per_ns),
    Field(ge=1e-3, le=1e6, allow_inf_nan=False),
]


class SizeSweep(BaseModel):
    """Sizes ``min``, ``min * factor``, ... up to ``max`` (inclusive when reached)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: PositiveSize
    max: PositiveSize
    # Above 2^40 (MAX_BYTES) a factor only ever yields 'min'.
    factor: count(2, MAX_BYTES) = 2

    @model_validator(mode="after")
    def _ordered(self) -> SizeSweep:
        if self.max < self.min:
            raise LocatedValueError(("max",), "'max' must be at least 'min'")
        return self

    def sizes(self) -> list[int]:
        out = []
        s = self.min
        while s <= self.max:
            out.append(s)
            s *= self.factor
        return out


class HostLaunch(BaseModel):
    """How the host issues the calls, as nccl-tests does (``sitssim.workloads.host_launch``).

    ``threads: one`` is ``all_reduce_perf -g N``: one host thread enqueues every GPU's
    kernel in turn; ``per_gpu`` is ``mpirun -np N ... -g 1``: each GPU has its own. ``group``
    is a thread's time per call whatever its GPUs (the group call around them and the loop's
    own work), ``enqueue`` its time to enqueue one call on one GPU. A size's repetitions are
    then one timed loop, enqueued without waiting for the GPUs, as nccl-tests times its
    iterations; the next size's loop starts ``gap`` after the last GPU has finished.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    threads: Literal["one", "per_gpu"]
    group: NonNegDuration = 0.0
    enqueue: PositiveTime


CUSTOM_MAX_BYTES = 8 * 1024 * 1024
"""vLLM's custom all-reduce buffer (``max_size``): larger calls go to NCCL
(``sitssim.ccl.custom_ar``)."""


class CustomKernel(BaseModel):
    """A serving engine's custom all-reduce kernel: its fixed cost and its load rate (all its
    blocks together), neither of which is published (``sitssim.ccl.custom_ar``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kernel: PositiveTime
    load_bandwidth: Bandwidth


class CollectiveWorkload(BaseModel):
    """Back-to-back collectives of the listed (or swept) sizes, each repeated, over some GPUs.

    With a ``protocol``, or with ``algorithm: auto`` or ``nvls``, a collective runs as NCCL
    runs it (``sitssim.workloads.ccl_ring``, ``ccl_nvls``): over channels, in the protocol's
    lines, with the kernel's and each step's endpoint costs, and ``auto`` picks what NCCL's
    cost model picks, as NCCL_ALGO and NCCL_PROTO do when unset. Without a protocol, an
    algorithm is bare data movement: messages only, no channels, protocol or kernel costs, a
    view of the fabric alone.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["collective"]
    name: str | None = None
    operation: Literal["all_reduce", "all_gather", "reduce_scatter"] = "all_reduce"
    algorithm: Literal["auto", "ring", "nvls", "tree", "direct", "one_shot", "custom"] = "ring"
    protocol: Literal["auto", "ll", "ll128", "simple"] | None = None
    # NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS: the communicator's channels, up to MAXCHANNELS.
    channels: count(1, 64) | None = None
    gpu: str = DEFAULT_GPU
    # The NCCL release whose cost model chooses and costs the calls (sitssim.ccl.tuning):
    # 2.20.3's, or the one 2.29.2 prints (also 2.28's; close to 2.24-2.26's on one node).
    nccl: NcclRelease = "2.20"
    gpus: list[NodeName] | None = None
    sizes: list[PositiveSize] | None = None
    sweep: SizeSweep | None = None
    repetitions: count(1, MAX_ITEMS) = 1
    start: NonNegDuration = 0.0
    gap: NonNegDuration = 0.0
    max_message_bytes: PositiveSize = DEFAULT_MAX_MESSAGE_BYTES
    min_messages: MessagesPerChunk = 1
    reduction_bandwidth: Bandwidth | None = None
    tenant: NodeName | None = None
    host: HostLaunch | None = None
    # algorithm: custom (vLLM's one-shot or two-shot kernel): its costs.
    custom: CustomKernel | None = None

    @model_validator(mode="after")
    def _consistent(self) -> CollectiveWorkload:
        if (self.sizes is None) == (self.sweep is None):
            raise ValueError("give exactly one of 'sizes' or 'sweep'")
        if self.sizes is not None and not self.sizes:
            raise LocatedValueError(("sizes",), "give at least one size")
        if self.algorithm in ALL_REDUCE_ONLY and self.operation != "all_reduce":
            raise LocatedValueError(
                ("algorithm",),
                f"algorithm {self.algorithm!r} implements all_reduce only, "
                f"not {self.operation}; use 'ring' or 'direct'",
            )
        if self.algorithm == "nvls" and self.protocol not in (None, "auto", "simple"):
            raise LocatedValueError(
                ("protocol",), f"NVLS runs with the simple protocol only, not {self.protocol!r}"
            )
        if self.protocol is not None and self.algorithm not in CCL_ALGORITHMS:
            raise LocatedValueError(
                ("protocol",),
                f"algorithm {self.algorithm!r} runs as bare data movement, without a protocol; "
                f"NCCL's protocols run with {sorted(CCL_ALGORITHMS)}",
            )
        if self.gpu not in GPUS:
            raise LocatedValueError(("gpu",), f"unknown GPU {self.gpu!r}; built in: {sorted(GPUS)}")
        if self.runs_as_nccl:
            if (GPUS[self.gpu].compute_capability or 0.0) < MIN_NCCL_COMPUTE_CAPABILITY:
                raise LocatedValueError(
                    ("gpu",),
                    f"NCCL's tuning tables start at compute capability "
                    f"{MIN_NCCL_COMPUTE_CAPABILITY}; {self.gpu!r} has "
                    f"{GPUS[self.gpu].compute_capability}",
                )
            if self.min_messages != 1:
                raise LocatedValueError(
                    ("min_messages",),
                    "NCCL's channels stripe a collective; 'min_messages' is for bare algorithms",
                )
        elif self.channels is not None:
            raise LocatedValueError(
                ("channels",), "'channels' needs a 'protocol' or 'algorithm: auto'"
            )
        elif self.host is not None:
            raise LocatedValueError(
                ("host",),
                "'host' launches NCCL kernels: it needs a 'protocol' or 'algorithm: auto'",
            )
        if (self.algorithm == "custom") != (self.custom is not None):
            raise LocatedValueError(
                ("custom",),
                "'custom' gives the costs of 'algorithm: custom', and only of it",
            )
        if self.algorithm == "custom":
            for k, size in enumerate(self.sizes or self.sweep.sizes()):
                if size > CUSTOM_MAX_BYTES:
                    loc = ("sizes", k) if self.sizes is not None else ("sweep", "max")
                    raise LocatedValueError(
                        loc,
                        f"a custom all-reduce takes at most {CUSTOM_MAX_BYTES} bytes (its "
                        f"buffer), not {size}",
                    )
        if self.reduction_bandwidth is not None and self.operation == "all_gather":
            raise LocatedValueError(("reduction_bandwidth",), "an all_gather reduces nothing")
        if self.gpus is not None:
            if len(self.gpus) < 2:
                raise LocatedValueError(("gpus",), "a collective needs at least two GPUs")
            reject_repeats(self.gpus, "gpus", "GPU")
        return self

    @property
    def runs_as_nccl(self) -> bool:
        """Whether the collectives run as NCCL runs them, rather than as bare data movement."""
        return self.algorithm in ("auto", "nvls") or self.protocol is not None

    def plan(self) -> list[int]:
        """Sizes in the order they run: each size ``repetitions`` times in a row."""
        sizes = self.sizes if self.sizes is not None else self.sweep.sizes()
        return [s for s in sizes for _ in range(self.repetitions)]
