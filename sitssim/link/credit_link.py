"""Credit accounting of one link direction, on the hot path (the model the credits stage wires in).

The transport drives one ``CreditLink`` per channel: a port sends a message only when
its credits are there (``take``), the next node's buffer holds them until the
message leaves it (``release`` / ``pass_through``, told when: it starts on its next port,
or is delivered), and the UpdateFC that frees them reaches the sender (``sync``) the
reverse flight time plus ``update_delay`` after it leaves.

``CreditLink`` is the arithmetic of the sans-I/O ``CreditSender`` / ``CreditReceiver`` pair
(``sitssim.link.credits``) specialised to what a run needs: lossless UpdateFCs sent at
once (threshold one credit), so the receivers' periodic 30 µs updates change nothing.
The cores stay the reference: a property test
(tests/properties/test_credit_link_reference.py) drives both with the same operations and
requires the same refusals and credits. The specialisation exists for speed: the cores'
general bookkeeping costs about ten microseconds of Python per hop, which made flow
control ten times slower than the transport it controls. The flow-control invariants
are checked here too: nothing is sent without credit, no buffer holds more than it
advertised, and every credit is back with its sender when the fabric is idle.
"""

from __future__ import annotations

import heapq
import math

from sitssim.errors import InvariantViolation
from sitssim.link.credits import DATA_CREDIT_BYTES, FcClass

# Per-class arrays are indexed in the enum's order; each message kind's class, as such an
# index, is declared with the kind (sitssim.fabric.messages.FC_CLASS_OF_KIND).
FC_CLASSES: tuple[FcClass, ...] = tuple(FcClass)
N_CLASSES = len(FC_CLASSES)
FC_POSTED = FC_CLASSES.index(FcClass.P)

Cost = tuple[int, int, int]
"""What a message holds in a buffer: (slot, header credits, data credits); its slot is
its (VC, class) pair, ``vc * N_CLASSES + class index`` (:func:`slot`)."""


def slot(vc: int, fc: int) -> int:
    """The credit pool of virtual channel ``vc`` and class index ``fc``."""
    return vc * N_CLASSES + fc


def slot_name(s: int) -> str:
    """A slot as messages name it: its class, and its VC past the first."""
    vc, fc = divmod(s, N_CLASSES)
    name = f"class {FC_CLASSES[fc].value}"
    return name if vc == 0 else f"VC{vc} {name}"


# UpdateFCs kept before a sync is forced, so a link that never runs short stays small.
BACKLOG = 32
_heappush = heapq.heappush
_heappop = heapq.heappop


class CreditLink:
    """Flow control of one channel: the sender's credits and the far end's buffer.

    A message's credit cost ``(fc, hdr, data)`` comes from :meth:`cost`, once per message;
    the hot-path methods take it as it is. UpdateFCs on their way back wait in a heap (a
    port commits its next message ahead, so departures, and the returns that follow them,
    are known out of time order) and are applied lazily (:meth:`sync`): only when a
    decision needs them (a refusal) or the heap grows, which gives the same answers as
    applying each at its own time, because a return only ever adds credit.

    Three checks run online (credits never negative nor above the advertisement, no
    buffer overrun). A grant never takes credits below zero
    (``overdrawn``: a sender that ignores its credits); the transport writes the grant out
    in its hot path, check included. A return never takes them above the advertisement
    (a return for credits never taken). And the far buffer counts the messages waiting in
    it uncommitted, from their arrival (``receive``) until they are committed to their
    next port (``release``, which may be before they start), against the advertisement;
    a message committed as it arrives, or delivered, only passes through
    (``pass_through``). Every UpdateFC follows its message's departure
    (``t_back = t_leave + return_ns``), and no message leaves before it was committed
    (checked: ``t_leave >= now``).
    """

    __slots__ = (
        "adv_data",
        "adv_hdr",
        "avail_data",
        "avail_hdr",
        "channel",
        "held_data",
        "held_hdr",
        "max_payload",
        "return_ns",
        "returning",
        "stall_need",
        "stall_start",
        "stalls",
        "vcs",
    )

    def __init__(
        self,
        channel: int,
        hdr: int,
        data: int,
        return_ns: float,
        max_payload: int,
        vcs: int = 1,
    ) -> None:
        """``hdr`` / ``data``: credits advertised per (VC, class) (``INFINITE`` = not
        counted), for ``vcs`` virtual channels; each has its own pools, as each VC has its
        own receive buffers."""
        self.channel = channel
        self.vcs = vcs
        slots = vcs * N_CLASSES
        self.adv_hdr = hdr
        self.adv_data = data
        self.avail_hdr = [hdr] * slots
        self.avail_data = [data] * slots
        self.held_hdr = [0] * slots
        self.held_data = [0] * slots
        self.return_ns = return_ns
        self.max_payload = max_payload
        self.stall_start: list[float | None] = [None] * slots
        self.stall_need: list[tuple[int, int]] = [(0, 0)] * slots
        self.stalls: list[tuple[int, float, float, int, int]] = []
        # (t_back, cost): UpdateFCs on their way to the sender, a heap.
        self.returning: list[tuple[float, Cost]] = []

    def cost(self, fc: int, n_bytes: int, vc: int = 0) -> Cost:
        """The credits a message of class ``fc`` on ``vc`` holds: one TLP of at most
        ``max_payload``."""
        held = min(n_bytes, self.max_payload)
        return (
            slot(vc, fc),
            1 if self.adv_hdr else 0,
            -(-held // DATA_CREDIT_BYTES) if self.adv_data else 0,
        )

    def sync(self, now: float) -> None:
        """Apply every UpdateFC that has reached the sender by ``now``."""
        returning = self.returning
        avail_hdr, avail_data = self.avail_hdr, self.avail_data
        adv_hdr, adv_data = self.adv_hdr, self.adv_data
        while returning and returning[0][0] <= now:
            fc, hdr, data = _heappop(returning)[1]
            hdr += avail_hdr[fc]
            data += avail_data[fc]
            avail_hdr[fc] = hdr
            avail_data[fc] = data
            if hdr > adv_hdr or data > adv_data:
                raise InvariantViolation(
                    f"channel {self.channel}: {slot_name(fc)} credits above the "
                    "advertisement after an UpdateFC"
                )

    def next_return(self) -> float:
        """When the next UpdateFC reaches the sender (inf if none is on its way)."""
        return self.returning[0][0] if self.returning else math.inf

    def fits(self, cost: Cost, now: float) -> bool:
        """Whether the credits are there at ``now`` (applying the UpdateFCs due by then)."""
        fc, hdr, data = cost
        if self.avail_hdr[fc] >= hdr and self.avail_data[fc] >= data:
            return True
        returning = self.returning
        if not returning or returning[0][0] > now:
            return False
        self.sync(now)
        return self.avail_hdr[fc] >= hdr and self.avail_data[fc] >= data

    def take(self, cost: Cost, ready: float, now: float) -> bool:
        """Charge ``cost`` at ``now`` if the credits are there by ``ready`` (the UpdateFCs due
        by then applied: a port commits a message to start when it is free), ending a stall
        of its slot; otherwise change nothing and return False. The one call per grant on
        the hot path, so its common case (credits at hand) is a look at two counters."""
        fc, hdr, data = cost
        avail_hdr, avail_data = self.avail_hdr, self.avail_data
        if (avail_hdr[fc] < hdr or avail_data[fc] < data) and not self.fits(cost, ready):
            return False
        left_hdr = avail_hdr[fc] - hdr
        left_data = avail_data[fc] - data
        avail_hdr[fc] = left_hdr
        avail_data[fc] = left_data
        if left_hdr < 0 or left_data < 0:
            self.overdrawn(fc)
        if self.stall_start[fc] is not None:
            self.end_stall(fc, now)
        return True

    def overdrawn(self, fc: int) -> None:
        """Class ``fc``'s credits went below zero: something was sent without credit."""
        raise InvariantViolation(
            f"channel {self.channel}: {slot_name(fc)} credits below zero "
            f"({self.avail_hdr[fc]} hdr / {self.avail_data[fc]} data): sent without credit"
        )

    def end_stall(self, fc: int, now: float) -> None:
        """Class ``fc``'s stall (there is one) ends at ``now``: a message of it got credit."""
        self.stalls.append((fc, self.stall_start[fc], now, *self.stall_need[fc]))
        self.stall_start[fc] = None

    def refused(self, cost: Cost, now: float) -> None:
        """A message could not be sent for want of ``cost``: its class stalls from ``now``
        (if it was not stalled already)."""
        fc, hdr, data = cost
        if self.stall_start[fc] is None:
            self.stall_start[fc] = now
        self.stall_need[fc] = (hdr, data)

    def try_consume(self, cost: Cost, now: float) -> bool:
        """Take the credits if they are there; otherwise record the refusal."""
        if self.take(cost, now, now):
            return True
        self.refused(cost, now)
        return False

    def receive(self, cost: Cost) -> None:
        """A message arrives in the far buffer, to wait there uncommitted."""
        fc, hdr, data = cost
        held_hdr, held_data = self.held_hdr, self.held_data
        held_hdr[fc] += hdr
        held_data[fc] += data
        # An infinite kind costs nothing, so its count stays at its advertisement, 0.
        if held_hdr[fc] > self.adv_hdr or held_data[fc] > self.adv_data:
            raise InvariantViolation(
                f"channel {self.channel}: {slot_name(fc)} buffer holds "
                f"{held_hdr[fc]} hdr / {held_data[fc]} data credits, above the "
                f"advertised {self.adv_hdr} / {self.adv_data} (sender overran it)"
            )

    def pass_through(self, cost: Cost, t_leave: float, now: float) -> float:
        """A message arrives in the far buffer at ``now`` and is committed at once, to leave
        at ``t_leave`` (delivered, or on to a port): ``receive`` and ``release`` together.
        Returns when its UpdateFC reaches the sender. It is never counted as held: the
        count is of messages waiting uncommitted."""
        if t_leave < now:
            self._left_early(t_leave, now)
        t_back = t_leave + self.return_ns
        returning = self.returning
        _heappush(returning, (t_back, cost))
        if len(returning) > BACKLOG and returning[0][0] <= now:
            self.sync(now)
        return t_back

    def release(self, cost: Cost, t_leave: float, now: float) -> float:
        """The message waiting in the far buffer is committed at ``now``, to leave it at
        ``t_leave``; returns when its UpdateFC reaches the sender."""
        fc, hdr, data = cost
        self.held_hdr[fc] -= hdr
        self.held_data[fc] -= data
        return self.pass_through(cost, t_leave, now)

    def _left_early(self, t_leave: float, now: float) -> None:
        raise InvariantViolation(
            f"channel {self.channel}: a message leaves the buffer at {t_leave} ns, "
            f"before it was committed ({now} ns)"
        )
