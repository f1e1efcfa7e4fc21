"""Scenario sections of the physical layer: channels, the PHY device profile, faults, drift.

* ``links.<profile>.channel`` (:class:`ChannelBlock`): the signal-level channel of
  every link using that link profile. The defaults are a nominal channel that
  trains well within 200 µs.
* ``phy`` (:class:`PhyProfile`): the protocol parameters every PHY implements,
  defaulting to the spec (retrain after 3 training cycles above 1e-6, 512-symbol
  PRBS31 training sequences, all four EQ phases, a 1e9-bit training cycle,
  TRAIN_CTRL[7:4] = 0), and the documented cost of each training step
  (:class:`PhyCosts`). How *many* steps a link needs comes from its channel; what
  each step costs comes from here.
* ``faults`` (the ``PHY_FAULTS`` kinds): one link's PHY deviating from the spec the
  way faulty silicon or firmware would (skip EQ phase 3, retrain after N windows
  or at another threshold, a PRBS15 or short training sequence). The unit of a
  PHY device in this model is the link: both of its ports run the faulty firmware.
* ``drift`` (:class:`ChannelDrift`): a step or ramp in one link's loss or SNR
  during the run, on the traffic clock (0 = the moment the last link reaches L0).

Links are named by their endpoints, ``<a>-<b>`` (e.g. ``gpu0-sw1.0``), in either
order; reports use the sorted order. Checks that need the built fabric or the
run's duration (an unknown link, a time after the run ends) are in
:func:`sitssim.phy.links.check_phy_references`. This module does not import
``sitssim.scenario`` at import time, because the scenario imports it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from sitssim.config.presets import PRESET_NAMES
from sitssim.errors import LocatedValueError, shown
from sitssim.quantities import MAX_DB, PositiveTime, Time, count, number
from sitssim.units import NUMBER

# ASCII (units.NUMBER): '٥dB' must not be read as 5 dB.
_DB = re.compile(rf"^\s*{NUMBER}\s*dB\s*$", re.ASCII)
_UI = re.compile(rf"^\s*{NUMBER}\s*UI\s*$", re.ASCII)


def _number_with_unit(pattern: re.Pattern[str], unit: str, example: str) -> Any:
    def parse(value: object) -> object:
        if isinstance(value, bool):
            raise ValueError(f"expected a number of {unit} like {example!r}, got {value!r}")
        if isinstance(value, str):
            match = pattern.match(value)
            if match is None:
                raise ValueError(
                    f"expected a number of {unit} like {example!r}, got {shown(value)}"
                )
            return float(match.group(1))
        return value

    return parse


Decibel = Annotated[
    float,
    BeforeValidator(_number_with_unit(_DB, "dB", "6dB")),
    Field(ge=0, le=MAX_DB, allow_inf_nan=False),
]
PositiveDecibel = Annotated[
    float,
    BeforeValidator(_number_with_unit(_DB, "dB", "30dB")),
    Field(gt=0, le=MAX_DB, allow_inf_nan=False),
]
UnitIntervals = Annotated[
    float,
    BeforeValidator(_number_with_unit(_UI, "UI", "0.01UI")),
    Field(ge=0, lt=0.5, allow_inf_nan=False),
]
NonNegTime = Time
Ber = number(0.0, 1.0)
# Retrain counters: a 16-bit hardware counter of training cycles.
RetrainWindows = count(1, 2**16 - 1)
# Training sequences are drawn and equalised as one numpy array per LMS step.
SequenceSymbols = count(1, 2**16)
LinkName = Annotated[str, Field(min_length=3, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]
PrbsOrder = Literal[7, 15, 23, 31]

# The spec's values (SPEC.md, L1 clauses).
SPEC_RETRAIN_WINDOWS = 3
SPEC_RETRAIN_THRESHOLD = 1e-6
SPEC_TRAINING_PRBS = 31
SPEC_TRAINING_SYMBOLS = 512
RAMP_STEP_DB = 0.1
# LMS weight updates per training block (equalizer.EqProfile): a length must divide by it.
_UPDATES_PER_BLOCK = 16


def _whole_lms_updates(symbols: int) -> int:
    if symbols % _UPDATES_PER_BLOCK:
        raise ValueError(
            f"training sequences must be a multiple of {_UPDATES_PER_BLOCK} symbols "
            f"(the receiver makes {_UPDATES_PER_BLOCK} LMS updates per sequence), got {symbols}"
        )
    return symbols


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChannelBlock(_Strict):
    """The signal-level channel of a link profile (both directions alike).

    ``loss_spread_db`` gives every link its own loss, uniform within
    ``loss_db ± loss_spread_db`` on a 0.25 dB grid (board-to-board variation);
    links with the same loss share one signal-level computation.
    """

    loss_db: Decibel = Field(default=6.0, description="insertion loss at Nyquist (16 GHz)")
    loss_spread_db: Decibel = 0.0
    snr_db: PositiveDecibel = Field(default=30.0, description="receiver-input SNR")
    rj_ui: UnitIntervals = Field(default=0.01, description="random jitter, RMS")
    dielectric_fraction: number(0.0, 1.0) = 0.75
    pre_cursors: Annotated[int, Field(ge=0, le=8, strict=True)] = 2
    post_cursors: Annotated[int, Field(ge=1, le=256, strict=True)] = 12

    @model_validator(mode="after")
    def _spread_fits(self) -> ChannelBlock:
        if self.loss_spread_db > self.loss_db:
            raise LocatedValueError(
                ("loss_spread_db",),
                f"a spread of {self.loss_spread_db:g} dB around {self.loss_db:g} dB "
                "would give links a negative loss",
            )
        return self


class PhyCosts(_Strict):
    """What each training step costs a device. How many steps a link needs comes from its
    channel; these are the costs per step, each with where its default comes from.
    ``docs/assumptions.md`` tabulates how far each may move before a shipped scenario's
    ``phy.reset_to_l0`` verdict flips.

    * ``detect_quiet`` / ``detect_active`` (1 µs each): electrical-idle exit, and the
      receiver-detect charge measurement of the partner's termination. PCIe fixes only
      the 12 ms Detect.Quiet timeout; the 1 µs is our assumption.
    * ``state_handshake`` (500 ns): firmware latency of each Polling, Configuration and
      non-EQ Recovery substate, on top of the ordered sets it exchanges (their count is
      PCIe's, ``training.SETS_PER_STATE``). No published figure; our assumption.
    * ``eq_handshake`` (1 µs): each EQ phase's request/acknowledge exchange (the EC
      field of the training sets). No published figure; our assumption.
    * ``preset_hold`` (1 µs): per Tx preset tried, before the receiver evaluates it.
      PCIe Base Spec (3.0 on), §4.2.6.4.2 Recovery.Equalization, as we recall it (the
      PCI-SIG text is not public, and no copy could be checked): a port that requests
      new Tx settings waits 500 ns plus the round trip through its partner's logic
      before it evaluates them; the other 500 ns is that round trip.
    * ``lms_block`` (2 µs): the receiver's adaptation engine processing one training
      set (error accumulation, tap update, eye metric), beyond the set's own symbols.
      No vendor publishes this figure; 2 µs assumes a firmware-assisted loop (about
      1000 cycles of a 500 MHz SerDes microcontroller per set). PCIe bounds it only
      from above: a request's evaluation must finish within 2 ms (§4.2.6.4.2).
    * ``cdr_update`` (2 ns): loop latency of one CDR phase update beyond its
      integration window: 16 PHYCLK cycles at 8 GHz (SPEC.md's PHYCLK) for the phase
      detector, loop filter and phase interpolator; our assumption.
    """

    detect_quiet: NonNegTime = 1000.0
    detect_active: NonNegTime = 1000.0
    state_handshake: NonNegTime = 500.0
    eq_handshake: NonNegTime = 1000.0
    preset_hold: NonNegTime = 1000.0
    lms_block: NonNegTime = 2000.0
    cdr_update: NonNegTime = 2.0


class PhyProfile(_Strict):
    """The PHY parameters every device implements; defaults are the spec's."""

    retrain_windows: RetrainWindows = SPEC_RETRAIN_WINDOWS
    retrain_threshold: Ber = SPEC_RETRAIN_THRESHOLD
    # 1e15 bits is 1000 s of a 1 Tb/s direction, beyond the longest simulated run.
    training_cycle_bits: number(1.0, 1e15) = 1e9
    training_prbs: PrbsOrder = SPEC_TRAINING_PRBS
    training_symbols: SequenceSymbols = SPEC_TRAINING_SYMBOLS
    run_eq_phase3: bool = True
    eq_ber_target: number(0.0, 1.0, open_low=True, open_high=True) = 1e-4
    initial_preset: str = "Q4"
    train_ctrl: Annotated[int, Field(ge=0, le=3, strict=True)] = 0
    costs: PhyCosts = Field(default_factory=PhyCosts)

    @field_validator("initial_preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        if value not in PRESET_NAMES:
            raise ValueError(f"unknown Tx preset {shown(value)}; known: {', '.join(PRESET_NAMES)}")
        return value

    @field_validator("training_symbols")
    @classmethod
    def _whole_updates(cls, value: int) -> int:
        return _whole_lms_updates(value)


# --- faults ------------------------------------------------------------------


class SkipEqPhase3(_Strict):
    """Faulty PHY: never runs EQ phase 3 (goes from phase 2 straight back to RcvrLock)."""

    kind: Literal["skip_eq_phase3"]
    link: LinkName

    def overrides(self) -> dict[str, Any]:
        return {"run_eq_phase3": False}


class RetrainAfterWindows(_Strict):
    """Faulty PHY: retrains after ``windows`` consecutive training cycles above threshold."""

    kind: Literal["retrain_windows"]
    link: LinkName
    windows: RetrainWindows

    def overrides(self) -> dict[str, Any]:
        return {"retrain_windows": self.windows}


class RetrainThreshold(_Strict):
    """Faulty PHY: compares each training cycle's BER with ``ber`` instead of 1e-6."""

    kind: Literal["retrain_threshold"]
    link: LinkName
    ber: Ber

    def overrides(self) -> dict[str, Any]:
        return {"retrain_threshold": self.ber}


class TrainingPrbs(_Strict):
    """Faulty PHY: its transmitters send training sequences of another PRBS order."""

    kind: Literal["training_prbs"]
    link: LinkName
    order: PrbsOrder

    def overrides(self) -> dict[str, Any]:
        return {"training_prbs": self.order}


class TrainingSymbols(_Strict):
    """Faulty PHY: its training sequences are ``symbols`` long instead of 512."""

    kind: Literal["training_symbols"]
    link: LinkName
    symbols: SequenceSymbols

    @field_validator("symbols")
    @classmethod
    def _whole_updates(cls, value: int) -> int:
        return _whole_lms_updates(value)

    def overrides(self) -> dict[str, Any]:
        return {"training_symbols": self.symbols}


PHY_FAULTS: tuple[type[BaseModel], ...] = (
    SkipEqPhase3,
    RetrainAfterWindows,
    RetrainThreshold,
    TrainingPrbs,
    TrainingSymbols,
)
PHY_FAULT_KINDS: dict[str, type[BaseModel]] = {
    m.model_fields["kind"].annotation.__args__[0]: m  # type: ignore[union-attr]
    for m in PHY_FAULTS
}


# --- drift -------------------------------------------------------------------


class ChannelDrift(_Strict):
    """A change of one link's channel during the run (traffic clock).

    ``step``: from ``start`` the channel has the given ``loss_db`` / ``snr_db``, back
    to its own values at ``end`` if given. ``ramp``: the values move linearly (in
    0.1 dB steps) from the link's own at ``start`` to the given ones at ``end`` and
    stay there. Entries of one link apply in order of ``start``.
    """

    link: LinkName
    kind: Literal["step", "ramp"] = "step"
    start: NonNegTime
    end: PositiveTime | None = None
    loss_db: Decibel | None = None
    snr_db: PositiveDecibel | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ChannelDrift:
        if self.loss_db is None and self.snr_db is None:
            raise ValueError("give 'loss_db' and/or 'snr_db': what the channel drifts to")
        if self.kind == "ramp" and self.end is None:
            raise LocatedValueError(("end",), "a ramp needs 'end', when it reaches its values")
        if self.end is not None and self.end <= self.start:
            raise LocatedValueError(("end",), "'end' must come after 'start'")
        return self

    def value_at(self, own: float, target: float | None, t_ns: float) -> float:
        """This drift's value of a parameter at traffic time ``t_ns`` (``own`` if untouched)."""
        if target is None or t_ns < self.start:
            return own
        if self.kind == "step":
            return own if self.end is not None and t_ns >= self.end else target
        assert self.end is not None
        share = (t_ns - self.start) / (self.end - self.start)
        if share <= 0:
            return own
        if share >= 1:
            return target
        # Ramps move in RAMP_STEP_DB steps, so a ramp visits few distinct channels.
        return round((own + share * (target - own)) / RAMP_STEP_DB) * RAMP_STEP_DB

    @property
    def last_change_ns(self) -> float:
        return self.end if self.end is not None else self.start
