"""The CDC FIFO's device parameters: synchroniser flop timing at PVT corners, the MTBF
model and its target, the pointer width.

Below the FIFO model (``sitssim.link.cdc_fifo``) and the scenario's ``link_layer.cdc`` block
(``sitssim.config.cdc_profile``), which both read them.

Device parameters (documented assumptions, 5–7 nm-class FinFET synchroniser flop at
TT/25 °C, nominal supply): clk-to-q 22 ps, setup 12 ps, hold 6 ps, metastability time
constant τ 6 ps, routing of the asynchronous path 25 ps, clock-uncertainty margin (jitter,
skew, on-chip variation) 10 ps. SS/125 °C scales delays by 1.45, τ by 1.6 (τ degrades
faster than gate delay at slow, low-voltage corners: Beer, Ginosar et al., "The
devolution of synchronizers", ASYNC 2010) and the margin by 1.5; FF/0 °C scales delays and
τ by 0.72 and the margin by 0.8. MTBF follows the usual model
``exp(t_r / τ) / (T_W · f_clk · f_data)`` with ``T_W`` = setup + hold and ``t_r`` the
resolution slack of the ``N - 1`` stages behind the first (Ginosar, "Metastability and
synchronizers: a tutorial", IEEE Design & Test 2011); the target is 10 000 years per
synchroniser.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SECONDS_PER_YEAR = 365.25 * 24 * 3600
MTBF_TARGET_YEARS = 1e4


@dataclass(frozen=True)
class FlopTiming:
    """One synchroniser flop and its asynchronous input path, in picoseconds."""

    t_cq: float
    t_setup: float
    t_hold: float
    tau: float
    route: float
    margin: float

    @property
    def arrival(self) -> float:
        """Launch edge to the synchroniser's input: the launching flop's clk-to-q plus route."""
        return self.t_cq + self.route

    @property
    def deadline(self) -> float:
        """How long before a capturing edge the input must be stable to be taken cleanly."""
        return self.t_setup + self.margin

    @property
    def crossing(self) -> float:
        """Launch edge to the last capturing edge that still takes the new value."""
        return self.arrival + self.deadline

    @property
    def window(self) -> float:
        """The metastability window ``T_W`` of the MTBF model."""
        return self.t_setup + self.t_hold


@dataclass(frozen=True)
class Corner:
    name: str
    delay_scale: float
    tau_scale: float
    margin_scale: float


TT_FLOP = FlopTiming(t_cq=22.0, t_setup=12.0, t_hold=6.0, tau=6.0, route=25.0, margin=10.0)
CORNERS: dict[str, Corner] = {
    c.name: c
    for c in (
        Corner("SS/125C", delay_scale=1.45, tau_scale=1.6, margin_scale=1.5),
        Corner("TT/25C", delay_scale=1.0, tau_scale=1.0, margin_scale=1.0),
        Corner("FF/0C", delay_scale=0.72, tau_scale=0.72, margin_scale=0.8),
    )
}
WORST_CORNER = "SS/125C"


def flop_timing(corner: str, base: FlopTiming = TT_FLOP) -> FlopTiming:
    """The flop's timing at a PVT corner."""
    c = CORNERS[corner]
    return FlopTiming(
        t_cq=base.t_cq * c.delay_scale,
        t_setup=base.t_setup * c.delay_scale,
        t_hold=base.t_hold * c.delay_scale,
        tau=base.tau * c.tau_scale,
        route=base.route * c.delay_scale,
        margin=base.margin * c.margin_scale,
    )


def mtbf_years(timing: FlopTiming, flops: int, period_ps: float, data_rate_hz: float) -> float:
    """Mean time between synchroniser failures of an ``flops``-stage synchroniser."""
    slack = period_ps - timing.t_cq - timing.t_setup - timing.margin
    resolution = (flops - 1) * max(slack, 0.0)
    rate = timing.window * 1e-12 * (1e12 / period_ps) * data_rate_hz
    exponent = resolution / timing.tau
    if exponent > 700:
        return math.inf
    return math.exp(exponent) / rate / SECONDS_PER_YEAR


def closing_divider(
    flops: int,
    write_period_ps: float,
    data_rate_hz: float,
    target_years: float = MTBF_TARGET_YEARS,
    corner: str = WORST_CORNER,
) -> int:
    """The smallest PHYCLK divider at which ``flops`` stages meet the MTBF target at ``corner``."""
    timing = flop_timing(corner)
    for divider in range(1, 65):
        if mtbf_years(timing, flops, divider * write_period_ps, data_rate_hz) >= target_years:
            return divider
    raise ValueError(
        f"no PHYCLK divider up to 64 gives {flops} flop(s) an MTBF of {target_years:g} years "
        f"at {corner}"
    )


# The FIFO's Gray-coded pointer width, and the deepest FIFO the model builds with it.
POINTER_BITS = 16
MAX_DEPTH = 1 << (POINTER_BITS - 2)
