"""Scenario schema of ``kind: collective`` workloads, apart from the driver that runs them.

A config leaf: ``sitssim.scenario`` imports it, and so does the driver,
``sitssim.workloads.collectives``, which needs networkx, numpy and pandas; loading a
scenario costs none of those. Nothing here imports the scenario at module level.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from sitssim.errors import LocatedValueError, reject_repeats, shown
from sitssim.quantities import MAX_BYTES, MAX_ITEMS, Size, Time, count
from sitssim.units import UnitError, parse_size_bytes

OPERATIONS = ("all_reduce", "all_gather", "reduce_scatter")
ALGORITHMS = ("ring", "tree", "direct", "one_shot")
ALL_REDUCE_ONLY = frozenset({"tree", "one_shot"})
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


class CollectiveWorkload(BaseModel):
    """Back-to-back collectives of the listed (or swept) sizes, each repeated, over some GPUs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["collective"]
    name: str | None = None
    operation: Literal["all_reduce", "all_gather", "reduce_scatter"] = "all_reduce"
    algorithm: Literal["ring", "tree", "direct", "one_shot"] = "ring"
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
        if self.reduction_bandwidth is not None and self.operation == "all_gather":
            raise LocatedValueError(("reduction_bandwidth",), "an all_gather reduces nothing")
        if self.gpus is not None:
            if len(self.gpus) < 2:
                raise LocatedValueError(("gpus",), "a collective needs at least two GPUs")
            reject_repeats(self.gpus, "gpus", "GPU")
        return self

    def plan(self) -> list[int]:
        """Sizes in the order they run: each size ``repetitions`` times in a row."""
        sizes = self.sizes if self.sizes is not None else self.sweep.sizes()
        return [s for s in sizes for _ in range(self.repetitions)]
