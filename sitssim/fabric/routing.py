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

Weighted ECMP with flow hashing belongs to the switch layer. Routes are
computed on first use and cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import networkx as nx

from sitssim.fabric.topology import Fabric

SPRAY_KINDS = frozenset({"nvswitch"})


@dataclass(frozen=True)
class Route:
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


class Router:
    def __init__(self, fabric: Fabric, spray: bool | None = None) -> None:
        self.fabric = fabric
        self.spray = fabric.kind in SPRAY_KINDS if spray is None else spray
        self._order = {node: i for i, node in enumerate(sorted(fabric.graph))}
        self._by_nodes: dict[tuple[str, ...], Route] = {}
        self._selectors: dict[tuple[str, str], PathSelector] = {}
        self.routes: list[Route] = []

    def _route(self, nodes: tuple[str, ...]) -> Route:
        found = self._by_nodes.get(nodes)
        if found is None:
            index = self.fabric.channel_index
            found = Route(
                id=len(self.routes),
                nodes=nodes,
                channels=tuple(index[pair] for pair in pairwise(nodes)),
            )
            self.routes.append(found)
            self._by_nodes[nodes] = found
        return found

    def selector(self, src: str, dst: str) -> PathSelector:
        """The path selector of a pair; a pinned pair's selector always returns one route."""
        key = (src, dst)
        found = self._selectors.get(key)
        if found is not None:
            return found
        paths = sorted(tuple(p) for p in nx.all_shortest_paths(self.fabric.graph, src, dst))
        phase = (self._order[src] + self._order[dst]) % len(paths)
        if self.spray and len(paths) > 1:
            routes = [self._route(p) for p in paths]
            channels = self.fabric.channels
            weights = [min(channels[c].bytes_per_ns for c in r.channels) for r in routes]
            found = PathSelector(routes, weights)
            # Start pairs at different points of the rotation, so that every
            # pair's first message does not land on the same plane.
            for _ in range(phase):
                found.next()
        else:
            found = PathSelector([self._route(paths[phase])], [1.0])
        self._selectors[key] = found
        return found

    def route(self, src: str, dst: str) -> Route:
        """The next route for a message from ``src`` to ``dst``."""
        return self.selector(src, dst).next()
