"""Unit tests for sitssim.link.replay: the Ack/Nak transmitter and receiver cores."""

from __future__ import annotations

import pytest

from sitssim.link.replay import (
    IDLE_SEQ,
    RX_TRANSITIONS,
    SPEC_REPLAY_NUM_BITS,
    TX_TRANSITIONS,
    Ack,
    Deliver,
    EnterRecovery,
    Flit,
    Nak,
    NakPolicy,
    ReplayCause,
    ReplayInvariantError,
    ReplayProfile,
    ReplayReceiver,
    ReplayStarted,
    ReplayTransmitter,
    RxEvent,
    RxState,
    SelectiveNak,
    Send,
    TxEvent,
    TxState,
    seq_add,
    seq_distance,
)

SELECTIVE = ReplayProfile(nak_policy=NakPolicy.SELECTIVE, selective_hold_flits=4)


def sent_flits(actions: list) -> list[Flit]:
    return [a.flit for a in actions if isinstance(a, Send)]


def send_n(tx: ReplayTransmitter, n: int, now_ns: float = 0.0) -> list[Flit]:
    flits: list[Flit] = []
    for i in range(n):
        flits += sent_flits(tx.send(f"p{tx.next_seq}-{i}", now_ns))
    return flits


def test_sequence_numbers_wrap_from_1023_to_1_and_skip_idle() -> None:
    assert seq_add(1022, 1) == 1023
    assert seq_add(1023, 1) == 1
    assert seq_add(1, -1) == 1023
    assert seq_distance(1023, 1) == 1
    assert seq_distance(5, 5) == 0
    assert all(seq_add(s, 1) != IDLE_SEQ for s in range(1, 1024))


def test_profile_defaults_and_limits() -> None:
    profile = ReplayProfile()
    assert profile.max_unacknowledged_flits == 511
    assert profile.replay_timeout_flits >= 1500
    assert profile.replay_num_rollover == 2**SPEC_REPLAY_NUM_BITS
    with pytest.raises(ValueError):
        ReplayProfile(max_unacknowledged_flits=512)
    with pytest.raises(ValueError):
        ReplayProfile(max_unacknowledged_flits=0)
    with pytest.raises(ValueError):
        ReplayProfile(nak_policy=NakPolicy.SELECTIVE, selective_hold_flits=0)
    # A faulty device's short timer is a behaviour for clauses to catch, not bad input.
    assert ReplayProfile(replay_timeout_flits=100).replay_timeout_flits == 100


def test_lossless_exchange_delivers_in_order_and_empties_the_retry_buffer() -> None:
    tx, rx = ReplayTransmitter(), ReplayReceiver()
    for i, flit in enumerate(send_n(tx, 5)):
        actions = rx.on_flit(flit, 1.0)
        assert actions[0] == Deliver(flit, i)
        assert actions[1] == Ack(flit.seq)
        assert tx.on_dllp(actions[1], 1.0) == []
    assert tx.unacknowledged == 0
    assert tx.timer_deadline_ns is None
    assert rx.delivered == 5


def test_sequence_numbers_wrap_over_a_long_lossless_run() -> None:
    profile = ReplayProfile(max_unacknowledged_flits=8)
    tx, rx = ReplayTransmitter(profile), ReplayReceiver(profile)
    seqs: list[int] = []
    for i in range(1100):
        (send,) = tx.send(i, float(i))
        (deliver, ack) = rx.on_flit(send.flit, float(i))
        assert deliver.flit.payload == i
        seqs.append(deliver.flit.seq)
        tx.on_dllp(ack, float(i))
    assert seqs[1022] == 1023 and seqs[1023] == 1
    assert IDLE_SEQ not in seqs


def test_retry_buffer_is_bounded() -> None:
    tx = ReplayTransmitter(ReplayProfile(max_unacknowledged_flits=3))
    send_n(tx, 3)
    assert not tx.can_send
    with pytest.raises(ReplayInvariantError):
        tx.send("one too many", 0.0)
    tx.on_dllp(Ack(1), 0.0)
    assert tx.can_send


def test_standard_nak_replays_everything_after_the_last_good_flit() -> None:
    tx, rx = ReplayTransmitter(), ReplayReceiver()
    f1, _f2_lost, f3, _f4 = send_n(tx, 4)
    assert isinstance(rx.on_flit(f1, 0.0)[0], Deliver)
    assert rx.on_flit(f3, 0.0) == [Nak(1)]
    assert rx.state is RxState.NAK_SCHEDULED
    actions = tx.on_dllp(Nak(1), 10.0)
    assert actions[0] == ReplayStarted(ReplayCause.NAK, 2, 3, 1)
    assert [f.seq for f in sent_flits(actions)] == [2, 3, 4]
    assert all(a.replay for a in actions[1:])
    delivered = [
        a.flit.seq
        for f in sent_flits(actions)
        for a in rx.on_flit(f, 11.0)
        if isinstance(a, Deliver)
    ]
    assert delivered == [2, 3, 4]


def test_a_nak_is_sent_once_until_the_missing_flit_arrives() -> None:
    tx, rx = ReplayTransmitter(), ReplayReceiver()
    f1, f2, _f3 = send_n(tx, 3)
    assert rx.on_corrupt_flit(0.0) == [Nak(1023)]  # nothing received yet
    assert rx.on_corrupt_flit(0.0) == []
    assert rx.on_flit(f2, 0.0) == []
    assert rx.on_flit(f1, 0.0)[0] == Deliver(f1, 0)
    assert rx.state is RxState.ACTIVE


def test_duplicates_are_discarded_and_acknowledged() -> None:
    tx, rx = ReplayTransmitter(), ReplayReceiver()
    f1, f2 = send_n(tx, 2)
    rx.on_flit(f1, 0.0)
    rx.on_flit(f2, 0.0)
    assert rx.on_flit(f1, 0.0) == [Ack(2)]
    assert rx.delivered == 2


def test_idle_flits_carry_no_sequence_number_and_are_ignored() -> None:
    rx = ReplayReceiver()
    assert rx.on_flit(Flit(IDLE_SEQ), 0.0) == []
    assert rx.expected_seq == 1


def test_selective_nak_replays_one_flit_and_held_flits_follow_it() -> None:
    tx, rx = ReplayTransmitter(SELECTIVE), ReplayReceiver(SELECTIVE)
    f1, f2, f3, f4 = send_n(tx, 4)
    rx.on_flit(f1, 0.0)
    assert rx.on_corrupt_flit(0.0) == []  # f2: its number is unknown until f3 shows the gap
    assert rx.on_flit(f3, 0.0) == [SelectiveNak(2)]
    assert rx.on_flit(f4, 0.0) == []
    assert rx.held == 2
    actions = tx.on_dllp(SelectiveNak(2), 5.0)
    assert actions[0] == ReplayStarted(ReplayCause.SELECTIVE_NAK, 2, 1, 1)
    assert sent_flits(actions) == [f2]
    assert tx.unacknowledged == 3
    out = rx.on_flit(f2, 6.0)
    assert [a.flit for a in out if isinstance(a, Deliver)] == [f2, f3, f4]
    assert out[-1] == Ack(4)


def test_selective_policy_falls_back_to_a_standard_nak_on_a_second_loss() -> None:
    tx, rx = ReplayTransmitter(SELECTIVE), ReplayReceiver(SELECTIVE)
    f1, _f2, f3, _f4, f5 = send_n(tx, 5)
    rx.on_flit(f1, 0.0)
    assert rx.on_flit(f3, 0.0) == [SelectiveNak(2)]
    assert rx.on_flit(f5, 0.0) == [Nak(1)]
    assert rx.held == 0
    assert rx.state is RxState.NAK_SCHEDULED


def test_a_duplicate_of_a_held_flit_is_discarded_without_a_nak() -> None:
    tx, rx = ReplayTransmitter(SELECTIVE), ReplayReceiver(SELECTIVE)
    f1, _f2, f3 = send_n(tx, 3)
    rx.on_flit(f1, 0.0)
    rx.on_flit(f3, 0.0)
    assert rx.on_flit(f3, 0.0) == [Ack(1)]
    assert (rx.state, rx.held) == (RxState.SELECTIVE_WAIT, 1)


def test_a_corrupt_flit_while_awaiting_a_selective_replay_falls_back_to_a_nak() -> None:
    tx, rx = ReplayTransmitter(SELECTIVE), ReplayReceiver(SELECTIVE)
    f1, _f2, f3 = send_n(tx, 3)
    rx.on_flit(f1, 0.0)
    rx.on_flit(f3, 0.0)
    assert rx.on_corrupt_flit(0.0) == [Nak(1)]
    assert (rx.state, rx.held) == (RxState.NAK_SCHEDULED, 0)


def test_selective_hold_buffer_is_bounded() -> None:
    profile = ReplayProfile(nak_policy=NakPolicy.SELECTIVE, selective_hold_flits=1)
    tx, rx = ReplayTransmitter(profile), ReplayReceiver(profile)
    f1, _f2, f3, f4 = send_n(tx, 4)
    rx.on_flit(f1, 0.0)
    assert rx.on_flit(f3, 0.0) == [SelectiveNak(2)]
    assert rx.on_flit(f4, 0.0) == [Nak(1)]


def test_replay_timer_starts_restarts_on_progress_and_stops_when_all_acked() -> None:
    profile = ReplayProfile()
    timeout = profile.replay_timeout_ns
    tx = ReplayTransmitter(profile)
    send_n(tx, 3, now_ns=100.0)
    assert tx.timer_deadline_ns == pytest.approx(100.0 + timeout)
    tx.on_dllp(Ack(1), 200.0)
    assert tx.timer_deadline_ns == pytest.approx(200.0 + timeout)
    tx.on_dllp(Ack(1), 300.0)  # no progress: no restart
    assert tx.timer_deadline_ns == pytest.approx(200.0 + timeout)
    assert tx.poll(199.0 + timeout) == []
    actions = tx.poll(200.0 + timeout)
    assert actions[0] == ReplayStarted(ReplayCause.TIMEOUT, 2, 2, 1)
    assert tx.timer_deadline_ns == pytest.approx(200.0 + 2 * timeout)
    tx.on_dllp(Ack(3), 250.0 + timeout)
    assert tx.timer_deadline_ns is None


@pytest.mark.parametrize("trigger", ["timeout", "nak", "mixed"])
def test_replay_num_rolls_over_on_exactly_the_specs_consecutive_replay(trigger: str) -> None:
    rollover = 2**SPEC_REPLAY_NUM_BITS
    tx = ReplayTransmitter()
    send_n(tx, 2)
    now = 0.0
    for attempt in range(1, rollover + 1):
        if trigger == "timeout" or (trigger == "mixed" and attempt % 2):
            now = tx.timer_deadline_ns or now
            actions = tx.poll(now)
        else:
            actions = tx.on_dllp(Nak(1023), now)  # acknowledges nothing
        if attempt < rollover:
            assert isinstance(actions[0], ReplayStarted)
            assert tx.replay_num == attempt
            assert tx.state is TxState.ACTIVE
        else:
            assert actions == [EnterRecovery(2)]
    assert tx.state is TxState.RECOVERY
    assert tx.replay_num == 0
    assert tx.timer_deadline_ns is None
    assert not tx.can_send


def test_recovery_waits_for_retraining_then_replays_the_buffer() -> None:
    tx = ReplayTransmitter()
    send_n(tx, 3)
    for _ in range(2**SPEC_REPLAY_NUM_BITS):
        tx.poll(tx.timer_deadline_ns or 0.0)
    assert tx.state is TxState.RECOVERY
    with pytest.raises(ReplayInvariantError):
        tx.send("waits", 1e6)
    assert tx.on_dllp(Nak(1), 1e6) == []  # retires flit 1; the replay waits for retraining
    actions = tx.recovery_done(2e6)
    assert actions[0] == ReplayStarted(ReplayCause.RECOVERY, 2, 2, 0)
    assert tx.state is TxState.ACTIVE
    assert tx.timer_deadline_ns == pytest.approx(2e6 + tx.profile.replay_timeout_ns)


def test_forward_progress_resets_replay_num() -> None:
    tx = ReplayTransmitter()
    send_n(tx, 4)
    for _ in range(2**SPEC_REPLAY_NUM_BITS - 1):
        tx.on_dllp(Nak(1023), 0.0)
    assert tx.replay_num == 2**SPEC_REPLAY_NUM_BITS - 1
    actions = tx.on_dllp(Nak(1), 0.0)  # retires flit 1, then replays: a fresh count
    assert isinstance(actions[0], ReplayStarted)
    assert tx.replay_num == 1
    tx.on_dllp(Ack(2), 0.0)
    assert tx.replay_num == 0


def test_a_narrower_counter_rolls_over_sooner() -> None:
    tx = ReplayTransmitter(ReplayProfile(replay_num_bits=1))
    send_n(tx, 1)
    assert isinstance(tx.on_dllp(Nak(1023), 0.0)[0], ReplayStarted)
    assert tx.on_dllp(Nak(1023), 0.0) == [EnterRecovery(1)]


def test_a_nak_with_nothing_unacknowledged_replays_nothing() -> None:
    tx = ReplayTransmitter()
    send_n(tx, 1)
    assert tx.on_dllp(Nak(1), 0.0) == []
    assert tx.replay_num == 0


def test_acks_and_naks_outside_the_window_are_protocol_errors() -> None:
    tx = ReplayTransmitter()
    send_n(tx, 3)
    with pytest.raises(ReplayInvariantError, match="within the window"):
        tx.on_dllp(Ack(4), 0.0)
    with pytest.raises(ReplayInvariantError, match="within the window"):
        tx.on_dllp(Nak(900), 0.0)
    tx.on_dllp(Ack(2), 0.0)
    with pytest.raises(ReplayInvariantError, match="within the window"):
        tx.on_dllp(SelectiveNak(2), 0.0)


def test_receiver_rejects_flits_outside_the_window() -> None:
    rx = ReplayReceiver(ReplayProfile(max_unacknowledged_flits=8))
    with pytest.raises(ReplayInvariantError, match="within the window"):
        rx.on_flit(Flit(500), 0.0)


def test_time_must_not_go_backwards() -> None:
    tx, rx = ReplayTransmitter(), ReplayReceiver()
    tx.poll(10.0)
    rx.poll(10.0)
    with pytest.raises(ReplayInvariantError, match="backwards"):
        tx.poll(9.0)
    with pytest.raises(ReplayInvariantError, match="backwards"):
        rx.poll(9.0)


def test_acks_are_coalesced_by_count_and_by_delay() -> None:
    profile = ReplayProfile(ack_every_flits=3, ack_delay_ns=50.0)
    tx, rx = ReplayTransmitter(profile), ReplayReceiver(profile)
    f1, f2, f3, f4 = send_n(tx, 4)
    assert [type(a) for a in rx.on_flit(f1, 10.0)] == [Deliver]
    assert rx.ack_deadline_ns == pytest.approx(60.0)
    assert [type(a) for a in rx.on_flit(f2, 20.0)] == [Deliver]
    assert rx.on_flit(f3, 30.0)[-1] == Ack(3)
    assert rx.ack_deadline_ns is None
    rx.on_flit(f4, 40.0)
    assert rx.poll(89.0) == []
    assert rx.poll(90.0) == [Ack(4)]
    assert rx.poll(1000.0) == []


def test_transition_tables_cover_every_reachable_state_and_event() -> None:
    tx_events = {
        TxState.ACTIVE: set(TxEvent) - {TxEvent.RECOVERY_DONE},
        TxState.RECOVERY: {TxEvent.ACK, TxEvent.RECOVERY_DONE},
    }
    assert {(s, e) for s, events in tx_events.items() for e in events} == set(TX_TRANSITIONS)
    standard_events = set(RxEvent) - {RxEvent.AHEAD_ONE}
    standard_states = {RxState.ACTIVE, RxState.NAK_SCHEDULED}
    assert set(RX_TRANSITIONS[NakPolicy.STANDARD]) == {
        (s, e) for s in standard_states for e in standard_events
    }
    assert set(RX_TRANSITIONS[NakPolicy.SELECTIVE]) == {(s, e) for s in RxState for e in RxEvent}
