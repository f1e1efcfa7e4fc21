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
at message granularity. When the link layer brings credits (a port that may
have to wait for its downstream buffer), such ports get a real queue and a
wake-up callback; ``_Port.accept`` is the seam where that goes.

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
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import Fabric
from sitssim.link.credit_stage import FC_CLASS_OF_KIND, CreditLink
from sitssim.link.flit_link import FlitLink
from sitssim.workloads.synthetic import (
    KIND_PROBE_COMPLETION,
    KIND_PROBE_REQUEST,
    Schedule,
)


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
        "reverse",
        "wake_pending",
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
        self.credit: CreditLink | None = None
        self.queue: deque[int] = deque()
        self.wake_pending = False
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
        if self.link is not None:
            recoveries = len(self.link.recoveries)
            extra_busy, extra_deliver = self.link.burst(size, start)
            service += extra_busy
            deliver += extra_deliver
            if self.reverse is not None:
                for down, up in self.link.recoveries[recoveries:]:
                    self.reverse.add_outage(down, up)
        self.last_start = start
        self.free_at = start + service
        self.busy_ns += service
        self.bytes += size
        self.messages += 1
        return start + deliver + self.fwd_delay


class Transport:
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
        self.t_inject.append(self.env.now)
        self.t_deliver.append(math.nan)
        self._hop.append(0)
        self._ports_of.append(ports)
        self._undelivered += 1
        self._send(ports[0], msg)
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
            self.env.schedule(_Hop(self._inject_due, i), delay=t[i] - self.env.now)

    def start(self) -> None:
        if self._sched_t:
            self.env.schedule(_Hop(self._inject_due, 0), delay=self._sched_t[0])

    # --- ports -----------------------------------------------------------------

    def _send(self, port: _Port, msg: int) -> None:
        if port.credit is not None:
            port.queue.append(msg)
            self._try_start(port)
            return
        env = self.env
        now = env.now
        env.schedule(_Hop(self._arrive, msg), delay=port.accept(now, self.size[msg]) - now)
        hop = self._hop[msg]
        if hop:
            came_on = self._ports_of[msg][hop - 1]
            if came_on.credit is not None:
                # The message leaves the buffer it waits in when its serialisation starts.
                self._release(came_on, msg, port.last_start)

    def _arrive(self, ev: _Hop) -> None:
        msg = ev.msg
        hop = self._hop[msg] + 1
        self._hop[msg] = hop
        ports = self._ports_of[msg]
        came_on = ports[hop - 1]
        if came_on.credit is not None:
            came_on.credit.receive(FC_CLASS_OF_KIND[self.kind[msg]], self.size[msg], self.env.now)
        if hop < len(ports):
            self._send(ports[hop], msg)
        else:
            if came_on.credit is not None:
                self._release(came_on, msg, self.env.now)
            self._deliver(msg)

    # --- flow control (ports whose far end advertises finite credits) ---------

    def _try_start(self, port: _Port) -> None:
        """Commit the messages of a credited port's queue, in order, as far as credit allows.

        A message is committed as soon as its credits are there, to start when the port
        is free (this port is its credits' only consumer, so taking them early changes
        nothing). A message without credit waits for one wake-up: the port free again, or
        the earliest credit on its way back. Credits come back through a time-ordered
        heap, applied here when the sender looks, not by an event each.
        """
        if not port.queue or port.wake_pending:
            return
        env = self.env
        now = env.now
        credit = port.credit
        if credit.pending and credit.pending[0][0] <= now:
            credit.absorb(now)
        queue = port.queue
        while queue:
            msg = queue[0]
            fc = FC_CLASS_OF_KIND[self.kind[msg]]
            size = self.size[msg]
            if port.free_at > now:
                if not credit.fits(fc, size):
                    self._wake(port, port.free_at - now)
                    return
                credit.consume(fc, size)
            elif not credit.try_consume(fc, size, now):
                if credit.pending:
                    self._wake(port, credit.pending[0][0] - now)
                return
            queue.popleft()
            env.schedule(_Hop(self._arrive, msg), delay=port.accept(now, size) - now)
            hop = self._hop[msg]
            if hop:
                came_on = self._ports_of[msg][hop - 1]
                if came_on.credit is not None:
                    self._release(came_on, msg, port.last_start)

    def _wake(self, port: _Port, delay: float) -> None:
        port.wake_pending = True
        self.env.schedule(_Hop(self._woken, port.index), delay=delay)

    def _woken(self, ev: _Hop) -> None:
        port = self.ports[ev.msg]
        port.wake_pending = False
        self._try_start(port)

    def _release(self, came_on: _Port, msg: int, t_leave: float) -> None:
        """``msg`` leaves the buffer behind ``came_on`` at ``t_leave``; its UpdateFC follows."""
        t_back = came_on.credit.release(FC_CLASS_OF_KIND[self.kind[msg]], self.size[msg], t_leave)
        if came_on.queue and not came_on.wake_pending:
            # A sender held up for credit waits for this return.
            self._wake(came_on, t_back - self.env.now)

    def _deliver(self, msg: int) -> None:
        if not math.isnan(self.t_deliver[msg]):
            raise InvariantViolation(f"message {msg} delivered twice")
        self.t_deliver[msg] = self.env.now
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
            self._progress_step = max(self.injection_end_ns, self._horizon_ns, 1.0) / 50
            env.schedule(_Hop(self._tick, 0), delay=self._progress_step)
        env.run()
        if self._busy():
            raise InvariantViolation(
                f"the fabric went idle with {self._undelivered} messages undelivered"
            )
        return env.now

    def _tick(self, _ev: _Hop) -> None:
        """Report progress; re-arm only while other events remain, so the run can end."""
        self._progress(self.env.now, max(self.injection_end_ns, self._horizon_ns, 1.0))
        if self.env.peek() != math.inf:
            self.env.schedule(_Hop(self._tick, 0), delay=self._progress_step)

    def _busy(self) -> bool:
        return bool(
            self._next < len(self._sched_t) or self._undelivered or self._pending_completions
        )
