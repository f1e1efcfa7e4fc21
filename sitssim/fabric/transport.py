"""The L3 transport: messages crossing output ports, on SimPy.

Theory of operation
-------------------
Every channel (one direction of a link) is an output port: one server with a
FIFO queue and, for now, an unbounded buffer. A message is an integer id; its
fields live in column lists, so the hot path touches no per-message object.

Because the buffer is unbounded and arrivals at a port are handled in time
order, a FIFO port needs no event of its own: it keeps the time it becomes
free, and a message arriving at ``t`` starts service at ``max(t, free_at)``
(Lindley's recursion, exactly) and holds the port for ``bytes / bandwidth``.
The only event per hop is the message's arrival at the next node, after the
serialisation, the link's flight time and that node's arbitration latency
(switch level or root complex). Arrival either delivers the message (last
hop) or hands it to the next port of its route. Ports are store-and-forward
at message granularity.

When the link layer brings credits, a port may have to wait for room in the
next node's buffer. Such a port keeps the messages it cannot commit yet in a
queue and is woken (one event) when its port is free or a credit comes back.
A message is committed as soon as its credits are there, possibly while the
port is still busy, and then costs no more than on an uncredited port. The
queue is served in arrival order except where the PCIe ordering table lets a
later message pass an oldest one that has no credit (``_passer``).

A probe request that is delivered turns into a completion after the
completer's turnaround, routed back to the requester; the pair's round trip
is measured from the request's injection to the completion's delivery.

Injections come from a pre-drawn, time-sorted ``Schedule`` walked by one
chain of timeouts.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from functools import partial

import simpy

from sitssim.errors import InvariantViolation
from sitssim.fabric.messages import FC_CLASS_OF_KIND, KIND_PROBE_COMPLETION, KIND_PROBE_REQUEST
from sitssim.fabric.routing import Router
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric
from sitssim.link.credit_link import FC_POSTED, Cost, CreditLink
from sitssim.link.flit_link import TLP_BYTES_PER_FLIT, FlitLink

# Progress reports per expected run, and the shortest run they are spread over.
PROGRESS_TICKS = 50
PROGRESS_MIN_NS = 1_000.0


class _Hop:
    """A pre-triggered event carrying an integer: the lightest object SimPy's loop will step.

    It marks a message's arrival at the next node (``msg`` is the message id)
    or the injector's next due entry (``msg`` is the schedule index).

    ``Environment.step`` needs only ``callbacks`` and ``_ok`` of an event; a
    full ``simpy.Timeout`` costs three times as much to build, and one of
    these is made for every hop of every message.
    """

    __slots__ = ("_ok", "callbacks", "msg")

    def __init__(self, callback: Callable[[_Hop], None], msg: int) -> None:
        self.callbacks = [callback]
        self._ok = True
        self.msg = msg


class _Port:
    """An output port: FIFO, one server, unbounded buffer (see the module docstring).

    ``outages`` are intervals in which the link cannot carry traffic (it is
    retraining): a message is not started if its serialisation would overlap
    one; it starts when the link is back. ``link`` is the channel's flit-mode
    model when its errors are modelled: a burst that needs replays holds the
    port longer and delivers later, and a Recovery takes the reverse direction
    down too.
    """

    __slots__ = (
        "busy_ns",
        "bytes",
        "credit",
        "free_at",
        "fwd_delay",
        "index",
        "inv_bw",
        "last_start",
        "link",
        "messages",
        "outages",
        "queue",
        "recoveries_seen",
        "reverse",
        "wake_at",
    )

    def __init__(self, inv_bw: float, fwd_delay: float) -> None:
        self.inv_bw = inv_bw
        self.fwd_delay = fwd_delay
        self.free_at = 0.0
        self.bytes = 0
        self.busy_ns = 0.0
        self.messages = 0
        self.outages: list[tuple[float, float]] = []
        self.link: FlitLink | None = None
        self.reverse: _Port | None = None
        self.recoveries_seen = 0
        self.credit: CreditLink | None = None
        self.queue: deque[int] = deque()
        self.wake_at = math.inf
        self.index = -1
        self.last_start = 0.0

    def add_outage(self, start_ns: float, end_ns: float) -> None:
        self.outages.append((start_ns, end_ns))
        self.outages.sort()

    def accept(self, now: float, size: int) -> float:
        """Queue a message of ``size`` bytes at ``now``; return when it reaches the next node."""
        start = self.free_at if self.free_at > now else now
        service = size * self.inv_bw
        if self.outages:
            for down, up in self.outages:
                if down < start + service and start < up:
                    start = up
        deliver = service
        link = self.link
        if link is not None:
            # FlitLink.burst, inline: a burst with no failing flit costs only the countdown.
            n = -(-size // TLP_BYTES_PER_FLIT) or 1
            if link.clean_flits > n:
                link.clean_flits -= n
            else:
                extra_busy, extra_deliver = link.session(n, start)
                # Only a burst that needed replays can have sent the link to Recovery.
                service += extra_busy
                deliver += extra_deliver
                recoveries = link.recoveries
                if self.reverse is not None and len(recoveries) > self.recoveries_seen:
                    for down, up in recoveries[self.recoveries_seen :]:
                        self.reverse.add_outage(down, up)
                    self.recoveries_seen = len(recoveries)
        self.last_start = start
        self.free_at = start + service
        self.busy_ns += service
        self.bytes += size
        self.messages += 1
        return start + deliver + self.fwd_delay


class Transport:
    """Messages over the fabric's ports (see the module docstring).

    The hot path reads the clock as ``env._now``, the attribute behind SimPy's ``now``
    property: the property is a Python call, and it was read several times per hop.
    """

    def __init__(
        self,
        env: simpy.Environment,
        fabric: Fabric,
        router: Router,
        nodes: list[str],
        schedule: Schedule,
        probe_params: dict[int, tuple[float, int]],
        flit_links: list[FlitLink | None] | None = None,
        credit_links: list[CreditLink | None] | None = None,
    ) -> None:
        self.env = env
        self.fabric = fabric
        self.router = router
        self.nodes = nodes
        self.node_id = {n: i for i, n in enumerate(nodes)}
        self.ports = []
        for ch in fabric.channels:
            self.ports.append(
                _Port(1.0 / ch.bytes_per_ns, ch.propagation_ns + fabric.node_latency_ns[ch.dst])
            )
        for ch, port in zip(fabric.channels, self.ports, strict=True):
            port.reverse = self.ports[fabric.channel_index[(ch.dst, ch.src)]]
            port.index = ch.id
            if flit_links is not None:
                port.link = flit_links[ch.id]
            if credit_links is not None:
                port.credit = credit_links[ch.id]
        # Every credited channel is built from one credit profile, so a message costs the
        # same credits on each: worked out once, at injection.
        self._credit_model = next((p.credit for p in self.ports if p.credit is not None), None)
        self._credit_of: list[Cost] = []
        # One cost tuple per kind and size, shared by every such message: a tuple per
        # message would be garbage-collector work for nothing.
        self._costs: dict[tuple[int, int], Cost] = {}
        self._pinned: dict[tuple[int, int], tuple[int, tuple[_Port, ...]]] = {}
        self._probe_params = probe_params
        self._on_deliver: dict[int, Callable[[int], None]] = {}

        self.src: list[int] = []
        self.dst: list[int] = []
        self.size: list[int] = []
        self.tenant: list[int] = []
        self.kind: list[int] = []
        self.workload: list[int] = []
        self.route: list[int] = []
        self.parent: list[int] = []
        self.t_inject: list[float] = []
        self.t_deliver: list[float] = []
        self._hop: list[int] = []
        self._ports_of: list[tuple[_Port, ...]] = []

        self._sched_t = schedule.t_ns.tolist()
        self._sched_cols = [
            c.tolist()
            for c in (
                schedule.src,
                schedule.dst,
                schedule.size,
                schedule.tenant,
                schedule.kind,
                schedule.workload,
            )
        ]
        self._next = 0
        self._undelivered = 0
        self._pending_completions = 0
        self.injection_end_ns = self._sched_t[-1] if self._sched_t else 0.0
        self._horizon_ns = 0.0

    # --- injection -------------------------------------------------------------

    def _ports_for(self, src: int, dst: int) -> tuple[int, tuple[_Port, ...]]:
        key = (src, dst)
        pinned = self._pinned.get(key)
        if pinned is not None:
            return pinned
        selector = self.router.selector(self.nodes[src], self.nodes[dst])
        route = selector.next()
        choice = (route.id, tuple(self.ports[c] for c in route.channels))
        if len(selector.routes) == 1:
            self._pinned[key] = choice
        return choice

    def inject(
        self,
        src: int,
        dst: int,
        size: int,
        tenant: int,
        kind: int,
        workload: int,
        parent: int = -1,
        on_deliver: Callable[[int], None] | None = None,
    ) -> int:
        """Send a message now; ``on_deliver(msg)`` is called on its delivery (closed loops)."""
        msg = len(self.src)
        if on_deliver is not None:
            self._on_deliver[msg] = on_deliver
        route_id, ports = self._ports_for(src, dst)
        self.src.append(src)
        self.dst.append(dst)
        self.size.append(size)
        self.tenant.append(tenant)
        self.kind.append(kind)
        self.workload.append(workload)
        self.route.append(route_id)
        self.parent.append(parent)
        self.t_inject.append(self.env._now)
        self.t_deliver.append(math.nan)
        self._hop.append(0)
        self._ports_of.append(ports)
        if self._credit_model is not None:
            cost = self._costs.get((kind, size))
            if cost is None:
                cost = self._credit_model.cost(FC_CLASS_OF_KIND[kind], size)
                self._costs[(kind, size)] = cost
            self._credit_of.append(cost)
        self._undelivered += 1
        self._send(ports[0], msg, None)
        return msg

    def _inject_due(self, ev: _Hop) -> None:
        """Inject every scheduled message due at the time of entry ``ev.msg``, then re-arm."""
        t = self._sched_t
        src, dst, size, tenant, kind, workload = self._sched_cols
        due = t[ev.msg]
        i = self._next
        n = len(t)
        while i < n and t[i] <= due:
            self.inject(src[i], dst[i], size[i], tenant[i], kind[i], workload[i])
            i += 1
        self._next = i
        if i < n:
            self.env.schedule(_Hop(self._inject_due, i), delay=t[i] - self.env._now)

    def start(self) -> None:
        if self._sched_t:
            self.env.schedule(_Hop(self._inject_due, 0), delay=self._sched_t[0])

    # --- ports -----------------------------------------------------------------

    def _send(self, port: _Port, msg: int, came_on: _Port | None) -> None:
        """Hand ``msg``, just arrived over ``came_on`` (None: just injected), to ``port``."""
        env = self.env
        now = env._now
        credit = port.credit
        if credit is not None:
            queue = port.queue
            cost = self._credit_of[msg]
            fc, hdr, data = cost
            # A port with an empty queue has no stall open: a stalled class's refused
            # message waits in the queue until it is granted, which ends the stall.
            if queue or (
                (credit.avail_hdr[fc] < hdr or credit.avail_data[fc] < data)
                # Credit back by the time the port is free counts now (_try_start).
                and not credit.fits(cost, port.free_at if port.free_at > now else now)
            ):
                if came_on is not None and came_on.credit is not None:
                    # It waits in the buffer behind the link it came on.
                    came_on.credit.receive(cost)
                queue.append(msg)
                # A port already waiting decides when it is woken (or, with no credit on its
                # way, when one is), unless it is free and the newcomer may pass its head:
                # nothing passes a posted request.
                if len(queue) == 1 or (
                    port.free_at <= now and self._credit_of[queue[0]][0] != FC_POSTED
                ):
                    self._try_start(port)
                return
            # The common case, inline (CreditLink.consume): nothing queued, credit at hand.
            left_hdr = credit.avail_hdr[fc] - hdr
            left_data = credit.avail_data[fc] - data
            credit.avail_hdr[fc] = left_hdr
            credit.avail_data[fc] = left_data
            if left_hdr < 0 or left_data < 0:
                credit.overdrawn(fc)
        env.schedule(_Hop(self._arrive, msg), delay=port.accept(now, self.size[msg]) - now)
        if came_on is not None:
            back = came_on.credit
            if back is not None:
                # Committed as it arrived: it passes through the buffer behind the link it
                # came on, and leaves it when its serialisation starts.
                t_back = back.pass_through(self._credit_of[msg], port.last_start, now)
                # A sender held up for credit waits for this return (and for its port): its
                # wake-up comes sooner, unless it is already when the port is free.
                if came_on.queue and t_back < came_on.wake_at > came_on.free_at:
                    self._wake(came_on, t_back)

    def _arrive(self, ev: _Hop) -> None:
        msg = ev.msg
        hop = self._hop[msg] + 1
        self._hop[msg] = hop
        ports = self._ports_of[msg]
        came_on = ports[hop - 1]
        if hop < len(ports):
            # The buffer behind ``came_on`` counts the message from here (``_send``).
            self._send(ports[hop], msg, came_on)
            return
        credit = came_on.credit
        if credit is not None:
            now = self.env._now
            t_back = credit.pass_through(self._credit_of[msg], now, now)
            if came_on.queue and t_back < came_on.wake_at > came_on.free_at:
                self._wake(came_on, t_back)
        self._deliver(msg)

    # --- flow control (ports whose far end advertises finite credits) ---------

    def _try_start(self, port: _Port) -> None:
        """Start the messages of a credited port's queue as far as credit and ordering allow.

        A message is committed as soon as its credits are there, to start when the port
        is free: credit that is back by then counts now, since this port is its credits'
        only consumer and everything it commits starts after that. When the port is free
        and the oldest message has no credit, a later one may go instead if the PCIe
        ordering table lets it pass every message ahead of it (``_passer``). A port that
        can start nothing waits for one wake-up: the port free again, or the earliest
        credit on its way back.
        """
        env = self.env
        now = env._now
        credit = port.credit
        queue = port.queue
        credit_of = self._credit_of
        avail_hdr = credit.avail_hdr
        avail_data = credit.avail_data
        stall_start = credit.stall_start
        ready = port.free_at if port.free_at > now else now
        while queue:
            msg = queue[0]
            cost = credit_of[msg]
            fc, hdr, data = cost
            if (avail_hdr[fc] < hdr or avail_data[fc] < data) and not credit.fits(cost, ready):
                if ready > now:
                    # Decide again when the port is free, if something may pass the head
                    # then; behind a posted head nothing can, so wait for credit as well.
                    if fc != FC_POSTED:
                        self._wake(port, now)
                    elif credit.returning:
                        self._wake(port, credit.next_return())
                    return
                credit.refused(cost, now)
                i = self._passer(port)
                if i < 0:
                    self._wake(port, credit.next_return())
                    return
                msg = queue[i]
                del queue[i]
                cost = credit_of[msg]
                fc, hdr, data = cost
            else:
                queue.popleft()
            # CreditLink.consume, inline.
            left_hdr = avail_hdr[fc] - hdr
            left_data = avail_data[fc] - data
            avail_hdr[fc] = left_hdr
            avail_data[fc] = left_data
            if left_hdr < 0 or left_data < 0:
                credit.overdrawn(fc)
            if stall_start[fc] is not None:
                credit.end_stall(fc, now)
            env.schedule(_Hop(self._arrive, msg), delay=port.accept(now, self.size[msg]) - now)
            ready = port.free_at
            hop = self._hop[msg]
            if hop:
                came_on = self._ports_of[msg][hop - 1]
                back = came_on.credit
                if back is not None:
                    # As in _send: it leaves the buffer it waited in as it starts.
                    t_back = back.release(cost, port.last_start, now)
                    if came_on.queue and t_back < came_on.wake_at > came_on.free_at:
                        self._wake(came_on, t_back)

    def _passer(self, port: _Port) -> int:
        """The first queued message with credit that may pass all those ahead of it, or -1.

        Fabric ports apply the PCIe ordering table to messages without relaxed-ordering or
        ID-based-ordering attributes: nothing passes a posted request (A2a, B2a, D2a); a
        posted request passes non-posted ones and completions (A3-A5), and non-posted
        requests and completions pass each other and their own class (B3-B5, D3-D5: every
        "Y/N" taken). The head has already been refused; so is every message looked at
        that has no credit.
        """
        credit = port.credit
        credit_of = self._credit_of
        now = self.env._now
        for i, msg in enumerate(port.queue):
            cost = credit_of[msg]
            if i:
                if credit.fits(cost, now):
                    return i
                credit.refused(cost, now)
            if cost[0] == FC_POSTED:
                return -1
        return -1

    def _wake(self, port: _Port, t: float) -> None:
        """Make sure ``port`` looks at its queue again at ``t``, or when it is free if that is
        later (nothing starts before), or earlier; ``t = inf`` asks for nothing."""
        if t < port.free_at:
            t = port.free_at
        if t < port.wake_at:
            now = self.env._now
            delay = t - now
            # The time SimPy will step to (``now + delay``, which may differ from ``t`` in
            # the last bit): ``_woken`` recognises its wake-up by it.
            port.wake_at = now + delay
            self.env.schedule(_Hop(self._woken, port.index), delay=delay)

    def _woken(self, ev: _Hop) -> None:
        port = self.ports[ev.msg]
        # A wake-up superseded by an earlier one finds a later ``wake_at``, or none.
        if port.wake_at != self.env._now:
            return
        port.wake_at = math.inf
        self._try_start(port)

    def _deliver(self, msg: int) -> None:
        if not math.isnan(self.t_deliver[msg]):
            raise InvariantViolation(f"message {msg} delivered twice")
        self.t_deliver[msg] = self.env._now
        self._undelivered -= 1
        if self._on_deliver:
            notify = self._on_deliver.pop(msg, None)
            if notify is not None:
                notify(msg)
        if self.kind[msg] == KIND_PROBE_REQUEST:
            self._pending_completions += 1
            turnaround, completion_bytes = self._probe_params[self.workload[msg]]
            self.env.timeout(turnaround).callbacks.append(
                partial(self._complete, msg, completion_bytes)
            )

    def _complete(self, request: int, completion_bytes: int, _ev: simpy.Event) -> None:
        self._pending_completions -= 1
        self.inject(
            self.dst[request],
            self.src[request],
            completion_bytes,
            self.tenant[request],
            KIND_PROBE_COMPLETION,
            self.workload[request],
            parent=request,
        )

    # --- running ---------------------------------------------------------------

    def expect_activity_until(self, t_ns: float) -> None:
        """A closed-loop workload's estimate of its end, so progress has a scale."""
        self._horizon_ns = max(self._horizon_ns, t_ns)

    def run(self, progress: Callable[[float, float], None] | None = None) -> float:
        """Run until no event is left; return the final simulated time (ns)."""
        self.start()
        env = self.env
        if progress is not None:
            self._progress = progress
            self._progress_total = max(self.injection_end_ns, self._horizon_ns, PROGRESS_MIN_NS)
            env.schedule(_Hop(self._tick, 0), delay=self._progress_total / PROGRESS_TICKS)
        env.run()
        if self._busy():
            raise InvariantViolation(
                f"the fabric went idle with {self._undelivered} messages undelivered"
            )
        return env.now

    def _tick(self, _ev: _Hop) -> None:
        """Report progress; re-arm only while other events remain, so the run can end.

        A run that outlives its expected end (a closed loop may give no estimate at all)
        doubles it: ticks stay a fixed fraction of the run so far, never a flood.
        """
        now = self.env._now
        if now >= self._progress_total:
            self._progress_total = 2.0 * now
        self._progress(now, self._progress_total)
        if self.env.peek() != math.inf:
            self.env.schedule(_Hop(self._tick, 0), delay=self._progress_total / PROGRESS_TICKS)

    def _busy(self) -> bool:
        return bool(
            self._next < len(self._sched_t) or self._undelivered or self._pending_completions
        )
