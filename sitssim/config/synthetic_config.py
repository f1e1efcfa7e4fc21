"""Scenario schema of the open-loop workloads (``kind: synthetic`` and ``kind: probes``).

A config leaf: ``sitssim.scenario`` imports it, and so does the driver that draws their
schedule, ``sitssim.workloads.synthetic``. Nothing here imports the scenario.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sitssim.errors import LocatedValueError, reject_repeats
from sitssim.quantities import MAX_GPUS, Interval, Load, PositiveTime, Size, Time, number

NodeName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyntheticWorkload(_Strict):
    """Open-loop synthetic traffic from every source GPU (or the listed ones)."""

    kind: Literal["synthetic"]
    name: str | None = None
    pattern: Literal[
        "pair",
        "uniform_random",
        "permutation",
        "hotspot",
        "tornado",
        "bit_complement",
        "transpose",
        "shuffle",
    ]
    src: NodeName | None = None
    dst: NodeName | None = None
    sources: list[NodeName] | None = None
    # uniform_random only: draw each destination from these GPUs (less the source itself)
    # instead of from every other GPU, e.g. a crossbar bench's receivers.
    destinations: list[NodeName] | None = Field(default=None, min_length=1, max_length=MAX_GPUS)
    arrivals: Literal["poisson", "periodic"] = "poisson"
    message_bytes: Size
    load: Load | None = None
    interval: Interval | None = None
    start: Time = 0.0
    stop: PositiveTime | None = None
    tenant: NodeName | None = None
    hotspot: NodeName | None = None
    hotspot_fraction: number(0.0, 1.0, open_low=True) = 0.5

    @model_validator(mode="after")
    def _consistent(self) -> SyntheticWorkload:
        if (self.load is None) == (self.interval is None):
            raise ValueError("give exactly one of 'load' or 'interval'")
        if self.pattern == "pair" and (self.src is None or self.dst is None):
            raise LocatedValueError(("pattern",), "pattern 'pair' needs 'src' and 'dst'")
        if self.pattern != "pair" and (self.src is not None or self.dst is not None):
            raise LocatedValueError(
                ("src",) if self.src is not None else ("dst",),
                "'src' and 'dst' belong to pattern 'pair'; use 'sources' instead",
            )
        if self.pattern == "pair" and self.src == self.dst:
            raise LocatedValueError(("dst",), "'src' and 'dst' must differ")
        if self.stop is not None and self.stop <= self.start:
            raise LocatedValueError(("stop",), "'stop' must come after 'start'")
        if self.pattern == "pair" and self.sources is not None:
            raise LocatedValueError(
                ("sources",), "'sources' does not apply to pattern 'pair'; 'src' is the source"
            )
        if self.destinations is not None:
            if self.pattern != "uniform_random":
                raise LocatedValueError(
                    ("destinations",), "'destinations' belongs to pattern 'uniform_random'"
                )
            reject_repeats(self.destinations, "destinations")
        if self.pattern != "hotspot":
            for key in ("hotspot", "hotspot_fraction"):
                if key in self.model_fields_set:
                    raise LocatedValueError((key,), f"'{key}' belongs to pattern 'hotspot'")
        return self


class ProbeWorkload(_Strict):
    """Non-posted request / completion pairs that measure round trips under load."""

    kind: Literal["probes"]
    name: str | None = None
    requester: NodeName | None = None
    targets: list[NodeName] | None = None
    interval: Interval = 1000.0
    request_bytes: Size = 32
    completion_bytes: Size = 96
    turnaround: Time = 0.0
    start: Time = 0.0
    tenant: NodeName | None = None
