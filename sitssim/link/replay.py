"""Sans-I/O Ack/Nak flit replay: transmitter and receiver cores (L2).

Theory of operation
-------------------
Flit-mode link-level retry in the style of PCIe 6.x. Every payload flit carries a 10-bit
flit sequence number in 1..1023 (0 marks an idle flit that carries no sequence number), and
numbers wrap from 1023 to 1. Both cores are plain objects in the style of h11: a driver hands
them events (a flit sent or received, an Ack/Nak received, the current time) and carries out
the actions they return (:class:`Send`, :class:`Ack`, :class:`Nak`, :class:`SelectiveNak`,
:class:`Deliver`, :class:`ReplayStarted`, :class:`EnterRecovery`). Neither keeps a clock:
every call passes ``now_ns`` and the cores report the next deadline they need
(:attr:`ReplayTransmitter.timer_deadline_ns`, :attr:`ReplayReceiver.ack_deadline_ns`).
Ack, Nak and SelectiveNak are both the receiver's actions and the transmitter's input; the
driver carries them on the reverse direction of the link.

Transmitter. :meth:`ReplayTransmitter.send` numbers a payload, keeps it in the retry buffer
(at most ``max_unacknowledged_flits`` unacknowledged flits, <= 511 so that the window is
under half the sequence space) and emits it. An Ack(s) acknowledges every flit up to s. A
Nak(s) acknowledges up to s and replays every flit after it; a SelectiveNak(s) acknowledges
up to the flit before s and replays s alone. The replay timer runs while flits are
unacknowledged, restarts on forward progress and on each replay (when the replay starts,
where PCIe restarts it once the first replayed flit is out: the driver's serialisation time
apart), and when it expires replays the whole buffer. REPLAY_NUM counts replays since the
last forward progress (an Ack or Nak that retires a flit resets it); the replay that would
take it past its top value rolls it over to 0 instead, and the core enters RECOVERY and asks
the link to retrain (:class:`EnterRecovery`). New traffic waits; after
:meth:`ReplayTransmitter.recovery_done` the buffer is replayed. A Nak or timer expiry with
nothing left unacknowledged replays nothing and counts nothing.

Receiver. It accepts the flit it expects next and delivers it; a flit behind that is a
duplicate (a replay of something already delivered), discarded and answered with an Ack so
that a transmitter that lost an Ack makes progress. A flit ahead of it, or a corrupted flit
(CRC failed, so its sequence number is unknown), reveals a loss. With the STANDARD policy the
receiver sends one Nak and discards everything until the expected flit arrives (a lost Nak
is covered by the transmitter's timer). With the SELECTIVE policy a flit that leaves exactly
one flit missing is held, the missing one requested by a SelectiveNak, and further
consecutive flits held while it is awaited (up to ``selective_hold_flits``); any other loss
falls back to a standard Nak. A corrupted flit alone does not trigger a Nak under SELECTIVE:
its sequence number is unknown, and the next good flit shows what is missing. Acks are
coalesced: one per ``ack_every_flits`` delivered flits, and a pending Ack is due
``ack_delay_ns`` after the first flit it covers.

Both cores are driven by explicit transition tables (:data:`TX_TRANSITIONS`,
:data:`RX_TRANSITIONS`): a handler classifies the input into an event, the table gives the
next state (and, for the receiver, the step to take), and a pair missing from the table is a
protocol error. The replay invariants (sequence numbers within the window, no flit
delivered twice, in-order delivery; SPEC.md gives them no clause ID) are checked as the
cores run and raise :class:`ReplayInvariantError`, whose message names the invariant, for
the driver to surface.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

from sitssim.config.flit_profile import (
    SPEC_MAX_UNACKNOWLEDGED_FLITS,
    SPEC_MIN_REPLAY_TIMEOUT_FLITS,
    SPEC_REPLAY_NUM_BITS,
)
from sitssim.link.flit import flit_time_ns

__all__ = [
    "IDLE_SEQ",
    "RX_TRANSITIONS",
    "SEQ_MODULUS",
    "SPEC_MAX_UNACKNOWLEDGED_FLITS",
    "SPEC_MIN_REPLAY_TIMEOUT_FLITS",
    "SPEC_REPLAY_NUM_BITS",
    "TX_TRANSITIONS",
    "Ack",
    "Deliver",
    "EnterRecovery",
    "Flit",
    "Nak",
    "NakPolicy",
    "ReplayCause",
    "ReplayInvariantError",
    "ReplayProfile",
    "ReplayReceiver",
    "ReplayStarted",
    "ReplayTransmitter",
    "RxEvent",
    "RxState",
    "RxStep",
    "SelectiveNak",
    "Send",
    "TxEvent",
    "TxState",
    "seq_add",
    "seq_distance",
]

SEQ_MODULUS: Final = 1023
"""Count of flit sequence numbers (1..1023; the 10-bit value 0 is reserved for idle flits)."""
IDLE_SEQ: Final = 0


def seq_add(seq: int, n: int) -> int:
    """Sequence number ``n`` flits after ``seq`` (wrapping 1023 -> 1)."""
    return (seq - 1 + n) % SEQ_MODULUS + 1


def seq_distance(a: int, b: int) -> int:
    """Flits from ``a`` forward to ``b`` (0..1022)."""
    return (b - a) % SEQ_MODULUS


class ReplayInvariantError(RuntimeError):
    """A replay-core invariant was violated: the run must stop."""


def _check(condition: bool, invariant: str, detail: str) -> None:
    if not condition:
        raise ReplayInvariantError(f"replay invariant '{invariant}' violated: {detail}")


class _FastEnum(Enum):
    """An enum hashed by identity (its members are singletons): the cores look their
    transition tables up by (state, event) for every flit, and ``Enum.__hash__`` is a
    Python call each time."""

    __hash__ = object.__hash__


class NakPolicy(Enum):
    STANDARD = "standard"
    SELECTIVE = "selective"


@dataclass(frozen=True)
class ReplayProfile:
    """Replay parameters a device implements (defaults: the spec's values).

    ``replay_timeout_flits`` below :data:`SPEC_MIN_REPLAY_TIMEOUT_FLITS` is accepted (a faulty
    profile is caught by behaviour); ``max_unacknowledged_flits`` above 511 is refused because
    the sequence-number window would become ambiguous.
    """

    max_unacknowledged_flits: int = SPEC_MAX_UNACKNOWLEDGED_FLITS
    replay_timeout_flits: int = SPEC_MIN_REPLAY_TIMEOUT_FLITS
    flit_time_ns: float = flit_time_ns()
    replay_num_bits: int = SPEC_REPLAY_NUM_BITS
    nak_policy: NakPolicy = NakPolicy.STANDARD
    selective_hold_flits: int = 0
    ack_every_flits: int = 1
    ack_delay_ns: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.max_unacknowledged_flits <= SPEC_MAX_UNACKNOWLEDGED_FLITS:
            raise ValueError(
                f"max_unacknowledged_flits must be in 1..{SPEC_MAX_UNACKNOWLEDGED_FLITS}, "
                f"got {self.max_unacknowledged_flits}"
            )
        if self.replay_timeout_flits <= 0 or self.flit_time_ns <= 0:
            raise ValueError("replay_timeout_flits and flit_time_ns must be > 0")
        if self.replay_num_bits < 1:
            raise ValueError(f"replay_num_bits must be >= 1, got {self.replay_num_bits}")
        if self.ack_every_flits < 1 or self.ack_delay_ns < 0:
            raise ValueError("ack_every_flits must be >= 1 and ack_delay_ns >= 0")
        if self.selective_hold_flits < 0:
            raise ValueError("selective_hold_flits must be >= 0")
        if self.nak_policy is NakPolicy.SELECTIVE and self.selective_hold_flits < 1:
            raise ValueError("the SELECTIVE Nak policy needs selective_hold_flits >= 1")

    @property
    def replay_timeout_ns(self) -> float:
        return self.replay_timeout_flits * self.flit_time_ns

    @property
    def replay_num_rollover(self) -> int:
        """The consecutive replay attempt (without forward progress) that rolls REPLAY_NUM
        over and sends the link to Recovery."""
        return 1 << self.replay_num_bits


@dataclass(frozen=True, slots=True)
class Flit:
    """A flit as the replay cores see it; ``payload`` is opaque to them."""

    seq: int
    payload: object = None


@dataclass(frozen=True, slots=True)
class Send:
    """Transmit ``flit`` (``replay``: it is a retransmission)."""

    flit: Flit
    replay: bool


@dataclass(frozen=True, slots=True)
class Ack:
    """Every flit up to and including ``seq`` arrived."""

    seq: int


@dataclass(frozen=True, slots=True)
class Nak:
    """Every flit up to and including ``seq`` arrived; replay everything after it."""

    seq: int


@dataclass(frozen=True, slots=True)
class SelectiveNak:
    """Every flit before ``seq`` arrived; replay flit ``seq`` only."""

    seq: int


@dataclass(frozen=True, slots=True)
class Deliver:
    """Hand ``flit`` up; ``index`` counts delivered flits from 0."""

    flit: Flit
    index: int


class ReplayCause(Enum):
    NAK = "nak"
    SELECTIVE_NAK = "selective_nak"
    TIMEOUT = "timeout"
    RECOVERY = "recovery"


@dataclass(frozen=True, slots=True)
class ReplayStarted:
    """A replay begins (for the ``replays`` table); the :class:`Send` actions follow."""

    cause: ReplayCause
    first_seq: int
    n_flits: int
    replay_num: int


@dataclass(frozen=True, slots=True)
class EnterRecovery:
    """REPLAY_NUM rolled over: retrain the link, then call ``recovery_done``."""

    unacknowledged: int


Dllp = Ack | Nak | SelectiveNak
TxAction = Send | ReplayStarted | EnterRecovery
RxAction = Deliver | Ack | Nak | SelectiveNak


class TxState(_FastEnum):
    ACTIVE = "active"
    RECOVERY = "recovery"


class TxEvent(_FastEnum):
    SEND = "send"
    ACK = "ack"
    """Acknowledgement only: an Ack, or a Nak / SelectiveNak / timeout that replays nothing."""
    REPLAY = "replay"
    ROLLOVER = "rollover"
    RECOVERY_DONE = "recovery_done"


TX_TRANSITIONS: Final[Mapping[tuple[TxState, TxEvent], TxState]] = {
    (TxState.ACTIVE, TxEvent.SEND): TxState.ACTIVE,
    (TxState.ACTIVE, TxEvent.ACK): TxState.ACTIVE,
    (TxState.ACTIVE, TxEvent.REPLAY): TxState.ACTIVE,
    (TxState.ACTIVE, TxEvent.ROLLOVER): TxState.RECOVERY,
    # While the link retrains, Acks still retire flits; replay waits for recovery_done.
    (TxState.RECOVERY, TxEvent.ACK): TxState.RECOVERY,
    (TxState.RECOVERY, TxEvent.RECOVERY_DONE): TxState.ACTIVE,
}


class ReplayTransmitter:
    """Transmitter side: retry buffer, replay timer, REPLAY_NUM (see the module docstring)."""

    def __init__(self, profile: ReplayProfile | None = None, first_seq: int = 1) -> None:
        """``first_seq``: number of the first flit (1 after link-up)."""
        if not 1 <= first_seq <= SEQ_MODULUS:
            raise ValueError(f"first_seq must be in 1..{SEQ_MODULUS}, got {first_seq}")
        self.profile = profile if profile is not None else ReplayProfile()
        self._state = TxState.ACTIVE
        self._next_seq = first_seq
        self._acked_seq = seq_add(first_seq, -1)
        self._buffer: deque[Flit] = deque()
        self._replay_num = 0
        self._deadline_ns: float | None = None
        self._now_ns = float("-inf")

    @property
    def state(self) -> TxState:
        return self._state

    @property
    def next_seq(self) -> int:
        return self._next_seq

    @property
    def acked_seq(self) -> int:
        """Last acknowledged sequence number (the one before ``first_seq`` at start)."""
        return self._acked_seq

    @property
    def unacknowledged(self) -> int:
        return len(self._buffer)

    @property
    def replay_num(self) -> int:
        return self._replay_num

    @property
    def timer_deadline_ns(self) -> float | None:
        """When the replay timer expires, or None while it is stopped."""
        return self._deadline_ns

    @property
    def can_send(self) -> bool:
        return (
            self._state is TxState.ACTIVE
            and len(self._buffer) < self.profile.max_unacknowledged_flits
        )

    def send(self, payload: object, now_ns: float) -> list[TxAction]:
        """Number ``payload`` as the next flit and transmit it; raises if not :attr:`can_send`."""
        self._advance(now_ns)
        if not self.can_send:
            raise ReplayInvariantError(
                f"send refused in state {self._state.value} with {len(self._buffer)} of "
                f"{self.profile.max_unacknowledged_flits} flits unacknowledged"
            )
        self._transition(TxEvent.SEND)
        flit = Flit(self._next_seq, payload)
        self._buffer.append(flit)
        self._next_seq = seq_add(self._next_seq, 1)
        if self._deadline_ns is None:
            self._deadline_ns = now_ns + self.profile.replay_timeout_ns
        return [Send(flit, replay=False)]

    def on_dllp(self, dllp: Dllp, now_ns: float) -> list[TxAction]:
        """Handle an Ack, Nak or SelectiveNak from the receiver."""
        self._advance(now_ns)
        if isinstance(dllp, SelectiveNak):
            _check(
                1 <= seq_distance(self._acked_seq, dllp.seq) <= len(self._buffer),
                "sequence numbers within the window",
                f"SelectiveNak({dllp.seq}) names no unacknowledged flit "
                f"(window ({self._acked_seq}, {seq_add(self._next_seq, -1)}])",
            )
            self._retire_through(seq_add(dllp.seq, -1), now_ns)
            if self._state is TxState.ACTIVE and self._buffer:
                return self._replay(ReplayCause.SELECTIVE_NAK, now_ns, only_first=True)
        else:
            self._check_in_window(dllp.seq, type(dllp).__name__)
            self._retire_through(dllp.seq, now_ns)
            if isinstance(dllp, Nak) and self._state is TxState.ACTIVE and self._buffer:
                return self._replay(ReplayCause.NAK, now_ns, only_first=False)
        self._transition(TxEvent.ACK)
        return []

    def poll(self, now_ns: float) -> list[TxAction]:
        """Tell the core the time; replays the buffer if the replay timer has expired."""
        self._advance(now_ns)
        if self._deadline_ns is None or now_ns < self._deadline_ns:
            return []
        return self._replay(ReplayCause.TIMEOUT, now_ns, only_first=False)

    def recovery_done(self, now_ns: float) -> list[TxAction]:
        """The link has retrained: replay everything still unacknowledged."""
        self._advance(now_ns)
        self._transition(TxEvent.RECOVERY_DONE)
        if not self._buffer:
            return []
        return self._emit_replay(ReplayCause.RECOVERY, now_ns, only_first=False)

    def _advance(self, now_ns: float) -> None:
        if now_ns < self._now_ns:
            raise ReplayInvariantError(f"time went backwards: {now_ns} ns after {self._now_ns} ns")
        self._now_ns = now_ns

    def _transition(self, event: TxEvent) -> None:
        try:
            self._state = TX_TRANSITIONS[(self._state, event)]
        except KeyError:
            raise ReplayInvariantError(
                f"transmitter event {event.value} is not allowed in state {self._state.value}"
            ) from None

    def _check_in_window(self, seq: int, what: str) -> None:
        last_sent = seq_add(self._next_seq, -1)
        _check(
            seq_distance(self._acked_seq, seq) <= seq_distance(self._acked_seq, last_sent),
            "sequence numbers within the window",
            f"{what} for {seq} outside the unacknowledged window ({self._acked_seq}, {last_sent}]",
        )

    def _retire_through(self, seq: int, now_ns: float) -> None:
        retired = seq_distance(self._acked_seq, seq)
        if retired == 0:
            return
        for _ in range(retired):
            self._buffer.popleft()
        self._acked_seq = seq
        self._replay_num = 0
        if not self._buffer:
            self._deadline_ns = None
        elif self._state is TxState.ACTIVE:
            self._deadline_ns = now_ns + self.profile.replay_timeout_ns

    def _replay(self, cause: ReplayCause, now_ns: float, *, only_first: bool) -> list[TxAction]:
        self._replay_num += 1
        if self._replay_num >= self.profile.replay_num_rollover:
            self._replay_num = 0
            self._transition(TxEvent.ROLLOVER)
            self._deadline_ns = None
            return [EnterRecovery(len(self._buffer))]
        self._transition(TxEvent.REPLAY)
        return self._emit_replay(cause, now_ns, only_first=only_first)

    def _emit_replay(
        self, cause: ReplayCause, now_ns: float, *, only_first: bool
    ) -> list[TxAction]:
        flits = [self._buffer[0]] if only_first else list(self._buffer)
        self._deadline_ns = now_ns + self.profile.replay_timeout_ns
        actions: list[TxAction] = [ReplayStarted(cause, flits[0].seq, len(flits), self._replay_num)]
        actions.extend(Send(flit, replay=True) for flit in flits)
        return actions


class RxState(_FastEnum):
    ACTIVE = "active"
    NAK_SCHEDULED = "nak_scheduled"
    SELECTIVE_WAIT = "selective_wait"


class RxEvent(_FastEnum):
    IN_ORDER = "in_order"
    DUPLICATE = "duplicate"
    """Behind the expected flit, or already held."""
    AHEAD_ONE = "ahead_one"
    """Leaves exactly the expected flit missing and there is room to hold it (SELECTIVE)."""
    AHEAD = "ahead"
    CORRUPT = "corrupt"
    IDLE = "idle"


class RxStep(_FastEnum):
    DELIVER = "deliver"
    ACK_DUPLICATE = "ack_duplicate"
    DISCARD = "discard"
    NAK = "nak"
    SELECTIVE_NAK = "selective_nak"
    HOLD = "hold"


_RX_STANDARD: Final[Mapping[tuple[RxState, RxEvent], tuple[RxState, RxStep]]] = {
    (RxState.ACTIVE, RxEvent.IN_ORDER): (RxState.ACTIVE, RxStep.DELIVER),
    (RxState.ACTIVE, RxEvent.DUPLICATE): (RxState.ACTIVE, RxStep.ACK_DUPLICATE),
    (RxState.ACTIVE, RxEvent.AHEAD): (RxState.NAK_SCHEDULED, RxStep.NAK),
    (RxState.ACTIVE, RxEvent.CORRUPT): (RxState.NAK_SCHEDULED, RxStep.NAK),
    (RxState.ACTIVE, RxEvent.IDLE): (RxState.ACTIVE, RxStep.DISCARD),
    (RxState.NAK_SCHEDULED, RxEvent.IN_ORDER): (RxState.ACTIVE, RxStep.DELIVER),
    (RxState.NAK_SCHEDULED, RxEvent.DUPLICATE): (RxState.NAK_SCHEDULED, RxStep.ACK_DUPLICATE),
    (RxState.NAK_SCHEDULED, RxEvent.AHEAD): (RxState.NAK_SCHEDULED, RxStep.DISCARD),
    (RxState.NAK_SCHEDULED, RxEvent.CORRUPT): (RxState.NAK_SCHEDULED, RxStep.DISCARD),
    (RxState.NAK_SCHEDULED, RxEvent.IDLE): (RxState.NAK_SCHEDULED, RxStep.DISCARD),
}

RX_TRANSITIONS: Final[
    Mapping[NakPolicy, Mapping[tuple[RxState, RxEvent], tuple[RxState, RxStep]]]
] = {
    NakPolicy.STANDARD: _RX_STANDARD,
    NakPolicy.SELECTIVE: {
        **_RX_STANDARD,
        (RxState.ACTIVE, RxEvent.CORRUPT): (RxState.ACTIVE, RxStep.DISCARD),
        (RxState.ACTIVE, RxEvent.AHEAD_ONE): (RxState.SELECTIVE_WAIT, RxStep.SELECTIVE_NAK),
        (RxState.NAK_SCHEDULED, RxEvent.AHEAD_ONE): (RxState.NAK_SCHEDULED, RxStep.DISCARD),
        (RxState.SELECTIVE_WAIT, RxEvent.IN_ORDER): (RxState.ACTIVE, RxStep.DELIVER),
        (RxState.SELECTIVE_WAIT, RxEvent.DUPLICATE): (
            RxState.SELECTIVE_WAIT,
            RxStep.ACK_DUPLICATE,
        ),
        (RxState.SELECTIVE_WAIT, RxEvent.AHEAD_ONE): (RxState.SELECTIVE_WAIT, RxStep.HOLD),
        (RxState.SELECTIVE_WAIT, RxEvent.AHEAD): (RxState.NAK_SCHEDULED, RxStep.NAK),
        (RxState.SELECTIVE_WAIT, RxEvent.CORRUPT): (RxState.NAK_SCHEDULED, RxStep.NAK),
        (RxState.SELECTIVE_WAIT, RxEvent.IDLE): (RxState.SELECTIVE_WAIT, RxStep.DISCARD),
    },
}


class ReplayReceiver:
    """Receiver side: in-order acceptance, Nak / selective Nak, duplicate discard, Ack
    coalescing (see the module docstring)."""

    def __init__(self, profile: ReplayProfile | None = None, first_seq: int = 1) -> None:
        """``first_seq``: number of the first flit expected (1 after link-up)."""
        if not 1 <= first_seq <= SEQ_MODULUS:
            raise ValueError(f"first_seq must be in 1..{SEQ_MODULUS}, got {first_seq}")
        self.profile = profile if profile is not None else ReplayProfile()
        self._table = RX_TRANSITIONS[self.profile.nak_policy]
        self._state = RxState.ACTIVE
        self._expected = first_seq
        self._held: deque[Flit] = deque()
        self._delivered = 0
        self._unacked_deliveries = 0
        self._ack_deadline_ns: float | None = None
        self._now_ns = float("-inf")

    @property
    def state(self) -> RxState:
        return self._state

    @property
    def expected_seq(self) -> int:
        return self._expected

    @property
    def delivered(self) -> int:
        return self._delivered

    @property
    def held(self) -> int:
        """Flits held while a selectively Nak'd flit is awaited."""
        return len(self._held)

    @property
    def ack_deadline_ns(self) -> float | None:
        """When a coalesced Ack falls due, or None if none is pending."""
        return self._ack_deadline_ns

    def on_flit(self, flit: Flit, now_ns: float) -> list[RxAction]:
        """A flit arrived with a good CRC."""
        self._advance(now_ns)
        return self._apply(self._classify(flit.seq), flit, now_ns)

    def on_corrupt_flit(self, now_ns: float) -> list[RxAction]:
        """A flit arrived that the FEC could not correct and the CRC rejected."""
        self._advance(now_ns)
        return self._apply(RxEvent.CORRUPT, None, now_ns)

    def poll(self, now_ns: float) -> list[RxAction]:
        """Tell the core the time; sends the pending Ack if it is due."""
        self._advance(now_ns)
        if self._ack_deadline_ns is None or now_ns < self._ack_deadline_ns:
            return []
        return [self._ack()]

    def _advance(self, now_ns: float) -> None:
        if now_ns < self._now_ns:
            raise ReplayInvariantError(f"time went backwards: {now_ns} ns after {self._now_ns} ns")
        self._now_ns = now_ns

    def _classify(self, seq: int) -> RxEvent:
        if seq == IDLE_SEQ:
            return RxEvent.IDLE
        window = self.profile.max_unacknowledged_flits
        ahead = seq_distance(self._expected, seq)
        if ahead == 0:
            return RxEvent.IN_ORDER
        if ahead < window:
            if ahead <= len(self._held):
                return RxEvent.DUPLICATE
            if (
                ahead == len(self._held) + 1
                and self.profile.nak_policy is NakPolicy.SELECTIVE
                and len(self._held) < self.profile.selective_hold_flits
            ):
                return RxEvent.AHEAD_ONE
            return RxEvent.AHEAD
        _check(
            SEQ_MODULUS - ahead <= window,
            "sequence numbers within the window",
            f"flit {seq} is neither within {window} flits after nor within {window} flits "
            f"before the expected flit {self._expected}",
        )
        return RxEvent.DUPLICATE

    def _apply(self, event: RxEvent, flit: Flit | None, now_ns: float) -> list[RxAction]:
        try:
            next_state, step = self._table[(self._state, event)]
        except KeyError:
            raise ReplayInvariantError(
                f"receiver event {event.value} is not allowed in state {self._state.value}"
            ) from None
        self._state = next_state
        if step is RxStep.DELIVER:
            assert flit is not None
            return self._deliver(flit, now_ns)
        if step is RxStep.ACK_DUPLICATE:
            return [self._ack()]
        if step is RxStep.NAK:
            self._held.clear()
            self._clear_pending_ack()
            return [Nak(seq_add(self._expected, -1))]
        if step is RxStep.SELECTIVE_NAK:
            assert flit is not None
            self._held.append(flit)
            self._clear_pending_ack()
            return [SelectiveNak(self._expected)]
        if step is RxStep.HOLD:
            assert flit is not None
            self._held.append(flit)
        return []

    def _deliver(self, flit: Flit, now_ns: float) -> list[RxAction]:
        actions: list[RxAction] = []
        batch = [flit, *self._held]
        self._held.clear()
        for item in batch:
            _check(
                item.seq == self._expected,
                "in-order delivery, no flit delivered twice",
                f"about to deliver flit {item.seq} while flit {self._expected} is next",
            )
            actions.append(Deliver(item, self._delivered))
            self._delivered += 1
            self._expected = seq_add(self._expected, 1)
        self._unacked_deliveries += len(batch)
        if self._unacked_deliveries >= self.profile.ack_every_flits:
            actions.append(self._ack())
        elif self._ack_deadline_ns is None:
            self._ack_deadline_ns = now_ns + self.profile.ack_delay_ns
        return actions

    def _ack(self) -> Ack:
        self._clear_pending_ack()
        return Ack(seq_add(self._expected, -1))

    def _clear_pending_ack(self) -> None:
        self._unacked_deliveries = 0
        self._ack_deadline_ns = None
