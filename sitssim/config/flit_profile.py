"""Scenario model for flit mode and link-level replay: the ``link_layer.flit`` block.

Kept free of ``sitssim.scenario`` imports, because the scenario module imports it.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from sitssim.quantities import MAX_ITEMS, Time, count, number

# The spec's replay limits: the profile's defaults and bounds, and the replay core's
# (``sitssim.link.replay``, which imports them from here, below it).
SPEC_MAX_UNACKNOWLEDGED_FLITS: Final = 511
SPEC_MIN_REPLAY_TIMEOUT_FLITS: Final = 1500
SPEC_REPLAY_NUM_BITS: Final = 3
"""REPLAY_NUM width of the SITS2026 link layer (a 3-bit counter, so the 8th
consecutive replay attempt asks for Recovery). Non-flit PCIe uses a 2-bit counter (11b -> 00b,
Recovery on the 4th attempt); the profile's ``replay_num_bits`` makes either a device
parameter."""


class FlitProfile(BaseModel):
    """Flit mode on ``flit256`` links: errors from the pre-FEC BER, Ack/Nak replay.

    ``pre_fec_ber`` sets every flit-mode link's pre-FEC error-event rate; left out, links
    are error-free. ``burst_propagation`` is the chance that a PAM4 symbol error drags the
    next symbol with it (decision-feedback error propagation), which is what lets errors
    defeat the per-byte FEC. How long the Recovery after a REPLAY_NUM rollover lasts is not
    a device constant: the physical layer retrains the link (``PhyStage.recover``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # 1 would put every symbol in error: no flit could ever pass, so 1 itself is out.
    pre_fec_ber: number(0.0, 1.0, open_high=True) | None = None
    burst_propagation: number(0.0, 1.0, open_high=True) = 0.5
    replay_timeout_flits: count(1, MAX_ITEMS) = SPEC_MIN_REPLAY_TIMEOUT_FLITS
    max_unacknowledged_flits: Annotated[
        int, Field(ge=1, le=SPEC_MAX_UNACKNOWLEDGED_FLITS, strict=True)
    ] = SPEC_MAX_UNACKNOWLEDGED_FLITS
    replay_num_bits: Annotated[int, Field(ge=1, le=8, strict=True)] = SPEC_REPLAY_NUM_BITS
    nak_policy: Literal["standard", "selective"] = "standard"
    dllp_processing: Time = 10.0
