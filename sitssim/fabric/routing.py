"""Routes: which channels a message from ``src`` to ``dst`` crosses.

Messages follow shortest paths (fewest links). Where several paths tie, two
deterministic policies exist:

* **pinned** (PCIe-style fabrics: fat tree, direct RC, graphs): every message
  of a pair takes the same path, so ordering between a pair's messages is
  kept. Pair (s, d) takes path ``(index(s) + index(d)) mod k`` of its k tied
  paths in sorted order, which spreads pairs over spines without randomness.
* **spray** (NVSwitch): a GPU stripes its traffic over all of its links, so
  successive messages of a pair rotate over the tied paths by smooth weighted
  round robin, each path weighted by its bottleneck bandwidth (a plane
  reached by five links takes five shares in eighteen).

Both choose among a pair's tied paths at the source, so the per-hop routing
function that follows them (:class:`PathRouting`, ``route(node, msg, in_port)``) is
oblivious: a message's every hop is fixed by the path drawn for it when it is
injected, and each hop reads its next port off that path. Weighted ECMP with flow
hashing and adaptive routing are routing functions of the switch layer, choosing per
hop among the same next-hop tables' candidates. A pair's route is computed on its
first message, from next-hop tables built once per destination (``route_tables``),
and cached; route ids number routes in that order.
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, NamedTuple

from sitssim.fabric.route_tables import RouteTables
from sitssim.fabric.topology import Fabric

if TYPE_CHECKING:
    from sitssim.fabric.nodes import Node
    from sitssim.fabric.ports import OutputPort

SPRAY_KINDS = frozenset({"nvswitch"})


class Route(NamedTuple):
    """One path of a pair, numbered in order of first use. A named tuple, not a frozen
    dataclass: a 1024-GPU fat tree makes a million of them, and a frozen dataclass's
    ``__init__`` took most of the route build time."""

    id: int
    nodes: tuple[str, ...]
    channels: tuple[int, ...]

    @property
    def hops(self) -> int:
        return len(self.channels)

    @property
    def text(self) -> str:
        return ">".join(self.nodes)


class PathSelector:
    """Chooses a route per message for one (src, dst) pair: smooth weighted round robin."""

    __slots__ = ("_credit", "_total", "_weights", "routes")

    def __init__(self, routes: list[Route], weights: list[float]) -> None:
        self.routes = routes
        self._weights = weights
        self._total = sum(weights)
        self._credit = [0.0] * len(routes)

    def next(self) -> Route:
        credit = self._credit
        for i, w in enumerate(self._weights):
            credit[i] += w
        best = max(range(len(credit)), key=credit.__getitem__)
        credit[best] -= self._total
        return self.routes[best]


class PinnedSelector:
    """The selector of a pair that always takes one route: no weights, no credit to keep
    (a million of them at 1024 GPUs)."""

    __slots__ = ("routes",)

    def __init__(self, route: Route) -> None:
        self.routes = [route]

    def next(self) -> Route:
        return self.routes[0]


class Router:
    """Routes of one fabric, pinned or sprayed (see the module docstring); ``routes``
    lists every route handed out, ``routes[r.id] is r``."""

    def __init__(self, fabric: Fabric, spray: bool | None = None) -> None:
        self.fabric = fabric
        self.spray = fabric.kind in SPRAY_KINDS if spray is None else spray
        self.tables = RouteTables(fabric.graph)
        self._selectors: dict[tuple[str, str], PathSelector | PinnedSelector] = {}
        self.routes: list[Route] = []

    def _route(self, nodes: tuple[str, ...]) -> Route:
        # A pair's selector is made once, and no two pairs share a path, so every path
        # arriving here is new.
        channel = self.fabric.channel_index.__getitem__
        route = Route(len(self.routes), nodes, tuple(map(channel, pairwise(nodes))))
        self.routes.append(route)
        return route

    def selector(self, src: str, dst: str) -> PathSelector | PinnedSelector:
        """The path selector of a pair; a pinned pair's selector always returns one route."""
        key = (src, dst)
        found = self._selectors.get(key)
        if found is not None:
            return found
        tables = self.tables
        phase = tables.number[src] + tables.number[dst]
        if self.spray and tables.count(src, dst) > 1:
            routes = [self._route(p) for p in tables.paths(src, dst)]
            channels = self.fabric.channels
            weights = [min(channels[c].bytes_per_ns for c in r.channels) for r in routes]
            found = PathSelector(routes, weights)
            # Start pairs at different points of the rotation, so that every
            # pair's first message does not land on the same plane.
            for _ in range(phase % len(routes)):
                found.next()
        else:
            found = PinnedSelector(self._route(tables.path(src, dst, phase)))
        self._selectors[key] = found
        return found

    def route(self, src: str, dst: str) -> Route:
        """The next route for a message from ``src`` to ``dst``."""
        return self.selector(src, dst).next()


class PathRouting:
    """The per-hop routing function of the router's paths (module docstring).

    At a message's source it draws the message's path from the pair's selector and
    records it (``route``: the route id per message, the engine's column); at every later
    hop it returns the next port of that path. ``src``/``dst`` are the engine's
    per-message node columns; ``ports[c]`` is channel ``c``'s output port.
    """

    __slots__ = (
        "_hop",
        "_names",
        "_pinned",
        "_ports",
        "_ports_of",
        "dst",
        "route_ids",
        "router",
        "src",
    )

    def __init__(
        self,
        router: Router,
        names: list[str],
        ports: list[OutputPort],
        src: list[int],
        dst: list[int],
        route_ids: list[int],
    ) -> None:
        self.router = router
        self._names = names
        self._ports = ports
        self.src = src
        self.dst = dst
        self.route_ids = route_ids
        self._pinned: dict[tuple[int, int], tuple[int, tuple[OutputPort, ...]]] = {}
        self._ports_of: list[tuple[OutputPort, ...]] = []
        self._hop: list[int] = []

    def _draw(self, src: int, dst: int) -> tuple[int, tuple[OutputPort, ...]]:
        key = (src, dst)
        pinned = self._pinned.get(key)
        if pinned is not None:
            return pinned
        selector = self.router.selector(self._names[src], self._names[dst])
        route = selector.next()
        choice = (route.id, tuple(self._ports[c] for c in route.channels))
        if len(selector.routes) == 1:
            self._pinned[key] = choice
        return choice

    def route(self, node: Node, msg: int, in_port: OutputPort | None) -> OutputPort:
        if in_port is None:
            route_id, ports = self._draw(self.src[msg], self.dst[msg])
            self.route_ids[msg] = route_id
            self._ports_of.append(ports)
            self._hop.append(0)
            return ports[0]
        hop = self._hop[msg] + 1
        self._hop[msg] = hop
        return self._ports_of[msg][hop]

    def candidates(self, node: Node, msg: int) -> tuple[OutputPort, ...]:
        names = self._names
        index = self.router.fabric.channel_index
        ports = self._ports
        return tuple(
            ports[index[(node.name, nxt)]]
            for nxt in self.router.tables.next_hops(node.name, names[self.dst[msg]])
        )
