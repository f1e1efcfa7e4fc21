"""LTSSM as a Hypothesis state machine (phy.eq_level3, phy.reset_to_l0).

One rule feeds any protocol event; the invariants are the clause's guarantees
for a correct device: the machine never reaches L0 without phases 0-3 having
succeeded in order since the last reset or retraining request, every step it
takes is a row of the table, and a timeout leads where the table says.
"""

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sitssim.phy.ltssm import (
    EQ_PHASES,
    TIMEOUT_TARGETS,
    TRANSITIONS,
    Event,
    Ltssm,
    LtssmError,
    State,
)

_DISRUPTIVE = {
    Event.RESET,
    Event.TIMEOUT,
    Event.PHASE_FAILED,
    Event.NO_RECEIVER,
    Event.RETRAIN,
    Event.HOT_RESET_REQ,
    Event.DISABLE_REQ,
}

_NEW_ROUND = {Event.TIMEOUT, Event.DISABLE_REQ, Event.HOT_RESET_REQ}


class CorrectDeviceLtssm(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.machine = Ltssm()
        self.succeeded: list[State] = []

    @rule(event=st.sampled_from(list(Event)))
    def send(self, event: Event) -> None:
        self.feed(event)

    def feed(self, event: Event) -> None:
        before = self.machine.state
        try:
            taken = self.machine.handle(event)
        except LtssmError:
            assert self.machine.state == before
            assert event not in self.machine.allowed()
            return
        assert taken in TRANSITIONS
        assert taken.source == before and taken.event == event
        assert self.machine.state == taken.target
        if event == Event.TIMEOUT:
            assert taken.target == TIMEOUT_TARGETS[before]
        # An independent record of the EQ round: what succeeded since it began.
        if event == Event.PHASE_DONE:
            self.succeeded.append(before)
        elif before == State.L0 or taken.target == State.DETECT_QUIET or event in _NEW_ROUND:
            self.succeeded = []

    @rule(steps=st.integers(min_value=1, max_value=30))
    def advance(self, steps: int) -> None:
        """Feed the state's success events, so runs get deep enough to reach L0."""
        for _ in range(steps):
            forward = [e for e in self.machine.allowed() if e not in _DISRUPTIVE]
            if not forward:
                return
            self.feed(forward[0])

    @invariant()
    def l0_only_after_a_complete_level3_round(self) -> None:
        if self.machine.state in (State.L0, State.RECOVERY_RCVRCFG, State.RECOVERY_IDLE):
            assert tuple(self.succeeded) == EQ_PHASES


TestCorrectDeviceLtssm = CorrectDeviceLtssm.TestCase
