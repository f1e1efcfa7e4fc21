"""The flow-level transport: a pair's messages one fluid flow, channels shared max-min fairly.

Theory of operation
-------------------
A message goes over the same route the packet transport would give it (the same router,
the same ranks among a pair's tied paths). The messages waiting on one route form a
connection, served in order of injection as the packet transport's source port serves
them: only the connection's head message is sending. While a connection has a message it
is a flow with a rate; the rates of all flows are the max-min fair allocation of the
channels' capacities (``sitssim.fabric.max_min``), recomputed whenever the set of flows or
a channel's capacity changes: when a connection gets its first message, when it sends its
last, and at the start and end of a link's outage (a channel in an outage has capacity
zero). A message joining a busy connection, or following its head, changes no rate.
Max-min fairness splits over the connected parts of the flows-and-channels graph, so only
the part a change touched is recomputed; every other flow keeps its rate. Between two
changes a flow's rate is constant, so its head's remaining bytes fall linearly and the
head's departure is known: the departures wait in a heap (an entry is stale once its
connection's rate or head changed), and one event is kept for the earliest. Changes at one
instant are gathered into one recomputation.

A message that has sent its last byte is delivered after the rest of its route's zero-load
latency: what an empty fabric adds to the bottleneck's serialisation (the other hops'
serialisation, or the cut-through heads, each link's flight and each node's latency). So
at zero load a message is delivered exactly when the packet transport's oracle says, and
under load the fluid sharing stands for the queues.

What it does not model, by construction: head-of-line blocking, credit stalls, flit
replays, switch buffers and VC arbitration, and the interleaving of packets of different
connections on a port (two connections through one port share it evenly, where the packet
transport's port serves their packets in order of arrival). A channel's ``busy_ns`` is the
time its capacity would take to carry what crossed it.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence

import numpy as np
import simpy

from sitssim.fabric.carrier import ENDPOINT_KINDS, Carrier
from sitssim.fabric.max_min import max_min_rates
from sitssim.fabric.oracles import zero_load_latency_ns
from sitssim.fabric.ports import Hop, callbacks_of
from sitssim.fabric.routing import Route, Router
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric

DONE_RTOL = 1e-9
"""A flow is done once its remaining bytes are at most this share of its size: the
rounding of rate x time, never a modelling choice."""

STALE_FACTOR = 4
STALE_SLACK = 1024
"""The heap of departures is rebuilt from its live entries once it holds more than
``STALE_FACTOR`` per flow in flight, plus ``STALE_SLACK``."""


class FluidChannel:
    """One channel's capacity and counters in a flow-level run (the tables' ``links``)."""

    __slots__ = ("busy_ns", "bytes", "bytes_per_ns", "down", "id", "messages", "outages")

    def __init__(self, channel_id: int, bytes_per_ns: float) -> None:
        self.id = channel_id
        self.bytes_per_ns = bytes_per_ns
        self.messages = 0
        self.bytes = 0
        self.busy_ns = 0.0
        self.down = 0
        """How many outages hold the channel down now."""
        self.outages: list[tuple[float, float]] = []

    def add_outage(self, start_ns: float, end_ns: float) -> None:
        """No byte crosses from ``start_ns`` to ``end_ns`` (the PHY stage's retrains)."""
        self.outages.append((start_ns, end_ns))


class FlowTransport(Carrier):
    """Each route's messages a connection served in order, the connections max-min fair
    fluid flows (see the module docstring).

    ``cut_through_bytes``: the switches' virtual cut-through head (0: store and forward),
    which the zero-load part of a flow's latency follows as the packet transport's does.
    """

    fidelity = "flow"

    def __init__(
        self,
        env: simpy.Environment,
        fabric: Fabric,
        router: Router,
        nodes: list[str],
        schedule: Schedule,
        message_vcs: Sequence[Sequence[int]] | None = None,
        cut_through_bytes: int = 0,
    ) -> None:
        super().__init__(env, fabric, router, nodes, schedule, message_vcs)
        graph = fabric.graph
        self._cut_through = (
            {n: cut_through_bytes for n in nodes if graph.nodes[n]["kind"] not in ENDPOINT_KINDS}
            if cut_through_bytes
            else {}
        )
        self.ports = [FluidChannel(c.id, c.bytes_per_ns) for c in fabric.channels]
        self._capacity = [c.bytes_per_ns for c in fabric.channels]
        self.rank: list[int] = []
        self._tails: dict[tuple[int, int], float] = {}
        self._tail_of: list[float] = []
        """Per message: how long after its last byte left its source it is delivered."""
        # Connections, one per route a message took: each one's channels and its messages
        # waiting, head first. Those with a message are flows: the head's bytes left at
        # ``_since`` and the rate since then; each channel's flows, in order of arrival.
        self._conn_of: dict[tuple[int, ...], int] = {}
        self._paths: list[tuple[int, ...]] = []
        self._queue: list[deque[int]] = []
        self._left: dict[int, float] = {}
        self._since: dict[int, float] = {}
        self._rate: dict[int, float] = {}
        self._on: list[dict[int, None]] = [{} for _ in fabric.channels]
        self._touched: dict[int, None] = {}
        """The channels whose flows or capacity changed since the last recomputation."""
        self._departures: list[tuple[float, int, int]] = []
        """(when, connection, stamp): the head's departure at the rate as of ``stamp``."""
        self._stamp: dict[int, int] = {}
        self._stamps = 0
        self._wake_at = math.inf
        self._recompute_due = False
        self._recompute_cbs = callbacks_of(self._recompute)
        self._departure_cbs = callbacks_of(self._departure)
        self._deliver_cbs = callbacks_of(self._delivered)
        self._capacity_cbs = callbacks_of(self._capacity_change)

    @property
    def cut_through(self) -> dict[str, int]:
        return dict(self._cut_through)

    def route_ids(self) -> np.ndarray:
        """Each message's route id (``router.routes``), from the path rank it was given."""
        return self.router.route_ids(self.src, self.dst, self.rank)

    # --- flows -----------------------------------------------------------------

    def start(self) -> None:
        for port in self.ports:
            for start, end in port.outages:
                self.env.schedule(Hop(self._capacity_cbs, ~port.id), delay=start)
                self.env.schedule(Hop(self._capacity_cbs, port.id), delay=end)
        super().start()

    def _route(self, msg: int) -> Route:
        src, dst = self.src[msg], self.dst[msg]
        names = self.nodes
        routes = self.router.selector(names[src], names[dst]).routes
        k = self.router.rank(src, dst, len(routes)) if len(routes) > 1 else 0
        self.rank.append(k)
        return routes[k]

    def _tail(self, route: Route, size: int) -> float:
        """What the route's zero-load latency adds to the bottleneck's serialisation."""
        key = (route.id, size)
        tail = self._tails.get(key)
        if tail is None:
            alone = Route(0, route.nodes, route.channels)
            zero_load = zero_load_latency_ns(
                self.fabric,
                [alone],
                np.zeros(1, dtype=np.int64),
                np.array([size]),
                self._cut_through,
            )[0]
            bottleneck = min(self.ports[c].bytes_per_ns for c in route.channels)
            tail = self._tails[key] = float(zero_load) - size / bottleneck
        return tail

    def _launch(self, msg: int, vc: int, replica: bool) -> None:
        route = self._route(msg)
        size = self.size[msg]
        path = route.channels
        for c in path:
            port = self.ports[c]
            port.messages += 1
            port.bytes += size
            port.busy_ns += size / port.bytes_per_ns
        self._tail_of.append(self._tail(route, size))
        conn = self._conn_of.get(path)
        if conn is None:
            conn = self._conn_of[path] = len(self._paths)
            self._paths.append(path)
            self._queue.append(deque())
        queue = self._queue[conn]
        queue.append(msg)
        if len(queue) == 1:
            for c in path:
                self._on[c][conn] = None
                self._touched[c] = None
            self._left[conn] = float(size)
            self._since[conn] = self.env._now
            self._rate[conn] = 0.0
            self._recompute_soon()

    def _recompute_soon(self) -> None:
        """Recompute the rates once every change of this instant is in."""
        if not self._recompute_due:
            self._recompute_due = True
            self.env.schedule(Hop(self._recompute_cbs, 0), delay=0.0)

    def _capacity_change(self, ev: Hop) -> None:
        going_down = ev.msg < 0
        port = self.ports[~ev.msg if going_down else ev.msg]
        port.down += 1 if going_down else -1
        self._capacity[port.id] = 0.0 if port.down else port.bytes_per_ns
        self._touched[port.id] = None
        self._recompute_soon()

    def _affected(self) -> list[int]:
        """The flows connected, through shared channels, to a channel that changed."""
        on, paths = self._on, self._paths
        seen_channels = dict(self._touched)
        frontier = list(self._touched)
        self._touched = {}
        flows: dict[int, None] = {}
        while frontier:
            c = frontier.pop()
            for conn in on[c]:
                if conn not in flows:
                    flows[conn] = None
                    for other in paths[conn]:
                        if other not in seen_channels:
                            seen_channels[other] = None
                            frontier.append(other)
        return list(flows)

    def _recompute(self, _ev: Hop) -> None:
        self._recompute_due = False
        flows = self._affected()
        if not flows:
            return
        paths = self._paths
        rates = max_min_rates([paths[conn] for conn in flows], self._capacity)
        now = self.env._now
        left, since, rate, stamp_of = self._left, self._since, self._rate, self._stamp
        size, queue = self.size, self._queue
        self._stamps += 1
        stamp = self._stamps
        heap = self._departures
        for conn, new in zip(flows, rates, strict=True):
            old = rate[conn]
            if old == new and conn in stamp_of:
                continue  # same rate: its head's departure in the heap still holds
            remaining = left[conn] - old * (now - since[conn])
            left[conn] = remaining
            since[conn] = now
            rate[conn] = new
            stamp_of[conn] = stamp
            if remaining <= DONE_RTOL * size[queue[conn][0]]:
                heapq.heappush(heap, (now, conn, stamp))
            elif new > 0.0:
                heapq.heappush(heap, (now + remaining / new, conn, stamp))
            else:
                del stamp_of[conn]  # stopped by an outage: no departure until it ends
        if len(heap) > STALE_FACTOR * len(rate) + STALE_SLACK:
            # Superseded departures leave the heap only when they reach its top; a fabric
            # whose rates keep changing would otherwise keep every one of them.
            heap[:] = [d for d in heap if stamp_of.get(d[1]) == d[2]]
            heapq.heapify(heap)
        self._wake()

    def _wake(self) -> None:
        """Keep one departure event, at the earliest departure still due."""
        heap = self._departures
        while heap and self._stamp.get(heap[0][1]) != heap[0][2]:
            heapq.heappop(heap)
        if heap and heap[0][0] < self._wake_at:
            self._wake_at = heap[0][0]
            self.env.schedule(Hop(self._departure_cbs, 0), delay=heap[0][0] - self.env._now)

    def _departure(self, _ev: Hop) -> None:
        """Deliver, after their tails, the heads whose last byte has been sent now; the
        next message of a connection becomes its head at the same rate."""
        now = self.env._now
        if now != self._wake_at:
            return  # superseded by an earlier wake-up, which re-armed for later ones
        self._wake_at = math.inf
        heap = self._departures
        stamp_of = self._stamp
        while heap and heap[0][0] <= now:
            _, conn, stamp = heapq.heappop(heap)
            if stamp_of.get(conn) != stamp:
                continue
            queue = self._queue[conn]
            msg = queue.popleft()
            self.env.schedule(Hop(self._deliver_cbs, msg), delay=self._tail_of[msg])
            if queue:
                size = self.size[queue[0]]
                self._left[conn] = float(size)
                self._since[conn] = now
                rate = self._rate[conn]
                if rate > 0.0:
                    self._stamps += 1
                    stamp_of[conn] = self._stamps
                    heapq.heappush(heap, (now + size / rate, conn, self._stamps))
                else:
                    del stamp_of[conn]  # its last head slipped out as an outage began
                continue
            del stamp_of[conn], self._left[conn], self._since[conn], self._rate[conn]
            for c in self._paths[conn]:
                del self._on[c][conn]
                self._touched[c] = None
        if self._touched:
            self._recompute_soon()
        self._wake()

    def _delivered(self, ev: Hop) -> None:
        self._deliver(ev.msg)
