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

Both choose among a pair's tied paths at the source: a message is given its
path's rank ``k`` among the pair's tied paths in sorted order when it is injected
(``Router.rank``). Routing is then per hop (:class:`TableRouting`,
``route(node, msg, in_port)``): each node looks up its entry towards the
destination in the next-hop tables (``route_tables``, built once per destination)
and takes the next hop that the rank falls in, by the cumulative path counts, with
the rank reduced to the remainder below that hop; a node with one next hop just
takes it. That walk is exactly how the tables enumerate the k-th path, so each
message crosses its ranked path with no per-pair state on the hot path. Weighted
ECMP with flow hashing and adaptive routing are routing functions of the switch
layer, choosing per hop among the same candidates.

``Route`` objects (a path's nodes and channels, numbered in order of first use) are
for the tables after a run (``Router.route_ids``) and for callers that want whole
paths (``Router.route``); a sprayed pair's routes are created together, in sorted
order, on its first use.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from sitssim.fabric.route_tables import Entry, RouteTables
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


class RoundRobin:
    """Smooth weighted round robin over indices ``0..len(weights)-1``: each turn every index
    gains its weight, the largest (the first of equals) is chosen and pays the total."""

    __slots__ = ("_credit", "_total", "_weights")

    def __init__(self, weights: list[float]) -> None:
        self._weights = weights
        self._total = sum(weights)
        self._credit = [0.0] * len(weights)

    def next_index(self) -> int:
        credit = self._credit
        for i, w in enumerate(self._weights):
            credit[i] += w
        best = max(range(len(credit)), key=credit.__getitem__)
        credit[best] -= self._total
        return best


class PathSelector:
    """Chooses a route per message for one (src, dst) pair: smooth weighted round robin."""

    __slots__ = ("_turns", "routes")

    def __init__(self, routes: list[Route], weights: list[float]) -> None:
        self.routes = routes
        self._turns = RoundRobin(weights)

    def next(self) -> Route:
        return self.routes[self._turns.next_index()]


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
        self._turns: dict[tuple[int, int], RoundRobin] = {}
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
            paths = tables.paths(src, dst)
            found = PathSelector([self._route(p) for p in paths], self._weights(paths))
            # Start pairs at different points of the rotation, so that every
            # pair's first message does not land on the same plane.
            for _ in range(phase % len(paths)):
                found.next()
        else:
            found = PinnedSelector(self._route(tables.path(src, dst, phase)))
        self._selectors[key] = found
        return found

    def route(self, src: str, dst: str) -> Route:
        """The next route for a message from ``src`` to ``dst``."""
        return self.selector(src, dst).next()

    def _weights(self, paths: list[tuple[str, ...]]) -> list[float]:
        """Each path's share of a sprayed pair's traffic: its bottleneck bandwidth."""
        index = self.fabric.channel_index
        channels = self.fabric.channels
        return [min(channels[index[hop]].bytes_per_ns for hop in pairwise(p)) for p in paths]

    def rank(self, src: int, dst: int, count: int | None = None) -> int:
        """The rank, among the pair's tied paths in sorted order, of the path the next
        message from node number ``src`` to node number ``dst`` takes; the same choice as
        ``selector(...).next()`` (module docstring), without building a route. ``count``
        is the pair's number of tied paths, if the caller has it at hand."""
        if count is None:
            count = self.tables.count_of(src, dst)
        if not (self.spray and count > 1):
            return (src + dst) % count
        key = (src, dst)
        turns = self._turns.get(key)
        if turns is None:
            names = self.tables.names
            turns = RoundRobin(self._weights(self.tables.paths(names[src], names[dst])))
            for _ in range((src + dst) % count):
                turns.next_index()
            self._turns[key] = turns
        return turns.next_index()

    def route_ids(self, src: Sequence[int], dst: Sequence[int], rank: Sequence[int]) -> np.ndarray:
        """The route id of each message (node numbers and path ranks per message), routes
        created in message order: the ids the messages' routes got when each pair's route
        was made on its first message. Vectorised over the messages: one selector lookup
        per pair, its pairs taken in order of first message."""
        names = self.tables.names
        s = np.asarray(src, dtype=np.int64)
        d = np.asarray(dst, dtype=np.int64)
        k = np.asarray(rank, dtype=np.int64)
        if not len(s):
            return np.zeros(0, dtype=np.int64)
        pair, first, which = np.unique(s * len(names) + d, return_index=True, return_inverse=True)
        ids: list[int] = []
        start = np.empty(len(pair), dtype=np.int64)
        count = np.empty(len(pair), dtype=np.int64)
        for p in np.argsort(first, kind="stable"):
            m = first[p]
            routes = self.selector(names[s[m]], names[d[m]]).routes
            start[p], count[p] = len(ids), len(routes)
            ids.extend(r.id for r in routes)
        many = count[which] > 1
        return np.asarray(ids, dtype=np.int64)[start[which] + np.where(many, k, 0)]


# A node's way towards one destination: its candidate output ports (the next hops, in
# sorted order) and the running total of the shortest paths through each.
Choice = tuple[tuple["OutputPort", ...], tuple[int, ...]]


def _compact_row(indices: list[int]) -> Sequence[int]:
    """A node's row of choice indices by destination, one byte each where they fit."""
    return bytes(indices) if max(indices, default=0) < 256 else array("H", indices)


class TableRouting:
    """Per-hop routing from the next-hop tables, by each message's path rank (module
    docstring).

    ``src``/``dst`` are the engine's per-message node columns; ``rank`` is the column this
    fills: each message's path rank, drawn from the router at its source. Nodes are
    numbered as the tables number them (sorted names). ``connect`` gives it the ports and
    lays the tables out per node: a node has few distinct ways towards all destinations (a
    leaf's way up is the same towards every remote GPU), so each node keeps its distinct
    choices, next hops as ports, and a row of one byte per destination naming one. A
    1024-GPU fat tree's tables then take a megabyte rather than ten, which a hop reads
    from the processor's caches rather than from memory.
    """

    __slots__ = ("_choices", "_left", "_rows", "dst", "rank", "router", "src")

    def __init__(self, router: Router, src: list[int], dst: list[int]) -> None:
        self.router = router
        self.src = src
        self.dst = dst
        self.rank: list[int] = []
        # What is left of each message's rank below the next hops taken so far.
        self._left: list[int] = []
        self._rows: list[Sequence[int]] = []
        self._choices: list[tuple[Choice, ...]] = []

    def connect(self, ports: Sequence[OutputPort]) -> None:
        """``ports[c]`` is channel ``c``'s output port. Every destination's table is built
        here, with the fabric, as a fabric manager programs its switches before traffic:
        one breadth-first search per node, none while messages move."""
        tables = self.router.tables
        number = tables.number
        n = len(tables.names)
        out: list[dict[int, OutputPort]] = [{} for _ in range(n)]
        for ch in self.router.fabric.channels:
            out[number[ch.src]][number[ch.dst]] = ports[ch.id]
        towards = [tables.table(d) for d in range(n)]
        for here in range(n):
            mine = out[here]
            index_of: dict[Entry, int] = {}
            choices: list[Choice] = []
            row = []
            for d in range(n):
                entry = towards[d][here]
                i = index_of.get(entry)
                if i is None:
                    i = index_of[entry] = len(choices)
                    choices.append((tuple(mine[h] for h in entry[0]), entry[1]))
                row.append(i)
            self._rows.append(_compact_row(row))
            self._choices.append(tuple(choices))

    def route(self, node: Node, msg: int, in_port: OutputPort | None) -> OutputPort:
        here = node.index
        dst = self.dst[msg]
        ports, totals = self._choices[here][self._rows[here][dst]]
        if in_port is None:
            # At its source (messages are routed there in the order they are numbered); the
            # running totals end with the pair's number of tied paths.
            k = self.router.rank(here, dst, totals[-1])
            self.rank.append(k)
            self._left.append(k)
        if len(ports) == 1:
            return ports[0]
        k = self._left[msg]
        i = bisect_right(totals, k)
        if i:
            self._left[msg] = k - totals[i - 1]
        return ports[i]

    def candidates(self, node: Node, msg: int) -> tuple[OutputPort, ...]:
        here = node.index
        return self._choices[here][self._rows[here][self.dst[msg]]][0]
