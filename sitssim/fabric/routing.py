"""Routes: which channels a message from ``src`` to ``dst`` crosses.

Messages follow shortest paths (fewest links). Where several paths tie, the
choice is deterministic and spreads pairs over the ties: pair (s, d) takes
path number ``(index(s) + index(d)) mod k`` of the k tied paths in sorted
order, so an NVSwitch fabric uses every plane and a fat tree with several
spines uses every spine, with no randomness. (Weighted ECMP with flow hashing
belongs to the switch layer.) Routes are computed on first use and cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import networkx as nx

from sitssim.fabric.topology import Fabric


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


class Router:
    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self._order = {node: i for i, node in enumerate(sorted(fabric.graph))}
        self._by_pair: dict[tuple[str, str], Route] = {}
        self.routes: list[Route] = []

    def route(self, src: str, dst: str) -> Route:
        key = (src, dst)
        found = self._by_pair.get(key)
        if found is not None:
            return found
        paths = sorted(tuple(p) for p in nx.all_shortest_paths(self.fabric.graph, src, dst))
        nodes = paths[(self._order[src] + self._order[dst]) % len(paths)]
        index = self.fabric.channel_index
        route = Route(
            id=len(self.routes),
            nodes=nodes,
            channels=tuple(index[pair] for pair in pairwise(nodes)),
        )
        self.routes.append(route)
        self._by_pair[key] = route
        return route
