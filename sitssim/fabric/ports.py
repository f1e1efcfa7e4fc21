"""Output ports: the serialiser of one channel, its link cost and its flow control.

Theory of operation
-------------------
An output port is one server with a FIFO queue in front of one channel (one
direction of a link). Because arrivals at a port are handled in time order and
its buffer is unbounded, a FIFO port needs no event of its own: it keeps the
time it becomes free, and a message arriving at ``t`` starts service at
``max(t, free_at)`` (Lindley's recursion, exactly) and holds the port for
``bytes / bandwidth``. The only event per hop is the message's arrival at the
far node, after the serialisation, the channel's flight time and the far
node's fixed latency (its arbitration); the far node's ``arrive`` decides what
happens next. Ports are store-and-forward at message granularity.

Two seams specialise a port, chosen by class when the fabric is built, so no
hop tests for a feature it does not have:

* **link cost** (:class:`FlitPort`): the channel's flit-mode model
  (``FlitLink.burst``) says what a burst costs beyond its clean serialisation:
  a burst that needed replays holds the port longer and arrives later, and a
  Recovery takes the reverse direction down too.
* **flow control** (:class:`CreditedPort`): credits per (VC, class) towards the
  buffer behind the channel's far end (``CreditLink``). A message is committed
  as soon as its credits are there, possibly while the port is still busy, and
  then costs no more than on an uncredited port; one that cannot be committed
  waits in the port's queue, which is woken (one event) when the port is free
  or a credit comes back. The queue is served in arrival order except where
  the PCIe ordering table (``fabric.ordering.ORDERING_TABLE``) lets a later
  message pass the ones ahead of it.

``outages`` are intervals in which the channel cannot carry traffic (it is
retraining): a message is not started if its serialisation would overlap one;
it starts when the link is back.

**Forwarding mode.** A far node that forwards by virtual cut-through (a switch whose
profile says so) is told of a message once its first ``cut_through_bytes`` have
arrived (:class:`TowardCutThrough`: the arrival event is the head's, and the tail's
time is noted in the engine's ``t_tail`` column), except a message addressed to it,
which it takes whole. A port leaving such a node (:class:`FromCutThrough`) may start
a message before its tail is in, but cannot finish before it: its serialisation ends
no earlier than the tail's arrival, so a message that found its output and credit
free streams through, and one that was held up long enough leaves as from a
store-and-forward buffer. The two are mixed into the port classes when the fabric is
built (``transport.port_class``), so a store-and-forward fabric pays nothing for them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from heapq import heappush
from typing import TYPE_CHECKING, Protocol

from simpy.events import NORMAL

from sitssim.fabric.ordering import ORDERING_TABLE, Pass
from sitssim.link.credit_link import FC_CLASSES, N_CLASSES, Cost, CreditLink
from sitssim.link.flit_link import FlitLink

if TYPE_CHECKING:
    import simpy


class Receiver(Protocol):
    """What a port needs of its far node (``sitssim.fabric.nodes.Node``): its fixed latency,
    charged on the arrival event, and its entry point."""

    latency_ns: float

    def arrive(self, msg: int, in_port: OutputPort) -> None: ...


class CreditFeeder(Protocol):
    """A switch model that commits messages to a :class:`CreditedPort` from buffers of its
    own (``sitssim.switch.input_queued``) rather than through the port's queue."""

    def credit_back(self, port: CreditedPort, t_back: float) -> None:
        """An UpdateFC for ``port`` reaches its sender at ``t_back``."""


class Hop:
    """A pre-triggered event carrying an integer: the lightest object SimPy's loop will step.

    It marks a message's arrival at a port's far node (``msg`` is the message id), or
    anything else that needs one integer. ``Environment.step`` needs only ``callbacks``
    and ``_ok`` of an event and never changes the list it calls, so one list per callback
    target is shared by all its events (``callbacks_of``); a full ``simpy.Timeout`` costs
    three times as much to build, and one of these is made for every hop of every message.
    """

    __slots__ = ("callbacks", "msg")
    _ok = True

    def __init__(self, callbacks: list[Callable[[Hop], None]], msg: int) -> None:
        self.callbacks = callbacks
        self.msg = msg


def callbacks_of(callback: Callable[[Hop], None]) -> list[Callable[[Hop], None]]:
    """The callback list that ``Hop`` events aimed at ``callback`` share."""
    return [callback]


class OutputPort:
    """The serialiser of one channel: FIFO, one server, unbounded buffer (module docstring).

    ``sizes`` and ``t_left`` are the engine's per-message columns: the port reads a
    message's size and records when its serialisation started (its departure) there.

    A port puts its ``Hop`` events straight onto SimPy's queue, the push that
    ``Environment.schedule`` makes (at ``now + delay``, so the time SimPy steps to is the
    one it would compute), without that method's Python frame: it is taken once per hop.
    """

    __slots__ = (
        "_arrived_cbs",
        "_eid",
        "_env",
        "_push",
        "_queue",
        "busy_ns",
        "bytes",
        "channel",
        "far",
        "free_at",
        "fwd_delay",
        "inv_bw",
        "last_start",
        "messages",
        "outages",
        "sizes",
        "t_left",
    )

    def __init__(
        self,
        channel: int,
        bytes_per_ns: float,
        flight_ns: float,
        far: Receiver,
        env: simpy.Environment,
        sizes: list[int],
        t_left: list[float],
    ) -> None:
        """``flight_ns``: propagation; the far node's fixed latency is added to it here."""
        self.channel = channel
        self.inv_bw = 1.0 / bytes_per_ns
        self.fwd_delay = flight_ns + far.latency_ns
        self.far = far
        self.free_at = 0.0
        self.last_start = 0.0
        self.bytes = 0
        self.busy_ns = 0.0
        self.messages = 0
        self.outages: list[tuple[float, float]] = []
        self.sizes = sizes
        self.t_left = t_left
        self._env = env
        self._queue = env._queue
        self._eid = env._eid
        self._push = heappush
        self._arrived_cbs = callbacks_of(self._arrived)

    def add_outage(self, start_ns: float, end_ns: float) -> None:
        self.outages.append((start_ns, end_ns))
        self.outages.sort()

    def _after_outages(self, start: float, service: float) -> float:
        """The first start from ``start`` at which ``service`` overlaps no outage."""
        for down, up in self.outages:
            if down < start + service and start < up:
                start = up
        return start

    def serialise(self, now: float, msg: int) -> float:
        """Take ``msg`` at ``now``; return when it reaches the far node."""
        size = self.sizes[msg]
        start = self.free_at if self.free_at > now else now
        service = size * self.inv_bw
        if self.outages:
            start = self._after_outages(start, service)
        self.last_start = start
        self.free_at = start + service
        self.busy_ns += service
        self.bytes += size
        self.messages += 1
        return start + service + self.fwd_delay

    def send(self, msg: int, in_port: OutputPort | None) -> None:
        """Take ``msg``, which arrived over ``in_port`` (None: injected here), now."""
        now = self._env._now
        t = self.serialise(now, msg)
        self.t_left[msg] = self.last_start
        self._push(
            self._queue, (now + (t - now), NORMAL, next(self._eid), Hop(self._arrived_cbs, msg))
        )

    def pass_through(self, msg: int, t_leave: float, now: float) -> None:
        """``msg``, arrived over this port at ``now``, leaves the buffer behind its far end
        at ``t_leave`` (committed to its next port, or delivered) without having waited
        there. An unbounded buffer has nothing to account."""

    def hold(self, msg: int) -> None:
        """``msg``, arrived over this port, waits uncommitted in the buffer behind its far
        end (a switch model's input buffer, or a blocked output's queue)."""

    def release(self, msg: int, t_leave: float, now: float) -> None:
        """``msg``, which waited in the buffer behind this port's far end (``hold``), is
        committed at ``now`` to leave it at ``t_leave``."""

    def _arrived(self, ev: Hop) -> None:
        self.far.arrive(ev.msg, self)


class FlitPort(OutputPort):
    """A port whose channel's flit errors are modelled: each burst's cost beyond its clean
    serialisation comes from the channel's ``FlitLink`` (the link-cost seam).

    The two specialisations keep their own attributes in the instance dict rather than in
    slots, so that a port can be both (``CreditedFlitPort``): two slotted bases cannot be
    combined."""

    def __init__(self, *args: object, link: FlitLink, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.link = link
        self.reverse: OutputPort | None = None
        self.recoveries_seen = 0

    def serialise(self, now: float, msg: int) -> float:
        size = self.sizes[msg]
        start = self.free_at if self.free_at > now else now
        service = size * self.inv_bw
        if self.outages:
            start = self._after_outages(start, service)
        extra_busy, extra_deliver = self.link.burst(size, start)
        deliver = service + extra_deliver
        service += extra_busy
        recoveries = self.link.recoveries
        if len(recoveries) > self.recoveries_seen:
            # A Recovery retrains the link: the reverse direction is down for it too.
            if self.reverse is not None:
                for down, up in recoveries[self.recoveries_seen :]:
                    self.reverse.add_outage(down, up)
            self.recoveries_seen = len(recoveries)
        self.last_start = start
        self.free_at = start + service
        self.busy_ns += service
        self.bytes += size
        self.messages += 1
        return start + deliver + self.fwd_delay


class ReleasesUpstream:
    """Mixed into an uncredited port at a node that a credited channel feeds: a message
    forwarded through it leaves the buffer behind the port it came over as it starts, so
    that port's credits come back (a :class:`CreditedPort` does this itself; a plain port
    has nothing upstream to tell, and pays nothing for it)."""

    def send(self, msg: int, in_port: OutputPort | None) -> None:
        super().send(msg, in_port)  # type: ignore[misc]
        if in_port is not None:
            in_port.pass_through(msg, self.last_start, self._env._now)  # type: ignore[attr-defined]


class _TailColumn:
    """``t_tail``: the engine's per-message column of when a message's tail has cleared the
    fixed latency of the node it last reached through a :class:`TowardCutThrough` port."""

    def __init__(self, *args: object, t_tail: list[float], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.t_tail = t_tail


class TowardCutThrough(_TailColumn):
    """Mixed into a port whose far node forwards by virtual cut-through (module docstring).

    ``dst`` is the engine's destination column, ``head_bytes`` how much of a message the far
    node needs before it can forward it.
    """

    def __init__(self, *args: object, dst: list[int], head_bytes: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.dst = dst
        self.head_ns = head_bytes * self.inv_bw  # type: ignore[attr-defined]
        self.far_index: int = self.far.index  # type: ignore[attr-defined]

    def serialise(self, now: float, msg: int) -> float:
        t = super().serialise(now, msg)  # type: ignore[misc]
        self.t_tail[msg] = t
        if self.dst[msg] == self.far_index:
            return t
        head: float = self.last_start + self.head_ns + self.fwd_delay  # type: ignore[attr-defined]
        return head if head < t else t


class FromCutThrough(_TailColumn):
    """Mixed into a port whose near node forwards by virtual cut-through: a message's last
    byte leaves no earlier than it arrived (``t_tail``, module docstring)."""

    def serialise(self, now: float, msg: int) -> float:
        tail = self.t_tail[msg]
        t: float = super().serialise(now, msg)  # type: ignore[misc]
        late: float = tail - self.free_at  # type: ignore[attr-defined]
        if late > 0:
            # The output stays the message's until its tail has come in and gone out.
            self.free_at = tail
            self.busy_ns += late  # type: ignore[has-type]
            return t + late
        return t


def _may_pass(later: int, earlier: int) -> bool:
    """The ordering table's cell for TLPs without relaxed-ordering or ID-based-ordering
    attributes: every "Yes" and "Y/N" is taken, so only "No" holds a TLP back."""
    base, _ = ORDERING_TABLE[(FC_CLASSES[later], FC_CLASSES[earlier])]
    return base is not Pass.NO


# PASSES_ALL[c][mask]: a message of class c may pass every message ahead of it when the
# classes ahead are the set bits of mask; PASSABLE[mask]: some class may.
PASSES_ALL: tuple[tuple[bool, ...], ...] = tuple(
    tuple(
        all(_may_pass(c, e) for e in range(N_CLASSES) if mask >> e & 1)
        for mask in range(1 << N_CLASSES)
    )
    for c in range(N_CLASSES)
)
PASSABLE: tuple[bool, ...] = tuple(
    any(PASSES_ALL[c][mask] for c in range(N_CLASSES)) for mask in range(1 << N_CLASSES)
)


class CreditedPort(OutputPort):
    """A port whose far end advertises finite credits (the flow-control seam, module
    docstring). Credits are kept per (VC, class) slot by the channel's ``CreditLink``; a
    message's cost ``(slot, hdr, data)`` is worked out once, at injection (``costs``).

    The port keeps one queue for every VC and applies the ordering table across it, so
    at an endpoint's port (or an output-queued switch's) a message may wait behind another
    VC's head short of credit, which real VCs would not make it do: a VC-aware port would
    keep a queue per VC, since ordering holds only within one. The input-queued switch
    keeps its buffers per VC and uses no port queue."""

    def __init__(
        self, *args: object, credit: CreditLink, costs: list[Cost], **kwargs: object
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.credit = credit
        self.costs = costs
        self.queue: deque[int] = deque()
        self.wake_at = math.inf
        # The port each queued message came over (None: injected here), to release its
        # place in that buffer when it starts.
        self._came_over: dict[int, CreditedPort | None] = {}
        self._woken_cbs = callbacks_of(self._woken)
        # The switch model that drives this port from its own buffers, if any: it holds
        # messages back for want of this port's credit, so it must hear of each return.
        self.feeder: CreditFeeder | None = None

    def send(self, msg: int, in_port: OutputPort | None) -> None:
        now = self._env._now
        credit = self.credit
        queue = self.queue
        # A port with an empty queue has no stall open: a stalled class's refused message
        # waits in the queue until it is granted, which ends the stall. Credit back by the
        # time the port is free counts now (_try_start).
        if queue or not credit.take(
            self.costs[msg], self.free_at if self.free_at > now else now, now
        ):
            if in_port is not None:
                # It waits in the buffer behind the port it came over.
                in_port.hold(msg)
            queue.append(msg)
            self._came_over[msg] = in_port  # type: ignore[assignment]
            # A port already waiting decides when it is woken (or, with no credit on its
            # way, when one is), unless it is free and the newcomer may pass its head.
            if len(queue) == 1 or (
                self.free_at <= now and PASSABLE[1 << (self.costs[queue[0]][0] % N_CLASSES)]
            ):
                self._try_start()
            return
        OutputPort.send(self, msg, in_port)
        if in_port is not None:
            # Committed as it arrived: it passes through the buffer behind the port it came
            # over, and leaves it when its serialisation starts.
            in_port.pass_through(msg, self.last_start, now)

    def hold(self, msg: int) -> None:
        """``msg`` waits, uncommitted, in the buffer behind this port's far end."""
        self.credit.receive(self.costs[msg])

    def waiting(self) -> list[tuple[int, object]]:
        """Each message waiting in this port's queue for its credits, in queue order, with
        what it holds meanwhile: the port it came over (its place in the buffer behind that
        port), an answer queue's place (``fabric.nodes.AnswerSlot``), or None (injected
        here: it holds no buffer)."""
        return [(msg, self._came_over[msg]) for msg in self.queue]

    def pass_through(self, msg: int, t_leave: float, now: float) -> None:
        """``msg`` arrived in the far buffer at ``now``, committed at once, to leave at
        ``t_leave``: its UpdateFC comes back, and may wake this port."""
        t_back = self.credit.pass_through(self.costs[msg], t_leave, now)
        # Only a port with messages waiting has anything to wake (most have none).
        if self.queue:
            self._credit_back(t_back)
        if self.feeder is not None:
            self.feeder.credit_back(self, t_back)

    def release(self, msg: int, t_leave: float, now: float) -> None:
        t_back = self.credit.release(self.costs[msg], t_leave, now)
        if self.queue:
            self._credit_back(t_back)
        if self.feeder is not None:
            self.feeder.credit_back(self, t_back)

    def _credit_back(self, t_back: float) -> None:
        """An UpdateFC reaches this port at ``t_back``: a port held up for credit waits for
        it (and for the port to be free), so its wake-up comes sooner, unless it is already
        when the port is free."""
        if t_back < self.wake_at > self.free_at:
            self._wake(t_back)

    def _try_start(self) -> None:
        """Start the queued messages as far as credit and ordering allow.

        A message is committed as soon as its credits are there, to start when the port is
        free: credit that is back by then counts now, since this port is its credits' only
        consumer and everything it commits starts after that. When the port is free and the
        oldest message has no credit, a later one may go instead if the ordering table lets
        it pass every message ahead of it (``_passer``). A port that can start nothing
        waits for one wake-up: the port free again, or the earliest credit on its way back.
        """
        now = self._env._now
        credit = self.credit
        queue = self.queue
        costs = self.costs
        ready = self.free_at if self.free_at > now else now
        while queue:
            msg = queue[0]
            cost = costs[msg]
            if credit.take(cost, ready, now):
                queue.popleft()
            else:
                if ready > now:
                    # Decide again when the port is free, if something may pass the head
                    # then; if nothing can, wait for credit as well: the head's class
                    # stalls from the moment the port is free.
                    if PASSABLE[1 << (cost[0] % N_CLASSES)]:
                        self._wake(now)
                    else:
                        credit.refused(cost, ready)
                        if credit.returning:
                            self._wake(credit.next_return())
                    return
                credit.refused(cost, now)
                i = self._passer()
                if i < 0:
                    self._wake(credit.next_return())
                    return
                msg = queue[i]
                del queue[i]
            OutputPort.send(self, msg, None)
            ready = self.free_at
            came_over = self._came_over.pop(msg)
            if came_over is not None:
                # As in ``send``: it leaves the buffer it waited in as it starts.
                came_over.release(msg, self.last_start, now)

    def _passer(self) -> int:
        """The first queued message with credit that may pass all those ahead of it, its
        credits taken, or -1.

        The head has already been refused; so is every message looked at that has no
        credit. Once the classes ahead are such that nothing may pass them all (a posted
        request among them: A2a, B2a, D2a), the search stops.
        """
        credit = self.credit
        costs = self.costs
        now = self._env._now
        ahead = 0
        for i, msg in enumerate(self.queue):
            cost = costs[msg]
            cls = cost[0] % N_CLASSES
            if i and PASSES_ALL[cls][ahead]:
                if credit.take(cost, now, now):
                    return i
                credit.refused(cost, now)
            ahead |= 1 << cls
            if not PASSABLE[ahead]:
                return -1
        return -1

    def _wake(self, t: float) -> None:
        """Make sure the port looks at its queue again at ``t``, or when it is free if that
        is later (nothing starts before), or earlier; ``t = inf`` asks for nothing."""
        if t < self.free_at:
            t = self.free_at
        if t < self.wake_at:
            now = self._env._now
            delay = t - now
            # The time SimPy will step to (``now + delay``, which may differ from ``t`` in
            # the last bit): ``_woken`` recognises its wake-up by it.
            self.wake_at = now + delay
            self._push(
                self._queue,
                (now + delay, NORMAL, next(self._eid), Hop(self._woken_cbs, self.channel)),
            )

    def _woken(self, _ev: Hop) -> None:
        # A wake-up superseded by an earlier one finds a later ``wake_at``, or none.
        if self.wake_at != self._env._now:
            return
        self.wake_at = math.inf
        self._try_start()
