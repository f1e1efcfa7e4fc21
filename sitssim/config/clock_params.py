"""Scenario models for device clocks, clock synchronisation, fences and clock faults.

These are the ``clocks:`` section and two ``faults:`` kinds of a scenario. They live
apart from ``sitssim.scenario`` (which imports them) so the clock modules can use them
without a circular import; checks that need the built fabric or the run's duration are
in :func:`sitssim.fabric.clock_sync.check_clock_references`.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sitssim.quantities import MAX_ITEMS, Interval, PositiveTime, count, number
from sitssim.quantities import Time as NonNegTime

DeviceName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]

# A frequency offset this large (1 %) is no longer an oscillator tolerance; the bound also
# keeps every modelled clock far from running backwards.
MAX_PPM = 10_000.0
# PCIe 6.x flit mode: one SKP ordered set per 740 flits on a common-clock (SRNS) link; our
# reading of the cadence at which SITS TS1/TS2 ordered sets carry their timestamps.
FLIT_MODE_ORDERED_SET_FLITS = 740


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoDrift(_Strict):
    """The frequency offset stays at its power-up value."""

    kind: Literal["none"]


class LinearDrift(_Strict):
    """The frequency offset changes at a constant rate (a temperature ramp, ageing)."""

    kind: Literal["linear"]
    ppm_per_ms: number(-1000.0, 1000.0)


class RandomWalkDrift(_Strict):
    """The frequency offset is a random walk (flicker/random-walk FM): its change over
    ``t`` ms is normal with standard deviation ``ppm_per_sqrt_ms * sqrt(t)``."""

    kind: Literal["random_walk"]
    ppm_per_sqrt_ms: number(0.0, 1000.0)


Drift = Annotated[
    Union[NoDrift, LinearDrift, RandomWalkDrift],  # noqa: UP007
    Field(discriminator="kind"),
]


class ClockConfig(_Strict):
    """Every device's clock and how the fabric keeps them together (see docs/scenario.md).

    Defaults: ±300 ppm (the PCIe reference-clock tolerance), a slow random-walk drift, a
    timestamp counter in the 250 MHz REFCLK domain (±2 ns, half a period), a hop-by-hop
    two-way exchange every 2 µs, a fence from the root every 2 µs.
    """

    enabled: bool = True
    ppm: number(0.0, MAX_PPM) = 300.0
    ppm_distribution: Literal["uniform", "normal"] = "uniform"
    drift: Drift = Field(
        default_factory=lambda: RandomWalkDrift(kind="random_walk", ppm_per_sqrt_ms=0.1)
    )
    initial_offset: NonNegTime = 1000.0
    phy_uncertainty: NonNegTime = 2.0
    sync: bool = True
    sync_interval: Interval = 2000.0
    fence_interval: Interval = 2000.0
    fence_start: NonNegTime | None = None
    ordered_set_flits: count(1, MAX_ITEMS) = FLIT_MODE_ORDERED_SET_FLITS

    @classmethod
    def disabled(cls) -> ClockConfig:
        """What a scenario without a ``clocks:`` section gets: no clock is modelled."""
        return cls(enabled=False)


class ClockStepBack(_Strict):
    """Faulty device: at ``at`` the device's timestamp clock jumps back by ``step``."""

    kind: Literal["clock_step_back"]
    device: DeviceName
    at: NonNegTime
    step: PositiveTime


class OrderedSetWithoutStamp(_Strict):
    """Faulty device: ``device`` sends ordered sets towards ``peer`` without a timestamp —
    the first one at or after ``at``, or every ``every``-th one."""

    kind: Literal["ordered_set_without_stamp"]
    device: DeviceName
    peer: DeviceName
    at: NonNegTime | None = None
    every: count(1, MAX_ITEMS) | None = None

    @model_validator(mode="after")
    def _one_trigger(self) -> OrderedSetWithoutStamp:
        if (self.at is None) == (self.every is None):
            raise ValueError("give exactly one of 'at' or 'every'")
        return self


CLOCK_FAULTS: tuple[type[BaseModel], ...] = (ClockStepBack, OrderedSetWithoutStamp)
