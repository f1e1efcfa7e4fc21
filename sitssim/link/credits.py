"""Sans-I/O flow-control credits: sender gate and receiver buffer (L2).

Theory of operation
-------------------
PCIe-style credit flow control for three classes, P (posted), NP (non-posted) and Cpl
(completion), each with header and data credits. A TLP costs one header credit and
``ceil(payload / 16 B)`` data credits of its class. At link-up the receiver advertises its
buffer per class and kind (InitFC); an advertisement of 0 means *infinite*, as in the PCIe
InitFC encoding, and such a kind is never counted.

:class:`CreditSender` sits at the transmitting end. It keeps, per class and kind, the credits
consumed so far and the credit limit last granted (both cumulative, as in PCIe, without the
modulo field widths). A TLP may be sent only when ``consumed + cost <= limit``:
:meth:`CreditSender.can_send` asks, :meth:`CreditSender.consume` charges and raises
:class:`CreditViolation` rather than let a TLP go without credit, and
:meth:`CreditSender.try_consume` charges if it can and otherwise opens a stall interval for
the class, closed when an UpdateFC (or a smaller TLP) lets the class send again.

:class:`CreditReceiver` sits at the far end. A TLP that arrives occupies buffer space
(:meth:`CreditReceiver.receive`); when the far end takes it out of the buffer
(:meth:`CreditReceiver.release`) its credits become free and are returned by an UpdateFC
that carries the new cumulative limit (advertisement + everything freed). An UpdateFC goes
out at once when the freed, not yet advertised credits of a class reach a threshold, and in
any case at least every ``update_interval_ns`` (<= 30 µs) per class with finite credits,
changed or not, which is what repairs a lost UpdateFC. The core does not keep a clock: every
call passes ``now_ns`` and :attr:`CreditReceiver.next_update_due_ns` tells the driver when to
call :meth:`CreditReceiver.poll`.

Conservation (a link-layer invariant; SPEC.md gives it no clause ID), per class and finite kind::

    available + in_flight + buffered = advertised

where ``available`` = limit - consumed at the sender, ``in_flight`` = credits of TLPs on the
wire plus credits the receiver has returned that the sender has not yet applied (its
UpdateFCs in flight or lost), and ``buffered`` = credits held at the receiver: TLPs in its
buffer plus freed credits not yet advertised. :func:`check_conservation` checks it from both
cores and the driver's count of credits on the wire; each core checks on its own that its
terms are never negative and never above the advertisement and raises
:class:`CreditInvariantError` otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

from sitssim.config.credit_profile import DATA_CREDIT_BYTES, SPEC_MAX_UPDATE_INTERVAL_NS

__all__ = [
    "DATA_CREDIT_BYTES",
    "INFINITE",
    "SPEC_MAX_UPDATE_INTERVAL_NS",
    "ClassCredits",
    "CreditInvariantError",
    "CreditKind",
    "CreditReceiver",
    "CreditSender",
    "CreditStall",
    "CreditViolation",
    "FcClass",
    "UpdateFC",
    "check_conservation",
    "tlp_credits",
]

INFINITE: Final = 0
"""Advertised value meaning "infinite credits" (the PCIe InitFC encoding)."""


class FcClass(Enum):
    P = "P"
    NP = "NP"
    CPL = "Cpl"

    # Members are singletons compared by identity, so the identity hash is consistent;
    # Enum's own __hash__ (a Python-level call) dominated the credit cores' cost per TLP.
    __hash__ = object.__hash__


class CreditKind(Enum):
    HDR = "hdr"
    DATA = "data"

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class ClassCredits:
    """Header and data credits of one class (an advertisement, a cost, or an amount)."""

    hdr: int
    data: int

    def of(self, kind: CreditKind) -> int:
        return self.hdr if kind is CreditKind.HDR else self.data


def tlp_credits(payload_bytes: int) -> ClassCredits:
    """Credits one TLP with ``payload_bytes`` of data consumes."""
    if payload_bytes < 0:
        raise ValueError(f"payload must be >= 0 bytes, got {payload_bytes}")
    return ClassCredits(hdr=1, data=-(-payload_bytes // DATA_CREDIT_BYTES))


@dataclass(frozen=True, slots=True)
class UpdateFC:
    """Credit return: the cumulative limits the sender may consume up to (0 for a kind
    advertised infinite)."""

    fc_class: FcClass
    hdr_limit: int
    data_limit: int

    def limit(self, kind: CreditKind) -> int:
        return self.hdr_limit if kind is CreditKind.HDR else self.data_limit


@dataclass(frozen=True, slots=True)
class CreditStall:
    """A class could not send from ``start_ns`` to ``end_ns`` for lack of credit; ``needed``
    is the cost of the TLP last refused."""

    fc_class: FcClass
    start_ns: float
    end_ns: float
    needed: ClassCredits

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns


class CreditViolation(RuntimeError):
    """A TLP was about to be sent without enough credit."""


class CreditInvariantError(RuntimeError):
    """A credit counter went negative or above the advertisement."""


_KEYS: Final = tuple((c, k) for c in FcClass for k in CreditKind)
# Iterating an Enum class is a Python-level call per step; the hot paths use this tuple.
_KINDS: Final = tuple(CreditKind)


def _validated(advertisement: Mapping[FcClass, ClassCredits]) -> dict[FcClass, ClassCredits]:
    missing = [c.value for c in FcClass if c not in advertisement]
    if missing:
        raise ValueError(f"advertisement lacks classes {missing}")
    for fc_class, credits in advertisement.items():
        if credits.hdr < 0 or credits.data < 0:
            raise ValueError(f"advertisement for {fc_class.value} is negative: {credits}")
    return dict(advertisement)


def _fail(detail: str) -> None:
    raise CreditInvariantError(
        f"credit invariant 'never negative or above the advertisement' violated: {detail}"
    )


class _Clock:
    def __init__(self) -> None:
        self.now_ns = float("-inf")

    def advance(self, now_ns: float) -> None:
        if now_ns < self.now_ns:
            raise CreditInvariantError(f"time went backwards: {now_ns} ns after {self.now_ns} ns")
        self.now_ns = now_ns


class CreditSender:
    """Transmit-side credit gate for one link direction (see the module docstring)."""

    def __init__(self, advertisement: Mapping[FcClass, ClassCredits]) -> None:
        """``advertisement``: the receiver's InitFC values per class."""
        self.advertisement = _validated(advertisement)
        self._finite = {(c, k): self.advertisement[c].of(k) != INFINITE for c, k in _KEYS}
        self._limit = {(c, k): self.advertisement[c].of(k) for c, k in _KEYS}
        self._consumed = dict.fromkeys(_KEYS, 0)
        self._stall_start: dict[FcClass, float] = {}
        self._stall_need: dict[FcClass, ClassCredits] = {}
        self._stalls: list[CreditStall] = []
        self._clock = _Clock()

    def is_infinite(self, fc_class: FcClass, kind: CreditKind) -> bool:
        return not self._finite[(fc_class, kind)]

    def available(self, fc_class: FcClass, kind: CreditKind) -> int | None:
        """Credits the sender may still consume, or None for an infinite kind."""
        key = (fc_class, kind)
        return self._limit[key] - self._consumed[key] if self._finite[key] else None

    def consumed(self, fc_class: FcClass, kind: CreditKind) -> int:
        """Cumulative credits consumed (0 for an infinite kind)."""
        return self._consumed[(fc_class, kind)]

    def limit(self, fc_class: FcClass, kind: CreditKind) -> int:
        """Cumulative credit limit last granted (0 for an infinite kind)."""
        return self._limit[(fc_class, kind)]

    @property
    def stalls(self) -> list[CreditStall]:
        """Closed stall intervals, in the order they closed."""
        return list(self._stalls)

    def stall_started_ns(self, fc_class: FcClass) -> float | None:
        """Start of the class's open stall, or None if it is not stalled."""
        return self._stall_start.get(fc_class)

    def can_send(self, fc_class: FcClass, payload_bytes: int) -> bool:
        return self._fits(fc_class, tlp_credits(payload_bytes))

    def consume(self, fc_class: FcClass, payload_bytes: int, now_ns: float) -> ClassCredits:
        """Charge a TLP's credits; raises :class:`CreditViolation` if they are not there."""
        self._clock.advance(now_ns)
        cost = tlp_credits(payload_bytes)
        if not self._fits(fc_class, cost):
            raise CreditViolation(
                f"{fc_class.value} TLP of {payload_bytes} B needs {cost}, available "
                f"hdr={self.available(fc_class, CreditKind.HDR)} "
                f"data={self.available(fc_class, CreditKind.DATA)}"
            )
        self._charge(fc_class, cost)
        self._close_stall(fc_class, now_ns)
        return cost

    def try_consume(self, fc_class: FcClass, payload_bytes: int, now_ns: float) -> bool:
        """Charge the TLP if its credits are there; otherwise record (or extend) a stall of
        its class and return False."""
        self._clock.advance(now_ns)
        cost = tlp_credits(payload_bytes)
        if self._fits(fc_class, cost):
            self._charge(fc_class, cost)
            self._close_stall(fc_class, now_ns)
            return True
        self._stall_start.setdefault(fc_class, now_ns)
        self._stall_need[fc_class] = cost
        return False

    def on_update_fc(self, update: UpdateFC, now_ns: float) -> None:
        """Apply a credit return from the receiver."""
        self._clock.advance(now_ns)
        fc_class = update.fc_class
        for kind in _KINDS:
            key = (fc_class, kind)
            if not self._finite[key]:
                continue
            new_limit = update.limit(kind)
            if new_limit < self._limit[key]:
                _fail(
                    f"{fc_class.value} {kind.value} limit moved back from {self._limit[key]} "
                    f"to {new_limit}"
                )
            if new_limit - self._consumed[key] > self.advertisement[fc_class].of(kind):
                _fail(
                    f"{fc_class.value} {kind.value} UpdateFC grants "
                    f"{new_limit - self._consumed[key]} credits, above the advertised "
                    f"{self.advertisement[fc_class].of(kind)}"
                )
            self._limit[key] = new_limit
        need = self._stall_need.get(fc_class)
        if need is not None and self._fits(fc_class, need):
            self._close_stall(fc_class, now_ns)

    def _fits(self, fc_class: FcClass, cost: ClassCredits) -> bool:
        return all(
            not self._finite[(fc_class, kind)]
            or self._consumed[(fc_class, kind)] + cost.of(kind) <= self._limit[(fc_class, kind)]
            for kind in CreditKind
        )

    def _charge(self, fc_class: FcClass, cost: ClassCredits) -> None:
        for kind in _KINDS:
            key = (fc_class, kind)
            if self._finite[key]:
                self._consumed[key] += cost.of(kind)

    def _close_stall(self, fc_class: FcClass, now_ns: float) -> None:
        start = self._stall_start.pop(fc_class, None)
        need = self._stall_need.pop(fc_class, None)
        if start is not None and need is not None:
            self._stalls.append(CreditStall(fc_class, start, now_ns, need))


class CreditReceiver:
    """Receive-side buffer accounting and UpdateFC scheduling (see the module docstring)."""

    def __init__(
        self,
        advertisement: Mapping[FcClass, ClassCredits],
        *,
        update_interval_ns: float = SPEC_MAX_UPDATE_INTERVAL_NS,
        update_threshold: ClassCredits = ClassCredits(hdr=1, data=1),
        now_ns: float = 0.0,
    ) -> None:
        """``update_threshold``: freed, unadvertised header or data credits of a class that
        trigger an immediate UpdateFC. ``update_interval_ns``: longest gap between UpdateFCs
        of a class (the spec's bound is 30 µs; a longer one is a faulty profile, accepted)."""
        if update_interval_ns <= 0:
            raise ValueError(f"update_interval_ns must be > 0, got {update_interval_ns}")
        if update_threshold.hdr < 1 or update_threshold.data < 1:
            raise ValueError(f"update_threshold must be >= 1 credit, got {update_threshold}")
        self.advertisement = _validated(advertisement)
        self.update_interval_ns = update_interval_ns
        self.update_threshold = update_threshold
        self._finite = {(c, k): self.advertisement[c].of(k) != INFINITE for c, k in _KEYS}
        self._received = dict.fromkeys(_KEYS, 0)
        self._freed = dict.fromkeys(_KEYS, 0)
        self._advertised_freed = dict.fromkeys(_KEYS, 0)
        self._due_ns = {
            c: now_ns + update_interval_ns
            for c in FcClass
            if any(self._finite[(c, k)] for k in CreditKind)
        }
        self._clock = _Clock()
        self._clock.advance(now_ns)

    def occupied(self, fc_class: FcClass, kind: CreditKind) -> int | None:
        """Credits of TLPs in the buffer, or None for an infinite kind."""
        key = (fc_class, kind)
        return self._received[key] - self._freed[key] if self._finite[key] else None

    def buffered(self, fc_class: FcClass, kind: CreditKind) -> int | None:
        """Credits held here: occupied plus freed but not yet advertised (None if infinite)."""
        key = (fc_class, kind)
        if not self._finite[key]:
            return None
        return self._received[key] - self._advertised_freed[key]

    def limit(self, fc_class: FcClass, kind: CreditKind) -> int:
        """Cumulative limit carried by the latest UpdateFC (0 for an infinite kind)."""
        key = (fc_class, kind)
        if not self._finite[key]:
            return 0
        return self.advertisement[fc_class].of(kind) + self._advertised_freed[key]

    @property
    def next_update_due_ns(self) -> float | None:
        """When :meth:`poll` must next be called, or None if every class is infinite."""
        return min(self._due_ns.values(), default=None)

    def receive(self, fc_class: FcClass, payload_bytes: int, now_ns: float) -> None:
        """A TLP arrived and occupies buffer space."""
        self._clock.advance(now_ns)
        cost = tlp_credits(payload_bytes)
        for kind in _KINDS:
            key = (fc_class, kind)
            if not self._finite[key]:
                continue
            self._received[key] += cost.of(kind)
            occupied = self._received[key] - self._freed[key]
            if occupied > self.advertisement[fc_class].of(kind):
                _fail(
                    f"{fc_class.value} {kind.value} buffer holds {occupied} credits, above the "
                    f"advertised {self.advertisement[fc_class].of(kind)} (sender overran it)"
                )

    def release(self, fc_class: FcClass, payload_bytes: int, now_ns: float) -> list[UpdateFC]:
        """The far end took a TLP out of the buffer; returns an UpdateFC if one is due now."""
        self._clock.advance(now_ns)
        cost = tlp_credits(payload_bytes)
        for kind in _KINDS:
            key = (fc_class, kind)
            if not self._finite[key]:
                continue
            self._freed[key] += cost.of(kind)
            if self._freed[key] > self._received[key]:
                _fail(f"{fc_class.value} {kind.value} released more credits than the buffer held")
        pending = ClassCredits(
            *(
                self._freed[(fc_class, k)] - self._advertised_freed[(fc_class, k)]
                for k in CreditKind
            )
        )
        if pending.hdr >= self.update_threshold.hdr or pending.data >= self.update_threshold.data:
            return [self._update(fc_class, now_ns)]
        return []

    def poll(self, now_ns: float) -> list[UpdateFC]:
        """Tell the core the time; returns the periodic UpdateFCs that are due."""
        self._clock.advance(now_ns)
        due = [c for c, at_ns in self._due_ns.items() if at_ns <= now_ns]
        return [self._update(c, now_ns) for c in due]

    def _update(self, fc_class: FcClass, now_ns: float) -> UpdateFC:
        for kind in _KINDS:
            key = (fc_class, kind)
            self._advertised_freed[key] = self._freed[key]
        self._due_ns[fc_class] = now_ns + self.update_interval_ns
        return UpdateFC(
            fc_class,
            self.limit(fc_class, CreditKind.HDR),
            self.limit(fc_class, CreditKind.DATA),
        )


def check_conservation(
    sender: CreditSender,
    receiver: CreditReceiver,
    on_wire: Mapping[FcClass, ClassCredits],
) -> None:
    """Check available + in flight + buffered = advertised for every finite class and kind.

    ``on_wire``: credits of the TLPs the driver has sent but not yet handed to ``receiver``.
    Raises :class:`CreditInvariantError` naming the first term that breaks it.
    """
    for fc_class, kind in _KEYS:
        if sender.is_infinite(fc_class, kind):
            continue
        advertised = sender.advertisement[fc_class].of(kind)
        available = sender.available(fc_class, kind)
        buffered = receiver.buffered(fc_class, kind)
        occupied = receiver.occupied(fc_class, kind)
        assert available is not None and buffered is not None and occupied is not None
        returning = receiver.limit(fc_class, kind) - sender.limit(fc_class, kind)
        wire = on_wire.get(fc_class, ClassCredits(0, 0)).of(kind)
        terms = {
            "available": available,
            "on wire": wire,
            "returning": returning,
            "buffered": buffered,
            # The receiver never advertises space it has not freed.
            "freed, not yet advertised": buffered - occupied,
        }
        for name, value in terms.items():
            if not 0 <= value <= advertised:
                _fail(f"{fc_class.value} {kind.value} {name} = {value}, advertised {advertised}")
        total = available + wire + returning + buffered
        if total != advertised:
            _fail(
                f"{fc_class.value} {kind.value}: available {available} + in flight "
                f"{wire + returning} + buffered {buffered} = {total}, advertised {advertised}"
            )
