"""Scenario model for flow-control credits: the ``link_layer.credits`` block.

Kept free of ``sitssim.scenario`` imports, because the scenario module imports it.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sitssim.errors import reject_repeats
from sitssim.quantities import Interval, Size, Time, count

DATA_CREDIT_BYTES: Final = 16
"""Bytes of payload one data credit covers (PCIe: 4 DW)."""
SPEC_MAX_UPDATE_INTERVAL_NS: Final = 30_000.0
"""The longest a receiver may go between UpdateFCs of a class."""

# 2^24 credits: a 256 MiB receive buffer at 16 B per data credit, beyond any device's.
Credits = count(1, 2**24) | Literal["infinite"]

NodeKind = Literal["gpu", "switch", "root_complex"]
NODE_KINDS: Final[tuple[NodeKind, ...]] = ("gpu", "switch", "root_complex")


class CreditProfile(BaseModel):
    """Receive buffers behind every link direction, advertised as P / NP / Cpl credits.

    Each class gets ``header_credits`` and ``data_credits`` (16 B each); ``infinite`` is
    PCIe's InitFC value 0 and turns flow control off for that kind. A message holds credits
    for at most one ``max_payload`` TLP: longer messages stream through the buffer.

    Credits are advertised by a link direction's receiver, so ``advertised_by`` names the
    kinds of node whose receive buffers advertise them; a direction into any other kind
    is not flow-controlled, as if its receiver advertised ``infinite`` (it never
    back-pressures: a switch bench's receivers).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    header_credits: Credits = "infinite"
    data_credits: Credits = "infinite"
    max_payload: Size = 4096
    update_delay: Time = 10.0
    update_interval: Interval = SPEC_MAX_UPDATE_INTERVAL_NS
    advertised_by: list[NodeKind] = Field(default_factory=lambda: list(NODE_KINDS), min_length=1)

    @model_validator(mode="after")
    def _holds_one_tlp(self) -> CreditProfile:
        needed = -(-self.max_payload // DATA_CREDIT_BYTES)
        if self.data_credits != "infinite" and self.data_credits < needed:
            raise ValueError(
                f"data_credits {self.data_credits} cannot hold one {self.max_payload} B TLP "
                f"(needs {needed} credits of {DATA_CREDIT_BYTES} B)"
            )
        reject_repeats(self.advertised_by, "advertised_by")
        return self

    @property
    def enabled(self) -> bool:
        return self.header_credits != "infinite" or self.data_credits != "infinite"
