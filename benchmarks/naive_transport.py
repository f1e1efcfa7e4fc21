"""The transport as a textbook SimPy model: one process per message, a Resource per port.

This is the baseline ``bench_transport.py`` measures sitssim against. It models exactly
what ``sitssim.fabric.transport`` models, written the way SimPy's tutorials would: every
channel (one direction of a link) is a ``simpy.Resource(capacity=1)``, whose request queue
is FIFO; a message is a process that, for each channel on its route, waits for the
channel, holds it for the serialisation time ``bytes / bandwidth``, releases it, and then
spends the channel's flight time plus the next node's arbitration latency before it asks
for the next channel (store-and-forward at message granularity, unbounded buffers).

Routes and per-channel delays come from sitssim's own ``Router`` and ``Fabric``, so the two
models can differ only in how they schedule events, not in what they compute.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import simpy

from sitssim.fabric.routing import Router
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric


@dataclass(frozen=True)
class NaivePort:
    ns_per_byte: float
    forward_ns: float


def naive_ports(fabric: Fabric) -> list[NaivePort]:
    """Per channel: serialisation cost, and flight time plus the receiving node's arbitration."""
    return [
        NaivePort(1.0 / ch.bytes_per_ns, ch.propagation_ns + fabric.node_latency_ns[ch.dst])
        for ch in fabric.channels
    ]


def route_table(
    router: Router, nodes: list[str], schedule: Schedule
) -> dict[tuple[int, int], tuple[int, ...]]:
    """The channel ids of every (src, dst) node-id pair the schedule uses.

    Only pinned pairs (one path per pair, as on PCIe-style fabrics) have a single entry; a
    pair whose messages the router sprays over several paths is refused.
    """
    pairs = set(zip(schedule.src.tolist(), schedule.dst.tolist(), strict=True))
    table = {}
    for s, d in sorted(pairs):
        routes = router.selector(nodes[s], nodes[d]).routes
        if len(routes) != 1:
            raise ValueError(
                f"{nodes[s]}>{nodes[d]} sprays over {len(routes)} paths; "
                "the naive model replays pinned routes only"
            )
        table[s, d] = routes[0].channels
    return table


class NaiveTransport:
    """Replays a ``Schedule`` (data messages only) with one SimPy process per message."""

    def __init__(
        self,
        ports: list[NaivePort],
        routes: dict[tuple[int, int], tuple[int, ...]],
        schedule: Schedule,
    ) -> None:
        self.env = simpy.Environment()
        self._ports = ports
        self._resources = [simpy.Resource(self.env, capacity=1) for _ in ports]
        self._routes = routes
        self._t = schedule.t_ns.tolist()
        self._src = schedule.src.tolist()
        self._dst = schedule.dst.tolist()
        self._size = schedule.size.tolist()
        self.t_inject: list[float] = [0.0] * len(self._t)
        self.t_deliver: list[float] = [float("nan")] * len(self._t)

    def _injector(self) -> Generator[simpy.Event, None, None]:
        env = self.env
        for msg, t in enumerate(self._t):
            if t > env.now:
                yield env.timeout(t - env.now)
            self.t_inject[msg] = env.now
            route = self._routes[self._src[msg], self._dst[msg]]
            env.process(self._message(msg, route, self._size[msg]))

    def _message(
        self, msg: int, route: tuple[int, ...], size: int
    ) -> Generator[simpy.Event, None, None]:
        env = self.env
        for channel in route:
            port = self._ports[channel]
            with self._resources[channel].request() as request:
                yield request
                yield env.timeout(size * port.ns_per_byte)
            yield env.timeout(port.forward_ns)
        self.t_deliver[msg] = env.now

    def run(self) -> float:
        """Run until every message is delivered; return the final simulated time (ns)."""
        self.env.process(self._injector())
        self.env.run()
        return self.env.now
