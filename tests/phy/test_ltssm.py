"""The sans-I/O LTSSM: its table, its guards, and where timeouts lead."""

import pytest

from sitssim.phy.ltssm import (
    CONFIGURATION,
    EQ_PHASES,
    TIMEOUT_NS,
    TIMEOUT_TARGETS,
    TRANSITIONS,
    Event,
    Ltssm,
    LtssmError,
    State,
)

TO_RCVRLOCK = [
    Event.QUIET_DONE,
    Event.RECEIVER_DETECTED,
    Event.TS_LOCKED,
    Event.TS2_RECEIVED,
    *[Event.HANDSHAKE] * len(CONFIGURATION),
]


def walk(machine: Ltssm, events: list[Event]) -> list[State]:
    return [machine.handle(e).target for e in events]


def test_reset_to_l0_visits_every_training_state_in_order() -> None:
    machine = Ltssm()
    visited = walk(
        machine,
        [
            *TO_RCVRLOCK,
            Event.RCVR_LOCKED,
            *[Event.PHASE_DONE] * 4,
            Event.RCVR_LOCKED,
            Event.TS2_RECEIVED,
            Event.IDLE_RECEIVED,
        ],
    )
    assert visited == [
        State.DETECT_ACTIVE,
        State.POLLING_ACTIVE,
        State.POLLING_CONFIGURATION,
        *CONFIGURATION,
        State.RECOVERY_RCVRLOCK,
        *EQ_PHASES,
        State.RECOVERY_RCVRLOCK,
        State.RECOVERY_RCVRCFG,
        State.RECOVERY_IDLE,
        State.L0,
    ]
    assert machine.phases_done == EQ_PHASES


def test_receiver_lock_leads_into_equalisation_until_the_round_is_complete() -> None:
    machine = Ltssm()
    walk(machine, TO_RCVRLOCK)
    assert machine.handle(Event.RCVR_LOCKED).target == State.EQ_PHASE0
    walk(machine, [Event.PHASE_DONE] * 3)
    assert machine.state == State.EQ_PHASE3 and not machine.eq_complete
    # Lock and configuration events are not accepted while phase 3 is pending.
    for event in (Event.RCVR_LOCKED, Event.TS2_RECEIVED, Event.IDLE_RECEIVED):
        with pytest.raises(LtssmError):
            machine.handle(event)
        assert machine.state == State.EQ_PHASE3
    machine.handle(Event.PHASE_DONE)
    assert machine.eq_complete
    assert machine.handle(Event.RCVR_LOCKED).target == State.RECOVERY_RCVRCFG


def test_a_device_that_skips_phase3_returns_from_phase2() -> None:
    machine = Ltssm(skip_phase3=True)
    walk(machine, [*TO_RCVRLOCK, Event.RCVR_LOCKED, *[Event.PHASE_DONE] * 3])
    assert machine.state == State.RECOVERY_RCVRLOCK
    assert machine.eq_complete and State.EQ_PHASE3 not in machine.phases_done


def test_a_failed_phase_restarts_detect_and_forgets_the_round() -> None:
    machine = Ltssm()
    walk(machine, [*TO_RCVRLOCK, Event.RCVR_LOCKED, Event.PHASE_DONE])
    assert machine.handle(Event.PHASE_FAILED).target == State.DETECT_QUIET
    assert machine.phases_done == ()


def test_retraining_from_l0_runs_a_new_eq_round() -> None:
    machine = Ltssm()
    walk(
        machine,
        [
            *TO_RCVRLOCK,
            Event.RCVR_LOCKED,
            *[Event.PHASE_DONE] * 4,
            Event.RCVR_LOCKED,
            Event.TS2_RECEIVED,
            Event.IDLE_RECEIVED,
        ],
    )
    assert machine.handle(Event.RETRAIN).target == State.RECOVERY_RCVRLOCK
    assert not machine.eq_complete
    assert machine.handle(Event.RCVR_LOCKED).target == State.EQ_PHASE0


def test_an_event_the_table_lacks_raises_and_changes_nothing() -> None:
    machine = Ltssm()
    with pytest.raises(LtssmError, match=r"not allowed in Detect\.Quiet"):
        machine.handle(Event.IDLE_RECEIVED)
    assert machine.state == State.DETECT_QUIET
    assert Event.IDLE_RECEIVED not in machine.allowed()


def test_reset_leads_to_detect_from_every_state() -> None:
    for state in State:
        machine = Ltssm()
        machine.state = state
        assert machine.handle(Event.RESET).target == State.DETECT_QUIET


def test_every_timed_state_has_a_timeout_target_and_vice_versa() -> None:
    assert set(TIMEOUT_NS) == set(TIMEOUT_TARGETS)
    for state, target in TIMEOUT_TARGETS.items():
        machine = Ltssm()
        machine.state = state
        assert machine.handle(Event.TIMEOUT).target == target
    # L0 and Disabled are left only by request, never by a timeout.
    for state in (State.L0, State.DISABLED):
        machine = Ltssm()
        machine.state = state
        with pytest.raises(LtssmError):
            machine.handle(Event.TIMEOUT)


def test_the_table_is_deterministic() -> None:
    """At most one transition applies to any (state, event) under any guard values."""
    for skip in (False, True):
        for state in State:
            for event in Event:
                for complete in (False, True):
                    machine = Ltssm(skip_phase3=skip)
                    machine.state = state
                    if complete:
                        machine._phases_done = list(machine.required_phases)
                    matches = [
                        t
                        for t in TRANSITIONS
                        if t.source == state and t.event == event and machine._holds(t.guard)
                    ]
                    assert len(matches) <= 1, (state, event, skip, complete)
