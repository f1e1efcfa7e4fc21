"""One channel in flit mode: bursts of flits, their errors, and the Ack/Nak replays they cost.

Theory of operation
-------------------
A message crosses a channel as a burst of ``ceil(bytes / 236)`` flits. Whether a flit
survives FEC and CRC is a Bernoulli trial with the post-FEC replay probability that
``sitssim.link.flit.flit_error_rates`` derives from the pre-FEC BER. Trials are independent
from flit to flit, so the channel keeps one geometric countdown to its next failing flit
and a burst with no failure costs two integer operations: the transport's hot path is not
slowed by an error-free link.

A burst that does contain a failure is played, flit by flit, through the sans-I/O replay
cores (``ReplayTransmitter`` and ``ReplayReceiver``): the corrupted flit is detected by the
receiver, its Nak crosses the reverse direction (flight time plus DLLP processing), the
transmitter replays from the Nak'd flit (retransmissions are trials too), the replay timer
covers lost Naks, and a REPLAY_NUM rollover takes the link through Recovery. How long
Recovery lasts is the physical layer's answer: the ``recover`` callable (in a run,
``PhyStage.recover``) retrains the link from L0 and says when it is back; nothing crosses
the channel until then, and ``recoveries`` tells the transport to hold the reverse
direction too. The cores check the online invariants as they run (sequence numbers in
the window, no flit delivered twice, in order); a violation raises ``ReplayInvariantError``.
The session returns how much longer the port stayed busy and how much later the last flit
was delivered than an error-free burst, and every replay is recorded.

A session depends on what came before only through its sequence numbers and its start
time (the cores start afresh, time and numbers enter only as differences), so the usual
burst, with one or two failing transmissions, is played once per shape (burst length, the
countdowns between its failures, link timing, replay profile) and its outcome reused,
shifted to the burst's start and first sequence number (``SessionShape``). Each failure's
draw of the next countdown says whether another transmission of the session fails. A
burst with more failures, or whose shape needed Recovery (which the PHY times), is played
in full. A property test holds the reuse to the full playback, replays table and counters
included; times agree to float rounding (a shape is timed from 0, a full playback from the
burst's start).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import count

import numpy as np

from sitssim.link.flit import PCIE6_FLIT
from sitssim.link.replay import (
    Ack,
    Deliver,
    EnterRecovery,
    Flit,
    Nak,
    ReplayInvariantError,
    ReplayProfile,
    ReplayReceiver,
    ReplayStarted,
    ReplayTransmitter,
    SelectiveNak,
    Send,
    seq_add,
    seq_distance,
)

TLP_BYTES_PER_FLIT = PCIE6_FLIT.tlp_bytes

_RX_FLIT, _TX_DLLP, _WIRE, _POLL = range(4)

# Failures a burst may have for its played shape to be reused (more: played in full).
REUSED_FAILURES = 2
# The countdown of an error-free link: more flits than any run sends.
_NEVER = 1 << 62

Recover = Callable[[int, float], float]
"""``recover(channel, t_ns)``: Recovery of the channel's link requested at ``t_ns``; returns
when the link is back in L0 (same clock, never before ``t_ns``)."""


@dataclass(frozen=True)
class SessionShape:
    """What a burst with given failing transmissions (and no other) does, relative to its
    start: transmissions, extra busy and delivery time, flits replayed, and its ``replays``
    rows as (sequence offset from the first flit, event, ns after the start, flits,
    REPLAY_NUM)."""

    trials: int
    busy_extra: float
    deliver_extra: float
    replayed: int
    rows: tuple[tuple[int, str, float, int, int], ...]


_UNKNOWN = object()


class _RecoveryAsked(Exception):
    """A shape that takes the link through Recovery depends on the PHY: never reused."""


def _refuse_recovery(channel: int, t_ns: float) -> float:
    raise _RecoveryAsked


@lru_cache(maxsize=16384)
def _session_shape(
    n: int,
    gaps: tuple[int, ...],
    flit_ns: float,
    flight_ns: float,
    dllp_ns: float,
    profile: ReplayProfile,
) -> SessionShape | None:
    """Play the burst once, from time 0 and sequence number 1, on a link whose failing
    transmissions are the ``gaps[0]``-th, then ``gaps[1]`` after it, and so on, and no
    other; None if it asks for Recovery."""
    scratch = FlitLink(
        0, flit_ns, flight_ns, 0.0, None, profile, dllp_ns, _refuse_recovery, ReplayLog(), False
    )
    scratch._drawn = scratch.clean_flits = gaps[0]
    scratch._pending.extend(gaps[1:])
    try:
        busy_extra, deliver_extra = scratch._play(n, 0.0)
    except _RecoveryAsked:
        return None
    log = scratch.log
    return SessionShape(
        trials=scratch.transmissions,
        busy_extra=busy_extra,
        deliver_extra=deliver_extra,
        replayed=scratch.flits_replayed,
        rows=tuple(
            zip(
                [seq_distance(1, s) for s in log.seq],
                log.event,
                log.t_ns,
                log.flits,
                log.replay_num,
                strict=True,
            )
        ),
    )


@dataclass
class ReplayLog:
    """Rows of the ``replays`` table (one per replay, Nak or Recovery), in column lists."""

    link: list[int] = field(default_factory=list)
    seq: list[int] = field(default_factory=list)
    event: list[str] = field(default_factory=list)
    t_ns: list[float] = field(default_factory=list)
    flits: list[int] = field(default_factory=list)
    replay_num: list[int] = field(default_factory=list)

    def add(
        self, link: int, seq: int, event: str, t_ns: float, flits: int, replay_num: int
    ) -> None:
        self.link.append(link)
        self.seq.append(seq)
        self.event.append(event)
        self.t_ns.append(t_ns)
        self.flits.append(flits)
        self.replay_num.append(replay_num)


class FlitLink:
    """Flit-mode transmission over one channel with link-level replay."""

    def __init__(
        self,
        channel: int,
        flit_ns: float,
        flight_ns: float,
        p_replay: float,
        rng: np.random.Generator | None,
        profile: ReplayProfile,
        dllp_ns: float,
        recover: Recover,
        log: ReplayLog,
        reuse_sessions: bool = True,
    ) -> None:
        """``reuse_sessions=False`` plays every burst with a failure in full (the reference
        the reuse is checked against)."""
        self.channel = channel
        self.flit_ns = flit_ns
        self.flight_ns = flight_ns
        self.p_replay = p_replay
        self.profile = profile
        self.dllp_ns = dllp_ns
        self.recover = recover
        self.log = log
        self._rng = rng
        # The sequence number is derived when a burst needs the replay cores: the next
        # one was ``_seq_base`` when ``_sent_at_base`` flits had been sent.
        self._seq_base = 1
        self._sent_at_base = 0
        self.flits_replayed = 0
        self.recoveries: list[tuple[float, float]] = []
        # Flit transmissions are counted by the countdown alone (``flits_sent``): the
        # trials drawn so far, less those still to come, less the retransmissions.
        self._drawn = 0
        self._resent = 0
        self.clean_flits = 0
        # Countdowns already drawn for the next failures: see ``session``.
        self._pending: deque[int] = deque()
        self.reuse_sessions = reuse_sessions
        # This link's view of the shared shapes, keyed without hashing the profile each time.
        self._shapes: dict[tuple[int, tuple[int, ...]], SessionShape | None] = {}
        self._draw_clean_flits()

    def _draw_clean_flits(self) -> None:
        """Draw the flits up to and including the next one that fails (on an error-free
        link, more than any run sends)."""
        if self._pending:
            gap = self._pending.popleft()
        elif self.p_replay > 0.0:
            gap = int(self._rng.geometric(self.p_replay))
        else:
            gap = _NEVER
        self._drawn += gap
        self.clean_flits += gap

    @property
    def transmissions(self) -> int:
        """Flit transmissions so far, replays included."""
        return self._drawn - self.clean_flits

    @property
    def flits_sent(self) -> int:
        """New flits sent so far (replays not counted)."""
        return self.transmissions - self._resent

    def _trial(self) -> bool:
        """One flit transmission: True if it fails."""
        self.clean_flits -= 1
        if self.clean_flits <= 0:
            self._draw_clean_flits()
            return True
        return False

    def burst(self, n_bytes: int, start_ns: float) -> tuple[float, float]:
        """Send a message's flits from ``start_ns``; return (extra busy ns, extra delivery ns).

        The transport writes this out in its hot path (``_Port.accept``)."""
        n = -(-n_bytes // TLP_BYTES_PER_FLIT) or 1
        if self.clean_flits > n:
            self.clean_flits -= n
            return 0.0, 0.0
        return self.session(n, start_ns)

    @property
    def seq(self) -> int:
        """The sequence number the next new flit takes (1-1023; 0 marks an idle flit)."""
        return (self._seq_base - 1 + self.flits_sent - self._sent_at_base) % 1023 + 1

    def session(self, n: int, t0: float) -> tuple[float, float]:
        """Send a burst of ``n`` new flits from ``t0``, at least one of which fails.

        A session is independent of the ones before it but for its sequence numbers and its
        start, so a shape (burst length, and the countdowns between its failing
        transmissions) is played once and reused (:func:`_session_shape`), for bursts of up
        to ``REUSED_FAILURES`` failures. Each failure's draw of the next countdown tells
        whether another transmission of the session fails. A burst with more failures, or
        whose shape asked for Recovery (which the PHY times), is played in full.
        """
        if not self.reuse_sessions:
            return self._play(n, t0)
        first_seq = self.seq
        gaps = (self.clean_flits,)
        while True:
            shape = self._shapes.get((n, gaps), _UNKNOWN)
            if shape is _UNKNOWN:
                shape = _session_shape(
                    n, gaps, self.flit_ns, self.flight_ns, self.dllp_ns, self.profile
                )
                self._shapes[(n, gaps)] = shape
            if shape is not None:
                # The last failure's draw, as ``_trial`` makes it.
                self.clean_flits = 0
                self._draw_clean_flits()
                after = shape.trials - sum(gaps)
                if self.clean_flits > after:
                    break
                gaps = (*gaps, self.clean_flits)
            if shape is None or len(gaps) > REUSED_FAILURES:
                # Play it in full, with the countdowns already drawn.
                self._drawn -= sum(gaps[1:])
                self.clean_flits = gaps[0]
                self._pending.extend(gaps[1:])
                return self._play(n, t0)
        self.clean_flits -= after
        self._resent += shape.trials - n
        self.flits_replayed += shape.replayed
        for offset, event, dt, flits, replay_num in shape.rows:
            self.log.add(
                self.channel, seq_add(first_seq, offset), event, t0 + dt, flits, replay_num
            )
        self._seq_base = seq_add(first_seq, n)
        self._sent_at_base = self.flits_sent
        return shape.busy_extra, shape.deliver_extra

    def _play(self, n: int, t0: float) -> tuple[float, float]:
        """Play a burst of ``n`` new flits, one of which fails, through the replay cores."""
        first_seq = self.seq
        trials_before = self._drawn - self.clean_flits
        tx = ReplayTransmitter(self.profile, first_seq=first_seq)
        rx = ReplayReceiver(self.profile, first_seq=first_seq)
        events: list[tuple[float, int, int, object]] = []
        order = count()
        outq: deque[Flit] = deque()
        new_left = n
        delivered = 0
        wire_free = t0
        blocked_until = t0
        last_delivery = t0
        wire_scheduled = False

        def push(t: float, kind: int, data: object = None) -> None:
            heapq.heappush(events, (t, next(order), kind, data))

        def tx_actions(actions: list, t: float) -> None:
            nonlocal blocked_until
            for action in actions:
                if isinstance(action, Send):
                    outq.append(action.flit)
                elif isinstance(action, ReplayStarted):
                    self.flits_replayed += action.n_flits
                    self.log.add(
                        self.channel,
                        action.first_seq,
                        action.cause.value,
                        t,
                        action.n_flits,
                        action.replay_num,
                    )
                elif isinstance(action, EnterRecovery):
                    self.log.add(
                        self.channel, tx.acked_seq, "enter_recovery", t, action.unacknowledged, 0
                    )
                    down = max(blocked_until, t)
                    blocked_until = self.recover(self.channel, down)
                    self.recoveries.append((down, blocked_until))
                    push(blocked_until, _POLL, "recovered")

        def rx_actions(actions: list, t: float) -> None:
            nonlocal delivered, last_delivery
            for action in actions:
                if isinstance(action, Deliver):
                    delivered += 1
                    last_delivery = t
                elif isinstance(action, Ack | Nak | SelectiveNak):
                    push(t + self.flight_ns + self.dllp_ns, _TX_DLLP, action)

        # The timer deadlines already asked for (a core's changes only when it is driven).
        tx_poll: float | None = None
        rx_poll: float | None = None
        push(t0, _WIRE)
        wire_scheduled = True
        while events:
            t, _, kind, data = heapq.heappop(events)
            tx_driven = rx_driven = False
            if kind == _WIRE:
                wire_scheduled = False
                if t < blocked_until:
                    push(blocked_until, _WIRE)
                    wire_scheduled = True
                    continue
                if not outq and new_left and tx.can_send:
                    tx_actions(tx.send(None, t), t)
                    tx_driven = True
                    new_left -= 1
                if outq:
                    flit = outq.popleft()
                    push(
                        t + self.flit_ns + self.flight_ns, _RX_FLIT, None if self._trial() else flit
                    )
                    wire_free = t + self.flit_ns
                    push(wire_free, _WIRE)
                    wire_scheduled = True
            elif kind == _RX_FLIT:
                rx_actions(rx.on_corrupt_flit(t) if data is None else rx.on_flit(data, t), t)
                rx_driven = True
            elif kind == _TX_DLLP:
                tx_actions(tx.on_dllp(data, t), t)
                tx_driven = True
            elif data == "recovered":
                tx_actions(tx.recovery_done(t), t)
                tx_driven = True
            elif data == "tx":
                tx_actions(tx.poll(t), t)
                tx_driven = True
            else:
                rx_actions(rx.poll(t), t)
                rx_driven = True
            if delivered == n and tx.unacknowledged == 0 and not outq:
                break
            # Timers are events too: a burst whose every Nak was lost ends by the replay timer.
            if tx_driven:
                deadline = tx.timer_deadline_ns
                if deadline is not None and deadline != tx_poll:
                    tx_poll = deadline
                    push(max(deadline, t), _POLL, "tx")
            if rx_driven:
                deadline = rx.ack_deadline_ns
                if deadline is not None and deadline != rx_poll:
                    rx_poll = deadline
                    push(max(deadline, t), _POLL, "rx")
            if not wire_scheduled and (outq or (new_left and tx.can_send)):
                push(max(t, wire_free, blocked_until), _WIRE)
                wire_scheduled = True
        if delivered != n:
            raise ReplayInvariantError(
                f"channel {self.channel}: {delivered} of {n} flits delivered after replay"
            )
        self._resent += self._drawn - self.clean_flits - trials_before - n
        self._seq_base = tx.next_seq
        self._sent_at_base = self.flits_sent
        busy_extra = wire_free - (t0 + n * self.flit_ns)
        deliver_extra = last_delivery - (t0 + n * self.flit_ns + self.flight_ns)
        return max(0.0, busy_extra), max(0.0, deliver_extra)
