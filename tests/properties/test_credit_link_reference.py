"""The run's hot-path credit accounting agrees with the sans-I/O credit cores.

Link-layer invariants (credits never negative or above the advertisement; a sender never
sends without credit): ``CreditLink`` is the arithmetic of ``CreditSender`` and
``CreditReceiver`` specialised to lossless, immediate UpdateFCs. Any interleaving of
send attempts, arrivals, buffer releases and credit returns must leave both with the same
credits and the same refusals.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sitssim.link.credit_link import FC_CLASSES, CreditLink
from sitssim.link.credits import ClassCredits, CreditKind, CreditReceiver, CreditSender

# How long after its commit a message leaves its buffer (its port may be busy until then).
LATER_NS = (0.0, 3.0)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["send", "arrive", "leave", "deliver", "return"]),
        st.integers(0, 2),
        st.integers(1, 9000),
        st.sampled_from(LATER_NS),
    ),
    max_size=80,
)
# An UpdateFC reaches the sender return_ns after its message left: everything released so
# far has come back once this much more than return_ns has passed.
SETTLE_NS = max(LATER_NS)


@given(ops=OPS, hdr=st.integers(1, 6), data=st.integers(256, 700))
def test_credit_link_matches_the_cores(
    ops: list[tuple[str, int, int, float]], hdr: int, data: int
) -> None:
    max_payload = 4096
    # UpdateFCs take far longer than a whole run of other steps, so the link finds one due
    # exactly when the "return" step delivers them to the cores.
    link = CreditLink(channel=0, hdr=hdr, data=data, return_ns=1e6, max_payload=max_payload)
    advertisement = dict.fromkeys(FC_CLASSES, ClassCredits(hdr=hdr, data=data))
    sender = CreditSender(advertisement)
    receiver = CreditReceiver(advertisement)
    wire: list[tuple[int, int]] = []
    buffer: list[tuple[int, int]] = []
    returning: list = []
    now = 0.0
    for op, fc, size, later in ops:
        now += 10.0
        held = min(size, max_payload)
        cls = FC_CLASSES[fc]
        if op == "send":
            granted = link.try_consume(link.cost(fc, size), now)
            assert granted == sender.try_consume(cls, held, now)
            if granted:
                wire.append((fc, size))
        elif op == "arrive" and wire:
            fc, size = wire.pop(0)
            link.receive(link.cost(fc, size))
            receiver.receive(FC_CLASSES[fc], min(size, max_payload), now)
            buffer.append((fc, size))
        elif op == "leave" and buffer:
            fc, size = buffer.pop(0)
            # Committed now, it may leave the buffer later (its port is busy until then).
            link.release(link.cost(fc, size), now + later, now)
            returning.extend(receiver.release(FC_CLASSES[fc], min(size, max_payload), now))
        elif op == "deliver" and wire:
            # Arrives and is committed at once: delivered, or on to its next port.
            fc, size = wire.pop(0)
            link.pass_through(link.cost(fc, size), now + later, now)
            receiver.receive(FC_CLASSES[fc], min(size, max_payload), now)
            returning.extend(receiver.release(FC_CLASSES[fc], min(size, max_payload), now))
        elif op == "return":
            now += link.return_ns + SETTLE_NS
            link.sync(now)
            for update in returning:
                sender.on_update_fc(update, now)
            returning.clear()
        # Returns are applied lazily, when the sender next looks; look now.
        link.sync(now)
        for c, cls in enumerate(FC_CLASSES):
            assert link.held_hdr[c] == receiver.occupied(cls, CreditKind.HDR)
            assert link.held_data[c] == receiver.occupied(cls, CreditKind.DATA)
    now += link.return_ns + SETTLE_NS
    link.sync(now)
    for update in returning:
        sender.on_update_fc(update, now)
    for c, cls in enumerate(FC_CLASSES):
        assert link.avail_hdr[c] == sender.available(cls, CreditKind.HDR)
        assert link.avail_data[c] == sender.available(cls, CreditKind.DATA)
