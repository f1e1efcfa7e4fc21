"""Scenario models for switch ports' VC quota tables (``switch.vc_quota``) and their fault.

A quota table gives each tenant a number of slots on each of a port's virtual channels.
``switch.vc_quota.table`` applies to every switch port; ``ports`` overrides it for the
ports of one switch, or for one switch's port towards one peer; ``updates`` are
management writes offered to the device while the run goes on. A table the spec forbids
(a 9th VC, more than 64 slots on a port) is valid input here: it loads, runs and fails
the clause. Only tables that mean nothing are refused: a negative or fractional slot
count, or more entries than :data:`MAX_QUOTA_VCS`. References to tenants, switches and
peers are checked against the scenario and the built fabric by the stage's check
(``sitssim.stages.switch_quota``), because this module sees neither.

Kept free of ``sitssim.scenario`` imports, because the scenario module imports these.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sitssim.errors import LocatedValueError
from sitssim.quantities import MAX_ITEMS, count
from sitssim.quantities import Time as NonNegTime

Name = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]

# A VC id in one byte: 32 times the spec's 8 VCs, beyond any link's VC field (PCIe's is
# 3 bits). A longer row is not a table any device could hold, so it is bad input.
MAX_QUOTA_VCS = 256
# A 16-bit slot counter per (tenant, VC): far past the spec's 64 slots per port, so every
# excess a misconfiguration could ask for still loads and fails the clause.
MAX_SLOTS = 2**16 - 1

Slots = count(0, MAX_SLOTS)
SlotRow = Annotated[list[Slots], Field(min_length=1, max_length=MAX_QUOTA_VCS)]
# Tenant name -> slots per VC (VC 0 first). Rows may differ in length; a missing entry is
# 0 slots. Tenant names are checked against the scenario's ``tenants`` by the stage.
QuotaSlots = Annotated[dict[Name, SlotRow], Field(min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class QuotaPortTable(_Strict):
    """The table of one switch's ports (``peer`` omitted), or of its port towards ``peer``;
    it replaces the default table there, whole."""

    switch: Name
    peer: Name | None = None
    table: QuotaSlots


class QuotaUpdate(_Strict):
    """A management write: at ``at`` (traffic clock), set ``tenant``'s row to ``slots`` on
    ``switch``'s port towards ``peer``, or on every port of ``switch``."""

    at: NonNegTime
    switch: Name
    peer: Name | None = None
    tenant: Name
    slots: SlotRow


class VcQuota(_Strict):
    """``switch.vc_quota``: the default table, per-port overrides, management writes.

    Without ``table`` every port's default table is dealt round robin over the scenario's
    tenants (``sitssim.switch.vc_quota.round_robin_table``): each tenant takes
    ``vcs_per_tenant`` consecutive VCs of the port's ``vcs_per_port`` (default: an even
    share, at least one), and ``slots`` are split evenly over the (tenant, VC) pairs, so a
    scenario can vary its tenant count without writing a table for each."""

    table: QuotaSlots | None = None
    vcs_per_tenant: count(1, MAX_QUOTA_VCS) | None = None
    slots: count(0, MAX_SLOTS) = 64
    ports: list[QuotaPortTable] = Field(default_factory=list, max_length=MAX_ITEMS)
    updates: list[QuotaUpdate] = Field(default_factory=list, max_length=MAX_ITEMS)

    @model_validator(mode="after")
    def _dealt_or_given(self) -> VcQuota:
        if self.table is not None:
            for key in ("vcs_per_tenant", "slots"):
                if key in self.model_fields_set:
                    raise LocatedValueError(
                        (key,), f"'{key}' deals a table round robin; this one gives 'table'"
                    )
        return self


class QuotaRuntimeUpdateFault(_Strict):
    """Faulty device: ``switch``'s firmware applies quota writes after its ports reach L0,
    instead of refusing them."""

    kind: Literal["quota_runtime_update"]
    switch: Name
