"""The L3 transport: messages crossing output ports, on SimPy.

Theory of operation
-------------------
Every channel (one direction of a link) is an output port with a FIFO queue
and one server. A message is an integer id; its fields live in column lists,
so the hot path touches no per-message object. A port is driven by two
callbacks, never by a process per message:

* ``_start``: the port takes the head of its queue and schedules the end of
  serialisation ``bytes / bandwidth`` later.
* ``_done``: serialisation ended. The message reaches the next node after the
  link's flight time plus that node's arbitration latency (switch level or
  root complex); the port starts its next message at once.

Arrival at the next node either delivers the message (last hop) or enqueues
it at the next port of its route. Ports are store-and-forward at message
granularity and buffers are unbounded: with arrivals processed in time order
each port realises Lindley's recursion exactly, which the tests check. The
link layer replaces the unbounded buffer with credits and flits.

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
from sitssim.workloads.synthetic import (
    KIND_PROBE_COMPLETION,
    KIND_PROBE_REQUEST,
    Schedule,
)


class _Port:
    __slots__ = (
        "busy",
        "busy_ns",
        "bytes",
        "current",
        "fwd_delay",
        "inv_bw",
        "messages",
        "on_done",
        "queue",
    )

    def __init__(self, inv_bw: float, fwd_delay: float) -> None:
        self.inv_bw = inv_bw
        self.fwd_delay = fwd_delay
        self.queue: deque[int] = deque()
        self.busy = False
        self.current = -1
        self.bytes = 0
        self.busy_ns = 0.0
        self.messages = 0
        self.on_done: Callable = lambda ev: None


class Transport:
    def __init__(
        self,
        env: simpy.Environment,
        fabric: Fabric,
        router: Router,
        nodes: list[str],
        schedule: Schedule,
        probe_params: dict[int, tuple[float, int]],
    ) -> None:
        self.env = env
        self.fabric = fabric
        self.router = router
        self.nodes = nodes
        self.node_id = {n: i for i, n in enumerate(nodes)}
        self.ports = []
        for ch in fabric.channels:
            port = _Port(1.0 / ch.bytes_per_ns, ch.propagation_ns + fabric.node_latency_ns[ch.dst])
            port.on_done = partial(self._done, port)
            self.ports.append(port)
        self._route_ports: dict[tuple[int, int], tuple[int, tuple[_Port, ...]]] = {}
        self._probe_params = probe_params

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

        self._sched = schedule
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

    # --- injection -------------------------------------------------------------

    def _ports_for(self, src: int, dst: int) -> tuple[int, tuple[_Port, ...]]:
        key = (src, dst)
        found = self._route_ports.get(key)
        if found is None:
            route = self.router.route(self.nodes[src], self.nodes[dst])
            found = (route.id, tuple(self.ports[c] for c in route.channels))
            self._route_ports[key] = found
        return found

    def inject(
        self, src: int, dst: int, size: int, tenant: int, kind: int, workload: int, parent: int = -1
    ) -> int:
        msg = len(self.src)
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

    def _inject_due(self, due: float, _ev: simpy.Event | None = None) -> None:
        t = self._sched_t
        src, dst, size, tenant, kind, workload = self._sched_cols
        i = self._next
        n = len(t)
        while i < n and t[i] <= due:
            self.inject(src[i], dst[i], size[i], tenant[i], kind[i], workload[i])
            i += 1
        self._next = i
        if i < n:
            ev = self.env.timeout(t[i] - self.env.now)
            ev.callbacks.append(partial(self._inject_due, t[i]))

    def start(self) -> None:
        if self._sched_t:
            ev = self.env.timeout(self._sched_t[0])
            ev.callbacks.append(partial(self._inject_due, self._sched_t[0]))

    # --- ports -----------------------------------------------------------------

    def _send(self, port: _Port, msg: int) -> None:
        if port.busy:
            port.queue.append(msg)
        else:
            self._start(port, msg)

    def _start(self, port: _Port, msg: int) -> None:
        port.busy = True
        port.current = msg
        service = self.size[msg] * port.inv_bw
        port.busy_ns += service
        self.env.timeout(service).callbacks.append(port.on_done)

    def _done(self, port: _Port, _ev: simpy.Event) -> None:
        msg = port.current
        port.bytes += self.size[msg]
        port.messages += 1
        self.env.timeout(port.fwd_delay, msg).callbacks.append(self._arrive)
        if port.queue:
            self._start(port, port.queue.popleft())
        else:
            port.busy = False

    def _arrive(self, ev: simpy.Event) -> None:
        msg = ev.value
        hop = self._hop[msg] + 1
        self._hop[msg] = hop
        ports = self._ports_of[msg]
        if hop < len(ports):
            self._send(ports[hop], msg)
        else:
            self._deliver(msg)

    def _deliver(self, msg: int) -> None:
        if not math.isnan(self.t_deliver[msg]):
            raise InvariantViolation(f"message {msg} delivered twice")
        self.t_deliver[msg] = self.env.now
        self._undelivered -= 1
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

    def run(self, progress: Callable[[float, float], None] | None = None) -> float:
        """Run until every message is delivered; return the final simulated time (ns)."""
        self.start()
        env = self.env
        if progress is None:
            env.run()
        else:
            horizon = max(self.injection_end_ns, 1.0)
            step = horizon / 50
            while self._busy():
                env.run(until=max(env.now, env.peek()) + step)
                progress(env.now, horizon)
        if self._busy():
            raise InvariantViolation(
                f"the fabric went idle with {self._undelivered} messages undelivered"
            )
        return env.now

    def _busy(self) -> bool:
        return bool(
            self._next < len(self._sched_t) or self._undelivered or self._pending_completions
        )
