"""Stateful property test of the Ack/Nak replay cores over a lossy FIFO link.

Checks the link-layer invariants (and the replay property; the replay mechanism has no
SPEC.md clause ID): the delivered stream equals the sent stream, in order, without loss or
duplicates, whatever the link drops, corrupts or duplicates and however late the replay
timer is served; sequence numbers stay within the window; REPLAY_NUM rolls over, sending the
link to Recovery, on exactly the spec's number of consecutive replays without forward
progress (2**SPEC_REPLAY_NUM_BITS).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from sitssim.link.replay import (
    IDLE_SEQ,
    SPEC_REPLAY_NUM_BITS,
    Ack,
    Deliver,
    EnterRecovery,
    Flit,
    Nak,
    NakPolicy,
    ReplayCause,
    ReplayProfile,
    ReplayReceiver,
    ReplayStarted,
    ReplayTransmitter,
    SelectiveNak,
    Send,
    TxState,
    seq_add,
)

ROLLOVER = 2**SPEC_REPLAY_NUM_BITS
FLIT_FATES = ("arrive", "arrive", "drop", "corrupt", "duplicate")
Dllp = Ack | Nak | SelectiveNak


class LossyReplayLink(RuleBasedStateMachine):
    """One link direction: transmitter -> FIFO flit channel -> receiver, and a FIFO channel
    back for Acks/Naks. Either channel may lose, the flit channel also corrupt or duplicate;
    time advances arbitrarily, so the replay timer may be served late."""

    @initialize(
        policy=st.sampled_from(NakPolicy),
        window=st.integers(1, 6),
        first_seq=st.sampled_from([1, 1020, 1023]),
        ack_every=st.integers(1, 3),
        hold=st.integers(1, 4),
        initial=st.integers(0, 6),
    )
    def setup(
        self,
        policy: NakPolicy,
        window: int,
        first_seq: int,
        ack_every: int,
        hold: int,
        initial: int,
    ) -> None:
        self.profile = ReplayProfile(
            max_unacknowledged_flits=window,
            nak_policy=policy,
            selective_hold_flits=hold if policy is NakPolicy.SELECTIVE else 0,
            ack_every_flits=ack_every,
            ack_delay_ns=40.0,
        )
        self.first_seq = first_seq
        self.tx = ReplayTransmitter(self.profile, first_seq)
        self.rx = ReplayReceiver(self.profile, first_seq)
        self.flits: deque[Flit] = deque()
        self.dllps: deque[Dllp] = deque()
        self.now = 0.0
        self.sent: list[int] = []
        self.delivered: list[int] = []
        # Oracle, kept independently of the cores: the unacknowledged sequence numbers in
        # order, replays since the last forward progress, and whether Recovery was asked for.
        self.unacked: deque[int] = deque()
        self.consecutive = 0
        self.in_recovery = False
        self._send(initial)

    # -- oracle -----------------------------------------------------------------------
    def _retire_through(self, seq: int) -> None:
        if seq in self.unacked:
            while self.unacked.popleft() != seq:
                pass
            self.consecutive = 0

    def _expect_replay(self, actions: list, cause: ReplayCause, flits: list[int]) -> None:
        self.consecutive += 1
        if self.consecutive == ROLLOVER:
            assert actions == [EnterRecovery(len(self.unacked))], actions
            self.consecutive = 0
            self.in_recovery = True
            return
        head = actions[0]
        assert isinstance(head, ReplayStarted), actions
        assert (head.cause, head.replay_num) == (cause, self.consecutive)
        assert [a.flit.seq for a in actions[1:] if isinstance(a, Send)] == flits

    def _tx_dllp(self, dllp: Dllp) -> None:
        actions = self.tx.on_dllp(dllp, self.now)
        if isinstance(dllp, SelectiveNak):
            self._retire_through(seq_add(dllp.seq, -1))
        else:
            self._retire_through(dllp.seq)
        replays = isinstance(dllp, Nak | SelectiveNak) and not self.in_recovery and self.unacked
        if replays:
            selective = isinstance(dllp, SelectiveNak)
            cause = ReplayCause.SELECTIVE_NAK if selective else ReplayCause.NAK
            expected = [self.unacked[0]] if selective else list(self.unacked)
            self._expect_replay(actions, cause, expected)
        else:
            assert actions == []
        self._route_tx(actions)

    def _tx_poll(self) -> None:
        due = self.tx.timer_deadline_ns
        actions = self.tx.poll(self.now)
        if due is not None and self.now >= due:
            self._expect_replay(actions, ReplayCause.TIMEOUT, list(self.unacked))
        else:
            assert actions == []
        self._route_tx(actions)

    # -- plumbing ---------------------------------------------------------------------
    def _route_tx(self, actions: list) -> None:
        self.flits.extend(a.flit for a in actions if isinstance(a, Send))

    def _route_rx(self, actions: list) -> None:
        for action in actions:
            if isinstance(action, Deliver):
                assert action.index == len(self.delivered)
                self.delivered.append(action.flit.payload)
            else:
                self.dllps.append(action)

    def _deliver_flit(self) -> None:
        self._route_rx(self.rx.on_flit(self.flits.popleft(), self.now))

    def _finish_recovery(self) -> None:
        actions = self.tx.recovery_done(self.now)
        self.in_recovery = False
        if self.unacked:
            assert actions[0] == ReplayStarted(
                ReplayCause.RECOVERY, self.unacked[0], len(self.unacked), 0
            )
        else:
            assert actions == []
        self._route_tx(actions)

    # -- rules: one per protocol event ------------------------------------------------
    @precondition(lambda self: self.tx.can_send)
    @rule(n=st.integers(1, 4))
    def send(self, n: int) -> None:
        self._send(n)

    def _send(self, n: int) -> None:
        for _ in range(n):
            if not self.tx.can_send:
                break
            payload = len(self.sent)
            actions = self.tx.send(payload, self.now)
            (only,) = actions
            self.sent.append(payload)
            self.unacked.append(only.flit.seq)
            self._route_tx(actions)

    @rule()
    def send_idle_flit(self) -> None:
        self.flits.append(Flit(IDLE_SEQ))

    @precondition(lambda self: self.flits)
    @rule(fates=st.lists(st.sampled_from(FLIT_FATES), min_size=1, max_size=8))
    def carry_flits(self, fates: list[str]) -> None:
        """Flits leave the head of the FIFO one by one: each arrives, is lost, arrives
        corrupted, or is duplicated."""
        for fate in fates:
            if not self.flits:
                return
            if fate == "duplicate":
                self.flits.appendleft(self.flits[0])
            elif fate == "corrupt":
                self.flits.popleft()
                self._route_rx(self.rx.on_corrupt_flit(self.now))
            elif fate == "drop":
                self.flits.popleft()
            else:
                self._deliver_flit()
            self._check_invariants()

    @precondition(lambda self: self.dllps)
    @rule(lost=st.lists(st.booleans(), min_size=1, max_size=4))
    def carry_dllps(self, lost: list[bool]) -> None:
        """Acks/Naks leave the head of the reverse FIFO one by one: each arrives or is lost."""
        for is_lost in lost:
            if not self.dllps:
                return
            dllp = self.dllps.popleft()
            if not is_lost:
                self._tx_dllp(dllp)
            self._check_invariants()

    @rule(dt=st.floats(0.0, 5_000.0))
    def advance_time(self, dt: float) -> None:
        self.now += dt
        self._route_rx(self.rx.poll(self.now))
        self._tx_poll()

    @precondition(lambda self: self.tx.timer_deadline_ns is not None)
    @rule(late=st.floats(0.0, 1_000.0))
    def replay_timer_expires(self, late: float) -> None:
        self.now = max(self.now, self.tx.timer_deadline_ns or 0.0) + late
        self._tx_poll()

    @precondition(lambda self: self.tx.state is TxState.RECOVERY)
    @rule(flush=st.booleans())
    def link_retrained(self, flush: bool) -> None:
        if flush:
            self.flits.clear()
            self.dllps.clear()
        self._finish_recovery()

    # -- invariants: one per property -------------------------------------------------
    @invariant()
    def delivered_stream_is_a_prefix_of_the_sent_stream(self) -> None:
        assert self.delivered == self.sent[: len(self.delivered)]
        assert self.rx.expected_seq == seq_add(self.first_seq, len(self.delivered))

    @invariant()
    def retry_buffer_matches_the_oracle_and_its_bound(self) -> None:
        assert self.tx.unacknowledged == len(self.unacked)
        assert self.tx.unacknowledged <= self.profile.max_unacknowledged_flits

    @invariant()
    def replay_num_counts_replays_since_forward_progress(self) -> None:
        assert self.tx.replay_num == self.consecutive < ROLLOVER
        assert (self.tx.state is TxState.RECOVERY) == self.in_recovery

    def _check_invariants(self) -> None:
        self.delivered_stream_is_a_prefix_of_the_sent_stream()
        self.retry_buffer_matches_the_oracle_and_its_bound()
        self.replay_num_counts_replays_since_forward_progress()

    def teardown(self) -> None:
        """Liveness: once the link stops misbehaving, everything sent is delivered."""
        if not hasattr(self, "tx"):
            return
        for _ in range(100):
            if self.in_recovery:
                self._finish_recovery()
            while self.flits:
                self._deliver_flit()
                self._check_invariants()
            while self.dllps:
                self._tx_dllp(self.dllps.popleft())
                self._check_invariants()
            deadlines = [
                d for d in (self.rx.ack_deadline_ns, self.tx.timer_deadline_ns) if d is not None
            ]
            if not (self.unacked or deadlines or self.flits or self.dllps):
                break
            if not deadlines:
                continue
            self.now = max(self.now, min(deadlines))
            self._route_rx(self.rx.poll(self.now))
            self._tx_poll()
            self._check_invariants()
        assert not self.unacked and not self.flits and not self.dllps
        assert self.delivered == self.sent


TestLossyReplayLink = LossyReplayLink.TestCase


@pytest.mark.parametrize("seed", range(12))
def test_long_seeded_random_walks_keep_the_same_properties(seed: int) -> None:
    """The same machine, rules and checks as above, driven for many more steps by a seeded
    random walk: it reaches deep states (wraps, repeated rollovers, selective holds) that
    the short Hypothesis runs seldom reach."""
    rng = np.random.default_rng(seed)
    link = LossyReplayLink()
    link.setup(
        policy=list(NakPolicy)[seed % 2],
        window=int(rng.integers(1, 9)),
        first_seq=int(rng.choice([1, 1000, 1023])),
        ack_every=int(rng.integers(1, 4)),
        hold=int(rng.integers(1, 5)),
        initial=int(rng.integers(0, 4)),
    )
    for _ in range(400):
        step = int(rng.integers(0, 7))
        if step == 0 and link.tx.can_send:
            link.send(n=int(rng.integers(1, 5)))
        elif step == 1:
            link.send_idle_flit()
        elif step in (2, 3) and link.flits:
            n = int(rng.integers(1, 9))
            link.carry_flits(fates=[str(f) for f in rng.choice(FLIT_FATES, size=n)])
        elif step == 4 and link.dllps:
            link.carry_dllps(lost=[bool(b) for b in rng.random(int(rng.integers(1, 5))) < 0.3])
        elif step == 5:
            link.advance_time(dt=float(rng.uniform(0.0, 5_000.0)))
        elif link.tx.timer_deadline_ns is not None:
            link.replay_timer_expires(late=float(rng.uniform(0.0, 1_000.0)))
        if link.tx.state is TxState.RECOVERY and rng.random() < 0.5:
            link.link_retrained(flush=bool(rng.random() < 0.5))
        link._check_invariants()
    link.teardown()
