"""Unit tests for sitssim.link.credits: credit gate, buffer accounting, UpdateFC, stalls."""

from __future__ import annotations

import pytest

from sitssim.link.credits import (
    INFINITE,
    SPEC_MAX_UPDATE_INTERVAL_NS,
    ClassCredits,
    CreditInvariantError,
    CreditKind,
    CreditReceiver,
    CreditSender,
    CreditStall,
    CreditViolation,
    FcClass,
    UpdateFC,
    check_conservation,
    tlp_credits,
)

HDR, DATA = CreditKind.HDR, CreditKind.DATA
P, NP, CPL = FcClass.P, FcClass.NP, FcClass.CPL


def advert(
    p: tuple[int, int] = (2, 8), np: tuple[int, int] = (4, 1), cpl: tuple[int, int] = (3, 16)
) -> dict[FcClass, ClassCredits]:
    return {P: ClassCredits(*p), NP: ClassCredits(*np), CPL: ClassCredits(*cpl)}


def test_a_tlp_costs_one_header_and_one_data_credit_per_16_bytes() -> None:
    assert tlp_credits(0) == ClassCredits(1, 0)
    assert tlp_credits(1) == ClassCredits(1, 1)
    assert tlp_credits(16) == ClassCredits(1, 1)
    assert tlp_credits(17) == ClassCredits(1, 2)
    assert tlp_credits(4096) == ClassCredits(1, 256)
    with pytest.raises(ValueError):
        tlp_credits(-1)


def test_a_sender_never_sends_without_credit() -> None:
    tx = CreditSender(advert())
    assert tx.can_send(P, 64)
    tx.consume(P, 64, 0.0)
    tx.consume(P, 64, 0.0)
    assert tx.available(P, HDR) == 0 and tx.available(P, DATA) == 0
    assert not tx.can_send(P, 0)
    with pytest.raises(CreditViolation):
        tx.consume(P, 0, 0.0)
    assert tx.consumed(P, HDR) == 2 and tx.consumed(P, DATA) == 8


def test_header_and_data_credits_are_checked_separately() -> None:
    tx = CreditSender(advert(p=(4, 4)))
    assert not tx.can_send(P, 65)  # 5 data credits
    tx.consume(P, 64, 0.0)
    assert tx.available(P, HDR) == 3
    assert tx.can_send(NP, 0)
    assert not tx.can_send(NP, 32)  # NP data: 1 credit advertised


def test_infinite_credits_are_never_counted() -> None:
    tx = CreditSender(advert(np=(4, INFINITE), cpl=(INFINITE, INFINITE)))
    for _ in range(1000):
        tx.consume(CPL, 4096, 0.0)
    assert tx.available(CPL, HDR) is None and tx.is_infinite(CPL, DATA)
    tx.consume(NP, 4096, 0.0)
    assert tx.available(NP, HDR) == 3
    assert tx.available(NP, DATA) is None


def test_credits_return_by_updatefc_with_cumulative_limits() -> None:
    tx, rx = CreditSender(advert()), CreditReceiver(advert())
    tx.consume(P, 64, 10.0)
    tx.consume(P, 16, 10.0)
    rx.receive(P, 64, 20.0)
    rx.receive(P, 16, 20.0)
    assert rx.occupied(P, DATA) == 5
    (update,) = rx.release(P, 64, 30.0)
    assert update == UpdateFC(P, hdr_limit=3, data_limit=12)  # the 16-B TLP still holds space
    tx.on_update_fc(update, 40.0)
    assert tx.available(P, HDR) == 1 and tx.available(P, DATA) == 7


def test_stall_is_recorded_from_refusal_until_credit_returns() -> None:
    tx, rx = CreditSender(advert()), CreditReceiver(advert())
    for t in (0.0, 1.0):
        assert tx.try_consume(P, 64, t)
        rx.receive(P, 64, t)
    assert not tx.try_consume(P, 64, 100.0)
    assert not tx.try_consume(P, 64, 150.0)
    assert tx.stall_started_ns(P) == 100.0
    assert tx.try_consume(NP, 0, 160.0)  # other classes are not stalled
    tx.on_update_fc(UpdateFC(P, 2, 8), 200.0)  # nothing freed yet: still stalled
    assert tx.stall_started_ns(P) == 100.0
    (update,) = rx.release(P, 64, 300.0)
    tx.on_update_fc(update, 400.0)
    assert tx.stall_started_ns(P) is None
    assert tx.stalls == [CreditStall(P, 100.0, 400.0, ClassCredits(1, 4))]
    assert tx.stalls[0].duration_ns == 300.0


def test_stall_ends_when_a_smaller_tlp_goes_through() -> None:
    tx = CreditSender(advert(p=(3, 4)))
    tx.consume(P, 48, 0.0)
    assert not tx.try_consume(P, 64, 5.0)
    assert tx.try_consume(P, 16, 7.0)
    assert tx.stalls == [CreditStall(P, 5.0, 7.0, ClassCredits(1, 4))]


def test_updatefc_is_periodic_and_repairs_a_lost_one() -> None:
    adv = advert()
    rx = CreditReceiver(adv, update_threshold=ClassCredits(hdr=100, data=100), now_ns=0.0)
    tx = CreditSender(adv)
    assert rx.update_interval_ns == SPEC_MAX_UPDATE_INTERVAL_NS
    assert rx.next_update_due_ns == pytest.approx(30_000.0)
    tx.consume(P, 64, 0.0)
    rx.receive(P, 64, 0.0)
    assert rx.release(P, 64, 1_000.0) == []  # below the threshold: wait for the timer
    assert rx.poll(29_999.0) == []
    lost = rx.poll(30_000.0)
    assert {u.fc_class for u in lost} == {P, NP, CPL}
    assert rx.next_update_due_ns == pytest.approx(60_000.0)
    assert tx.available(P, HDR) == 1  # the UpdateFCs were lost
    for update in rx.poll(60_000.0):
        tx.on_update_fc(update, 60_100.0)
    assert tx.available(P, HDR) == 2 and tx.available(P, DATA) == 8


def test_an_immediate_update_restarts_the_class_timer() -> None:
    rx = CreditReceiver(advert(), now_ns=0.0)
    rx.receive(NP, 0, 0.0)
    rx.release(NP, 0, 10_000.0)
    assert [u.fc_class for u in rx.poll(30_000.0)] == [P, CPL]
    assert [u.fc_class for u in rx.poll(40_000.0)] == [NP]


def test_all_infinite_receiver_never_needs_an_update() -> None:
    inf = (INFINITE, INFINITE)
    rx = CreditReceiver(advert(p=inf, np=inf, cpl=inf))
    assert rx.next_update_due_ns is None
    assert rx.poll(1e9) == []


def test_a_receiver_catches_a_sender_that_overruns_its_buffer() -> None:
    rx = CreditReceiver(advert(p=(1, 8)))
    rx.receive(P, 16, 0.0)
    with pytest.raises(CreditInvariantError, match="above the advertised"):
        rx.receive(P, 16, 1.0)


def test_releasing_more_than_was_buffered_is_caught() -> None:
    rx = CreditReceiver(advert())
    with pytest.raises(CreditInvariantError, match="never negative"):
        rx.release(CPL, 16, 0.0)


def test_updatefc_may_not_move_back_or_grant_beyond_the_advertisement() -> None:
    tx = CreditSender(advert())
    tx.consume(P, 0, 0.0)
    tx.on_update_fc(UpdateFC(P, 3, 8), 0.0)
    with pytest.raises(CreditInvariantError, match="moved back"):
        tx.on_update_fc(UpdateFC(P, 2, 8), 1.0)
    with pytest.raises(CreditInvariantError, match="above the advertised"):
        tx.on_update_fc(UpdateFC(CPL, 4, 16), 1.0)


def test_conservation_holds_through_a_round_trip_and_catches_a_miscount() -> None:
    adv = advert()
    tx, rx = CreditSender(adv), CreditReceiver(adv, update_threshold=ClassCredits(9, 99))
    check_conservation(tx, rx, {})
    tx.consume(P, 64, 0.0)
    check_conservation(tx, rx, {P: ClassCredits(1, 4)})
    rx.receive(P, 64, 1.0)
    check_conservation(tx, rx, {})
    rx.release(P, 64, 2.0)
    check_conservation(tx, rx, {})
    updates = rx.poll(30_000.0)
    check_conservation(tx, rx, {})
    for update in updates:
        tx.on_update_fc(update, 30_001.0)
    check_conservation(tx, rx, {})
    assert tx.available(P, DATA) == adv[P].data
    tx.consume(P, 16, 30_002.0)
    with pytest.raises(CreditInvariantError, match="available"):
        check_conservation(tx, rx, {})  # the driver forgot the TLP on the wire


def test_advertisement_and_timing_inputs_are_validated() -> None:
    with pytest.raises(ValueError):
        CreditSender({P: ClassCredits(1, 1)})
    with pytest.raises(ValueError):
        CreditSender(advert(p=(-1, 1)))
    with pytest.raises(ValueError):
        CreditReceiver(advert(), update_interval_ns=0.0)
    tx = CreditSender(advert())
    tx.consume(NP, 0, 10.0)
    with pytest.raises(CreditInvariantError, match="backwards"):
        tx.consume(NP, 0, 9.0)
