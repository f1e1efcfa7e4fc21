"""Scenario schema of ``kind: tenant_requests`` workloads, apart from the driver that runs them.

A config leaf: ``sitssim.scenario`` imports it, and so does the driver,
``sitssim.workloads.tenant_requests``. Nothing here imports the scenario.

The ACK timeout's default is fixed from first principles, before any study: it is the
shortest completion timeout a PCIe requester may be programmed to (50 us, the floor of
the Completion Timeout "Range A", 50 us to 10 ms, PCIe Base Specification 6.x, Device
Control 2): the most aggressive setting a PCIe requester may have, so what it counts is
an upper bound of what any longer setting would count. It is a device parameter: a
scenario may set another (a longer Range A to D value), never a study to fit a result.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sitssim.errors import LocatedValueError, reject_repeats
from sitssim.quantities import Interval, Load, PositiveTime, Size, Time, count

NodeName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]

PCIE_COMPLETION_TIMEOUT_FLOOR_NS: Final = 50_000.0
"""50 us: the low end of PCIe's Completion Timeout Range A (50 us to 10 ms)."""

# PCIe 14-bit tags (Gen6 flit mode) bound a requester's outstanding non-posted requests.
Tags = count(1, 2**14)


class TenantRequestsWorkload(BaseModel):
    """Every requester GPU issues requests to the other GPUs (Poisson arrivals), dealt in
    turn over the tenants; each target answers each request with a completion, and the
    requester counts a completion later than ``ack_timeout`` as an ACK timeout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tenant_requests"]
    name: str | None = None
    tenants: list[NodeName] | None = Field(
        default=None, min_length=1, description="tenants sharing the traffic (default: all)"
    )
    sources: list[NodeName] | None = Field(default=None, min_length=1)
    targets: list[NodeName] | None = Field(default=None, min_length=1)
    load: Load | None = Field(
        default=None,
        description="the completions' share of each requester's link bandwidth, all tenants",
    )
    interval: Interval | None = Field(
        default=None, description="mean time between one requester's requests, all tenants"
    )
    request_bytes: Size = 32
    response_bytes: Size = 256
    turnaround: Time = 0.0
    ack_timeout: PositiveTime = PCIE_COMPLETION_TIMEOUT_FLOOR_NS
    tags: Tags = 256
    completion_queue: count(1, 2**16) = Field(
        default=64,
        description="completions a target can hold before its link takes them: it accepts "
        "a request only with a place free",
    )
    start: Time = 0.0
    stop: PositiveTime | None = None

    @model_validator(mode="after")
    def _consistent(self) -> TenantRequestsWorkload:
        if (self.load is None) == (self.interval is None):
            raise ValueError("give exactly one of 'load' or 'interval'")
        if self.stop is not None and self.stop <= self.start:
            raise LocatedValueError(("stop",), "'stop' must come after 'start'")
        for key in ("tenants", "sources", "targets"):
            names = getattr(self, key)
            if names is not None:
                reject_repeats(names, key)
        return self
