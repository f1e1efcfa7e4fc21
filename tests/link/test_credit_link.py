"""The run's credit accounting (``CreditLink``): its online invariants and its stall records.

Link-layer invariants, checked while the run goes: credits never above the advertisement, no
buffer holds more than it advertised, nothing leaves a buffer before it was committed.
Each has a faulty caller here (the transport's mutation that ignores credits is in
test_credit_flow.py).
"""

from __future__ import annotations

import pytest

from sitssim.errors import InvariantViolation
from sitssim.link.credit_link import FC_POSTED, N_CLASSES, CreditLink


def link(hdr: int = 2, data: int = 64) -> CreditLink:
    return CreditLink(channel=7, hdr=hdr, data=data, return_ns=100.0, max_payload=256)


def test_a_return_for_credits_never_taken_is_caught_when_applied() -> None:
    credit = link()
    credit.pass_through(credit.cost(FC_POSTED, 256), 10.0, 0.0)
    with pytest.raises(InvariantViolation, match="channel 7: class P credits above the adv"):
        credit.sync(110.0)


def test_returns_are_applied_in_time_order_and_only_once_due() -> None:
    credit = link()
    cost = credit.cost(FC_POSTED, 256)
    assert credit.try_consume(cost, 0.0) and credit.try_consume(cost, 0.0)
    credit.pass_through(cost, 50.0, 0.0)
    credit.pass_through(cost, 20.0, 0.0)
    assert credit.next_return() == 120.0
    assert not credit.fits(cost, 119.0)
    assert credit.fits(cost, 120.0)
    assert (credit.avail_hdr[FC_POSTED], credit.next_return()) == (1, 150.0)


def test_a_sender_that_overruns_the_far_buffer_is_caught() -> None:
    credit = link(hdr=2)
    cost = credit.cost(FC_POSTED, 16)
    credit.receive(cost)
    credit.receive(cost)
    with pytest.raises(InvariantViolation, match=r"buffer holds 3 hdr .* above the advertised 2"):
        credit.receive(cost)


def test_a_message_cannot_leave_before_it_was_committed() -> None:
    credit = link()
    cost = credit.cost(FC_POSTED, 16)
    credit.receive(cost)
    with pytest.raises(InvariantViolation, match=r"leaves the buffer at 5\.0 ns, before"):
        credit.release(cost, 5.0, 9.0)


def test_a_stall_ends_when_its_class_next_gets_credit() -> None:
    credit = link(hdr=1)
    cost = credit.cost(FC_POSTED, 16)
    assert credit.try_consume(cost, 0.0)
    assert not credit.try_consume(cost, 5.0)
    assert not credit.try_consume(cost, 8.0)
    credit.pass_through(cost, 10.0, 1.0)
    # Not there by 12 ns: nothing is charged, the stall goes on.
    assert not credit.take(cost, 12.0, 12.0)
    assert credit.avail_hdr[FC_POSTED] == 0 and credit.stall_start[FC_POSTED] == 5.0
    # Granted ahead (the port is busy until 130 ns): the stall ends at the grant.
    assert credit.take(cost, 130.0, 12.0)
    assert credit.avail_hdr[FC_POSTED] == 0
    assert credit.stalls == [(FC_POSTED, 5.0, 12.0, 1, 1)]
    assert credit.stall_start[FC_POSTED] is None


def test_each_virtual_channel_keeps_its_own_pools() -> None:
    credit = CreditLink(channel=7, hdr=1, data=64, return_ns=100.0, max_payload=256, vcs=2)
    vc0 = credit.cost(FC_POSTED, 16)
    vc1 = credit.cost(FC_POSTED, 16, vc=1)
    assert vc0[0] == FC_POSTED and vc1[0] == N_CLASSES + FC_POSTED
    assert credit.try_consume(vc0, 0.0)
    # VC0's posted header credit is gone; VC1's is its own.
    assert not credit.try_consume(vc0, 0.0)
    assert credit.try_consume(vc1, 0.0)
    assert credit.stall_start[FC_POSTED] == 0.0 and credit.stall_start[vc1[0]] is None
    credit.pass_through(vc1, 10.0, 0.0)
    credit.sync(110.0)
    assert credit.avail_hdr[vc1[0]] == 1 and credit.avail_hdr[FC_POSTED] == 0
    with pytest.raises(InvariantViolation, match="channel 7: VC1 class P credits above"):
        credit.pass_through(vc1, 10.0, 0.0)
        credit.sync(110.0)
