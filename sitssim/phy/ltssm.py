"""The Link Training and Status State Machine (LTSSM), sans-I/O.

Theory of operation
-------------------
The machine knows states, events and one table; it knows nothing of time,
channels or SimPy. A driver (``training.py``) measures how long each step takes
and feeds the outcome in as an event; :meth:`Ltssm.handle` answers with the
state change, or raises :class:`LtssmError` if the table has no entry for the
event in the current state (the state is then unchanged).

The table (:data:`TRANSITIONS`) is data: ``(state, event, guard) -> (target,
action)``. Two guards make equalisation compulsory:

* Recovery.RcvrLock goes to Recovery.Equalization Phase 0 while the current EQ
  round is incomplete, and to Recovery.RcvrCfg only once it is complete;
* a round is complete when every phase the device runs has reported
  ``PHASE_DONE`` in order: phases 0-3 for a correct device, 0-2 for a faulty
  one that skips phase 3 (a device-profile flag the driver passes in).

So for a correct device no sequence of events reaches L0 without phases 0-3
having succeeded since the last reset or retraining request. Leaving L0 for
dynamic retraining (``RETRAIN``) and every way back through Detect start a new
round.

Timeouts are events too (``TIMEOUT``): the driver sends one when a state has
lasted its timeout (:data:`TIMEOUT_NS`, the PCIe values, which act only as
timeouts) without finishing; :data:`TIMEOUT_TARGETS` says where each leads.
SITS fixes the rate, so the PCIe fallbacks to a lower speed (Recovery.Speed,
Polling.Compliance) are not modelled: an equalisation phase that fails or times
out sends the link back to Detect.Quiet to start over.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from sitssim.protocol.ltssm_states import State


class Event(StrEnum):
    RESET = "reset"  # fundamental reset: from any state
    QUIET_DONE = "quiet_done"  # electrical idle exit seen
    RECEIVER_DETECTED = "receiver_detected"
    NO_RECEIVER = "no_receiver"
    TS_LOCKED = "ts_locked"  # bit/symbol lock, training sets received
    TS2_RECEIVED = "ts2_received"
    HANDSHAKE = "handshake"  # a Configuration substate's exchange succeeded
    IDLE_RECEIVED = "idle_received"
    RCVR_LOCKED = "rcvr_locked"  # CDR locked, training sets verified
    PHASE_DONE = "phase_done"  # an EQ phase met its BER target
    PHASE_FAILED = "phase_failed"
    RETRAIN = "retrain"  # dynamic retraining requested from L0
    HOT_RESET_REQ = "hot_reset"
    DISABLE_REQ = "disable"
    TIMEOUT = "timeout"


EQ_PHASES: tuple[State, ...] = (
    State.EQ_PHASE0,
    State.EQ_PHASE1,
    State.EQ_PHASE2,
    State.EQ_PHASE3,
)
CONFIGURATION: tuple[State, ...] = (
    State.CONFIG_LINKWIDTH_START,
    State.CONFIG_LINKWIDTH_ACCEPT,
    State.CONFIG_LANENUM_WAIT,
    State.CONFIG_LANENUM_ACCEPT,
    State.CONFIG_COMPLETE,
    State.CONFIG_IDLE,
)

# Guards: "eq_complete" / "eq_pending" read the EQ round; "skips_phase3" /
# "runs_phase3" read the device profile. Actions: "phase_done" records the phase
# that just succeeded; "new_round" forgets the round's phases.
Guard = str | None
Action = str | None


@dataclass(frozen=True)
class Transition:
    source: State
    event: Event
    target: State
    guard: Guard = None
    action: Action = None


def _table() -> tuple[Transition, ...]:
    s, e = State, Event
    rows = [
        Transition(s.DETECT_QUIET, e.QUIET_DONE, s.DETECT_ACTIVE),
        Transition(s.DETECT_ACTIVE, e.RECEIVER_DETECTED, s.POLLING_ACTIVE),
        Transition(s.DETECT_ACTIVE, e.NO_RECEIVER, s.DETECT_QUIET),
        Transition(s.POLLING_ACTIVE, e.TS_LOCKED, s.POLLING_CONFIGURATION),
        Transition(s.POLLING_CONFIGURATION, e.TS2_RECEIVED, s.CONFIG_LINKWIDTH_START),
    ]
    for here, there in zip(CONFIGURATION, (*CONFIGURATION[1:], s.RECOVERY_RCVRLOCK), strict=True):
        rows.append(Transition(here, e.HANDSHAKE, there))
    rows += [
        Transition(s.RECOVERY_RCVRLOCK, e.RCVR_LOCKED, s.EQ_PHASE0, guard="eq_pending"),
        Transition(s.RECOVERY_RCVRLOCK, e.RCVR_LOCKED, s.RECOVERY_RCVRCFG, guard="eq_complete"),
        Transition(s.EQ_PHASE0, e.PHASE_DONE, s.EQ_PHASE1, action="phase_done"),
        Transition(s.EQ_PHASE1, e.PHASE_DONE, s.EQ_PHASE2, action="phase_done"),
        Transition(
            s.EQ_PHASE2, e.PHASE_DONE, s.EQ_PHASE3, guard="runs_phase3", action="phase_done"
        ),
        Transition(
            s.EQ_PHASE2,
            e.PHASE_DONE,
            s.RECOVERY_RCVRLOCK,
            guard="skips_phase3",
            action="phase_done",
        ),
        Transition(s.EQ_PHASE3, e.PHASE_DONE, s.RECOVERY_RCVRLOCK, action="phase_done"),
    ]
    for phase in EQ_PHASES:
        rows.append(Transition(phase, e.PHASE_FAILED, s.DETECT_QUIET, action="new_round"))
    rows += [
        Transition(s.RECOVERY_RCVRCFG, e.TS2_RECEIVED, s.RECOVERY_IDLE),
        Transition(s.RECOVERY_IDLE, e.IDLE_RECEIVED, s.L0),
        Transition(s.L0, e.RETRAIN, s.RECOVERY_RCVRLOCK, action="new_round"),
        # A directed Hot Reset or Disable is no exit from L0: the port retrains first and
        # takes it from Recovery.Idle (Disable also from Configuration), PCIe §4.2.6.
        Transition(s.RECOVERY_IDLE, e.HOT_RESET_REQ, s.HOT_RESET, action="new_round"),
        Transition(s.RECOVERY_IDLE, e.DISABLE_REQ, s.DISABLED, action="new_round"),
    ]
    for config in CONFIGURATION:
        rows.append(Transition(config, e.DISABLE_REQ, s.DISABLED, action="new_round"))
    for state, target in TIMEOUT_TARGETS.items():
        rows.append(Transition(state, e.TIMEOUT, target, action="new_round"))
    for state in State:
        rows.append(Transition(state, e.RESET, s.DETECT_QUIET, action="new_round"))
    return tuple(rows)


# Where a timeout leads (PCIe base spec §4.2.6, without the lower-speed fallbacks).
TIMEOUT_TARGETS: MappingProxyType[State, State] = MappingProxyType(
    {
        State.DETECT_QUIET: State.DETECT_ACTIVE,
        State.DETECT_ACTIVE: State.DETECT_QUIET,
        State.POLLING_ACTIVE: State.DETECT_QUIET,
        State.POLLING_CONFIGURATION: State.DETECT_QUIET,
        **{config: State.DETECT_QUIET for config in CONFIGURATION},
        State.RECOVERY_RCVRLOCK: State.CONFIG_LINKWIDTH_START,
        **{phase: State.DETECT_QUIET for phase in EQ_PHASES},
        State.RECOVERY_RCVRCFG: State.DETECT_QUIET,
        State.RECOVERY_IDLE: State.DETECT_QUIET,
        State.HOT_RESET: State.DETECT_QUIET,
    }
)

# PCIe timeouts (ns): Detect.Quiet 12 ms, Polling.Active 24 ms, Polling.Configuration
# 48 ms, Configuration 24 ms (Idle 2 ms), Recovery.RcvrLock 24 ms, EQ phases 1/2/3
# 12/32/32 ms (phase 0 as phase 1), RcvrCfg 48 ms, Recovery.Idle and Hot Reset 2 ms.
# Detect.Active's 12 ms is the Detect.Quiet loop's period.
TIMEOUT_NS: MappingProxyType[State, float] = MappingProxyType(
    {
        State.DETECT_QUIET: 12e6,
        State.DETECT_ACTIVE: 12e6,
        State.POLLING_ACTIVE: 24e6,
        State.POLLING_CONFIGURATION: 48e6,
        **{config: 24e6 for config in CONFIGURATION[:-1]},
        State.CONFIG_IDLE: 2e6,
        State.RECOVERY_RCVRLOCK: 24e6,
        State.EQ_PHASE0: 12e6,
        State.EQ_PHASE1: 12e6,
        State.EQ_PHASE2: 32e6,
        State.EQ_PHASE3: 32e6,
        State.RECOVERY_RCVRCFG: 48e6,
        State.RECOVERY_IDLE: 2e6,
        State.HOT_RESET: 2e6,
    }
)

TRANSITIONS: tuple[Transition, ...] = _table()


class LtssmError(RuntimeError):
    """An event the table does not allow in the current state."""


class Ltssm:
    """One link's LTSSM. ``skip_phase3`` is a faulty device's profile flag."""

    def __init__(self, skip_phase3: bool = False) -> None:
        self.skip_phase3 = skip_phase3
        self.state = State.DETECT_QUIET
        self._phases_done: list[State] = []

    @property
    def required_phases(self) -> tuple[State, ...]:
        return EQ_PHASES[:3] if self.skip_phase3 else EQ_PHASES

    @property
    def eq_complete(self) -> bool:
        """Every phase the device runs has succeeded, in order, in the current round."""
        return tuple(self._phases_done) == self.required_phases

    @property
    def phases_done(self) -> tuple[State, ...]:
        return tuple(self._phases_done)

    def _holds(self, guard: Guard) -> bool:
        if guard is None:
            return True
        return {
            "eq_complete": self.eq_complete,
            "eq_pending": not self.eq_complete,
            "skips_phase3": self.skip_phase3,
            "runs_phase3": not self.skip_phase3,
        }[guard]

    def allowed(self) -> tuple[Event, ...]:
        """Events the table accepts in the current state (guards applied)."""
        seen: dict[Event, None] = {}
        for t in TRANSITIONS:
            if t.source == self.state and self._holds(t.guard):
                seen[t.event] = None
        return tuple(seen)

    def handle(self, event: Event) -> Transition:
        """Apply ``event``; return the transition taken. ``LtssmError`` if none applies."""
        for t in TRANSITIONS:
            if t.source == self.state and t.event == event and self._holds(t.guard):
                if t.action == "phase_done":
                    self._phases_done.append(self.state)
                elif t.action == "new_round":
                    self._phases_done.clear()
                self.state = t.target
                return t
        raise LtssmError(f"event {event.value!r} is not allowed in {self.state.value}")
