"""Scenario schema of ``kind: transactions`` workloads, apart from the driver that runs them.

A config leaf: ``sitssim.scenario`` imports it, and so does the driver,
``sitssim.workloads.requests``, which needs numpy, pandas and the ordering model;
loading a scenario costs none of those. Nothing here imports the scenario at module level.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sitssim.errors import LocatedValueError, reject_repeats
from sitssim.quantities import Fraction, Interval, PositiveTime, Size, Time, count

# PCIe requester IDs (bus/device/function) and read tags are 16-bit name spaces at most.
RequesterIds = count(1, 2**16)
ReorderTags = count(1, 2**16)
NodeName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]


class TransactionWorkload(BaseModel):
    """Reads and writes from one requester through ATS, the ordering rules and a reorder buffer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["transactions"]
    name: str | None = None
    requester: NodeName | None = None
    targets: list[NodeName] | None = None
    interval: Interval = Field(description="mean time between transactions per target")
    read_fraction: Fraction = 0.5
    request_bytes: Size = 32
    write_bytes: Size = 256
    completion_bytes: Size = 256
    turnaround: Time = 0.0
    relaxed_ordering: Fraction = 0.0
    id_based_ordering: Fraction = 0.0
    requester_ids: RequesterIds = 1
    rob_depth: ReorderTags = 32
    atc_hit_ratio: Fraction = 1.0
    atc_miss_latency: Time | None = None
    start: Time = 0.0
    stop: PositiveTime | None = None
    tenant: NodeName | None = None

    @model_validator(mode="after")
    def _consistent(self) -> TransactionWorkload:
        if self.atc_hit_ratio < 1 and self.atc_miss_latency is None:
            raise LocatedValueError(
                ("atc_miss_latency",),
                "an ATC hit ratio below 1 needs 'atc_miss_latency' (the cost of a miss)",
            )
        if self.stop is not None and self.stop <= self.start:
            raise LocatedValueError(("stop",), "'stop' must come after 'start'")
        if self.targets is not None:
            if not self.targets:
                raise LocatedValueError(("targets",), "give at least one target")
            reject_repeats(self.targets, "targets", "target")
        return self
