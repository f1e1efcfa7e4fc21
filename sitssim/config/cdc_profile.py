"""Scenario models for the CDC FIFO: the ``link_layer.cdc`` block and its fault.

Kept free of ``sitssim.scenario`` imports, because the scenario module imports these.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from sitssim.config.cdc_device import CORNERS, MAX_DEPTH, closing_divider, flop_timing
from sitssim.errors import LocatedValueError, shown
from sitssim.quantities import count
from sitssim.units import NUMBER

CornerName = Literal["SS/125C", "TT/25C", "FF/0C"]
# ASCII (units.NUMBER): '٨GHz' must not be read as 8 GHz.
_FREQUENCY = re.compile(rf"^\s*{NUMBER}\s*(Hz|kHz|MHz|GHz)\s*$", re.ASCII)
_FREQUENCY_UNITS = {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}
DEVICE_NAME = r"^[A-Za-z_][A-Za-z0-9_.\-]*$"
# The FIFO model steps every write-clock cycle of a read word, so the read word's width in
# narrow words (the clock ratio) bounds its work; 1024 is 32 times the SITS design's.
MAX_CLOCK_RATIO = 1024


def parse_frequency_hz(text: object) -> float:
    """``'8GHz'`` -> 8e9."""
    names = ", ".join(_FREQUENCY_UNITS)
    if isinstance(text, bool) or not isinstance(text, str):
        raise ValueError(
            f"expected a frequency with a unit, e.g. '250MHz' ({names}), got {shown(text)}"
        )
    match = _FREQUENCY.match(text)
    if match is None:
        raise ValueError(f"expected a frequency like '8GHz' ({names}), got {shown(text)}")
    number, unit = match.groups()
    # float() of the written number, never 10 ** exponent: a huge exponent gives inf at once.
    value = float(number) * _FREQUENCY_UNITS[unit]
    if value <= 0:
        raise ValueError(f"expected a positive frequency, got {shown(text)}")
    return value


def _whole_or_auto(low: int, high: int, what: str) -> Any:
    def check(value: object) -> object:
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"expected {what} from {low} to {high}, or 'auto'; got {shown(value)}")
        return value

    return BeforeValidator(check)


# 1 kHz to 1 THz: below, a clock period outlasts any run; above, no flop can toggle.
Frequency = Annotated[
    float, BeforeValidator(parse_frequency_hz), Field(ge=1e3, le=1e12, allow_inf_nan=False)
]
Flops = Annotated[int, Field(ge=1, le=8, strict=True)]


class CdcProfile(BaseModel):
    """The dual-clock FIFO between PHYCLK and REFCLK, as every link's receiver builds it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    # The before-check words the message; the inner bounds declare the same range.
    fifo_depth: Annotated[
        count(1, MAX_DEPTH) | Literal["auto"],
        _whole_or_auto(1, MAX_DEPTH, "a depth in narrow-word entries"),
    ] = "auto"
    synchronizer_flops: Flops = 2
    sync_clock_divider: Annotated[
        count(1, 64) | Literal["auto"], _whole_or_auto(1, 64, "a PHYCLK divider")
    ] = "auto"
    writer_pipeline: Annotated[int, Field(ge=0, le=64, strict=True)] = 2
    corners: list[CornerName] = Field(default_factory=lambda: list(CORNERS), min_length=1)
    write_clock: Frequency = 8e9
    read_clock: Frequency = 250e6

    @model_validator(mode="after")
    def _buildable(self) -> CdcProfile:
        if len(set(self.corners)) != len(self.corners):
            raise LocatedValueError(("corners",), "each corner may be listed once")
        ratio = self.write_clock / self.read_clock
        if ratio < 2 or abs(ratio - round(ratio)) > 1e-9:
            raise LocatedValueError(
                ("read_clock",),
                f"the write clock must be a whole multiple (at least 2) of the read clock "
                f"(the read word is that many narrow words wide); got a ratio of {ratio:g}",
            )
        if ratio > MAX_CLOCK_RATIO:
            raise LocatedValueError(
                ("read_clock",),
                f"a write/read clock ratio of {ratio:g} makes a read word wider than the "
                f"{MAX_CLOCK_RATIO} narrow words the FIFO model steps through",
            )
        period_ps = 1e12 / self.write_clock
        for corner in self.corners:
            crossing = flop_timing(corner).crossing
            if crossing >= period_ps:
                raise LocatedValueError(
                    ("write_clock",),
                    f"a PHYCLK period of {period_ps:g} ps is shorter than an asynchronous "
                    f"crossing at {corner} ({crossing:.1f} ps); the model needs a slower clock",
                )
        if self.sync_clock_divider == "auto":
            try:
                closing_divider(self.synchronizer_flops, period_ps, self.read_clock)
            except ValueError as exc:
                raise LocatedValueError(
                    ("synchronizer_flops",),
                    f"{exc}, so sync_clock_divider cannot be 'auto': give it explicitly",
                ) from None
        return self

    @classmethod
    def disabled(cls) -> CdcProfile:
        """A scenario without a ``link_layer.cdc`` block: the CDC is not evaluated."""
        return cls(enabled=False)

    def divider(self) -> int:
        """The synchroniser clock divider: given, or the smallest that closes MTBF at SS."""
        if self.sync_clock_divider != "auto":
            return self.sync_clock_divider
        return closing_divider(self.synchronizer_flops, 1e12 / self.write_clock, self.read_clock)


class SynchronizerFlopsFault(BaseModel):
    """Faulty device: ``device``'s receiver on the link from ``peer`` synchronises
    REFCLK→PHYCLK with ``flops`` flops instead of the profile's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["synchronizer_flops"]
    device: Annotated[str, Field(min_length=1, pattern=DEVICE_NAME)]
    peer: Annotated[str, Field(min_length=1, pattern=DEVICE_NAME)]
    flops: Flops
