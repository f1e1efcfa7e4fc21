"""Stateful property test of the flow-control credit cores.

Checks the link-layer invariants (no SPEC.md clause ID): per class and finite
kind, available + in flight + buffered = advertised under any interleaving of send,
arrival at the far end, consumption at the far end, UpdateFC (delivered, lost or late) and
time; no term is ever negative or above the advertisement; a sender never sends without
credit; and once traffic stops, periodic UpdateFCs return every credit.
"""

from __future__ import annotations

from collections import deque

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from sitssim.link.credits import (
    ClassCredits,
    CreditKind,
    CreditReceiver,
    CreditSender,
    FcClass,
    UpdateFC,
    check_conservation,
)

DATA_CREDIT_BYTES = 16  # the spec's data-credit unit, restated independently of the core

credit_amount = st.integers(0, 6)  # 0 advertises infinite credits
data_amount = st.integers(0, 40)


def oracle_cost(payload_bytes: int) -> ClassCredits:
    return ClassCredits(1, -(-payload_bytes // DATA_CREDIT_BYTES))


def total(costs: list[ClassCredits]) -> ClassCredits:
    return ClassCredits(sum(c.hdr for c in costs), sum(c.data for c in costs))


class CreditLink(RuleBasedStateMachine):
    """Sender -> FIFO of TLPs -> receiver buffer -> far-end consumer, and UpdateFCs back on
    a lossy FIFO."""

    @initialize(
        hdr=st.tuples(credit_amount, credit_amount, credit_amount),
        data=st.tuples(data_amount, data_amount, data_amount),
        threshold=st.tuples(st.integers(1, 4), st.integers(1, 20)),
    )
    def setup(
        self,
        hdr: tuple[int, int, int],
        data: tuple[int, int, int],
        threshold: tuple[int, int],
    ) -> None:
        self.advertisement = {
            c: ClassCredits(h, d) for c, h, d in zip(FcClass, hdr, data, strict=True)
        }
        self.sender = CreditSender(self.advertisement)
        self.receiver = CreditReceiver(
            self.advertisement, update_threshold=ClassCredits(*threshold), now_ns=0.0
        )
        self.now = 0.0
        self.wire: deque[tuple[FcClass, int]] = deque()
        self.updates: deque[UpdateFC] = deque()
        self.buffer: dict[FcClass, deque[int]] = {c: deque() for c in FcClass}
        self.refused: dict[FcClass, int] = {}

    def _finite(self, fc_class: FcClass, kind: CreditKind) -> bool:
        return not self.sender.is_infinite(fc_class, kind)

    def _on_wire(self) -> dict[FcClass, ClassCredits]:
        return {c: total([oracle_cost(b) for cls, b in self.wire if cls is c]) for c in FcClass}

    @rule(fc_class=st.sampled_from(FcClass), payload=st.integers(0, 128))
    def send(self, fc_class: FcClass, payload: int) -> None:
        cost = oracle_cost(payload)
        fits = all(
            not self._finite(fc_class, kind)
            or (self.sender.available(fc_class, kind) or 0) >= cost.of(kind)
            for kind in CreditKind
        )
        sent = self.sender.try_consume(fc_class, payload, self.now)
        assert sent == fits
        if sent:
            self.wire.append((fc_class, payload))
            self.refused.pop(fc_class, None)
            assert self.sender.stall_started_ns(fc_class) is None
        else:
            self.refused[fc_class] = payload
            assert self.sender.stall_started_ns(fc_class) is not None

    @precondition(lambda self: self.wire)
    @rule()
    def arrive_at_far_end(self) -> None:
        fc_class, payload = self.wire.popleft()
        self.receiver.receive(fc_class, payload, self.now)
        self.buffer[fc_class].append(payload)

    @rule(fc_class=st.sampled_from(FcClass))
    def consume_at_far_end(self, fc_class: FcClass) -> None:
        if self.buffer[fc_class]:
            payload = self.buffer[fc_class].popleft()
            self.updates.extend(self.receiver.release(fc_class, payload, self.now))

    @rule(dt=st.floats(0.0, 40_000.0))
    def time_passes(self, dt: float) -> None:
        self.now += dt
        self.updates.extend(self.receiver.poll(self.now))

    @precondition(lambda self: self.updates)
    @rule(lost=st.booleans())
    def carry_updatefc(self, lost: bool) -> None:
        update = self.updates.popleft()
        if not lost:
            self.sender.on_update_fc(update, self.now)

    @invariant()
    def credits_are_conserved(self) -> None:
        check_conservation(self.sender, self.receiver, self._on_wire())

    @invariant()
    def each_end_agrees_with_what_the_channel_carried(self) -> None:
        in_buffer = {c: total([oracle_cost(b) for b in self.buffer[c]]) for c in FcClass}
        for fc_class in FcClass:
            for kind in CreditKind:
                if not self._finite(fc_class, kind):
                    continue
                advertised = self.advertisement[fc_class].of(kind)
                occupied = self.receiver.occupied(fc_class, kind)
                available = self.sender.available(fc_class, kind)
                assert occupied == in_buffer[fc_class].of(kind)
                assert available is not None and 0 <= available <= advertised
                assert occupied is not None and 0 <= occupied <= advertised

    @invariant()
    def next_updatefc_is_due_within_one_interval(self) -> None:
        due = self.receiver.next_update_due_ns
        finite_classes = any(self._finite(c, k) for c in FcClass for k in CreditKind)
        assert (due is not None) == finite_classes
        if due is not None:
            assert self.now < due <= self.now + self.receiver.update_interval_ns

    def teardown(self) -> None:
        """Liveness: with traffic stopped and the far end drained, the periodic UpdateFC
        returns every credit, and no class stays stalled for a TLP that fits the buffer."""
        if not hasattr(self, "sender"):
            return
        while self.wire:
            self.arrive_at_far_end()
        for fc_class in FcClass:
            while self.buffer[fc_class]:
                self.consume_at_far_end(fc_class)
        while self.updates:
            self.carry_updatefc(lost=False)
        # Every class's periodic UpdateFC falls due within one interval from now.
        self.now += self.receiver.update_interval_ns
        for update in self.receiver.poll(self.now):
            self.sender.on_update_fc(update, self.now)
        self.credits_are_conserved()
        for fc_class in FcClass:
            for kind in CreditKind:
                if self._finite(fc_class, kind):
                    advertised = self.advertisement[fc_class].of(kind)
                    assert self.sender.available(fc_class, kind) == advertised
            # A TLP larger than the whole advertisement can never go; any other stall ends.
            stalled = self.sender.stall_started_ns(fc_class) is not None
            refused = self.refused.get(fc_class)
            assert stalled == (refused is not None and not self.sender.can_send(fc_class, refused))


TestCreditLink = CreditLink.TestCase
