"""Next-hop tables: every node's shortest-path next hops towards a destination.

One breadth-first search from a destination gives every node's distance to it; a
node's next hops towards it are its neighbours one step closer. The same pass counts
each node's shortest paths to the destination (the sum of its next hops' counts), and
those counts rank a pair's tied paths: walking down from the source and choosing among
the next hops in sorted name order by their cumulative counts yields the k-th path in
sorted order without listing the k before it. A table is built once per destination,
on first use, where a per-pair search would sweep the whole graph once per pair; a
1024-GPU fat tree has a million pairs and 32 tied paths for most of them.

Nodes are numbered in sorted name order, so comparing numbers compares names and a
walk over sorted numbers enumerates paths in the order of their sorted name tuples.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

import networkx as nx

# A node's entry towards one destination: its next hops (sorted node numbers) and the
# running total of the shortest paths through each of them.
Entry = tuple[tuple[int, ...], tuple[int, ...]]


class RouteTables:
    """Lazily built next-hop tables of an undirected graph, one per destination."""

    def __init__(self, graph: nx.Graph) -> None:
        self.names: list[str] = sorted(graph)
        self.number: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        number = self.number
        self._adjacent = [[number[m] for m in graph[n]] for n in self.names]
        self._towards: dict[int, list[Entry]] = {}
        # Entries repeat across destinations (a leaf's uplinks towards every remote
        # GPU): one shared tuple each keeps the tables at one reference per node.
        self._interned: dict[Entry, Entry] = {}

    def table(self, dst: int) -> list[Entry]:
        """Every node's entry towards node number ``dst``: its next hops (node numbers, in
        sorted order) and the running total of the shortest paths through each."""
        table = self._towards.get(dst)
        if table is None:
            table = self._towards[dst] = self._build(dst)
        return table

    def _build(self, dst: int) -> list[Entry]:
        adjacent = self._adjacent
        n = len(adjacent)
        dist = [-1] * n
        count = [0] * n
        hops: list[list[int]] = [[] for _ in range(n)]
        dist[dst] = 0
        count[dst] = 1
        queue = [dst]
        # Breadth-first order finishes a node's count before any node one step further
        # out reads it: all of its next hops are one step closer, so dequeued earlier.
        for u in queue:
            further = dist[u] + 1
            paths = count[u]
            for v in adjacent[u]:
                d = dist[v]
                if d < 0:
                    dist[v] = d = further
                    queue.append(v)
                if d == further:
                    hops[v].append(u)
                    count[v] += paths
        interned = self._interned
        table: list[Entry] = []
        for h in hops:
            h.sort()
            entry = (tuple(h), tuple(accumulate(count[x] for x in h)))
            table.append(interned.setdefault(entry, entry))
        return table

    def count(self, src: str, dst: str) -> int:
        """How many shortest paths join ``src`` to ``dst``."""
        return self.count_of(self.number[src], self.number[dst])

    def count_of(self, s: int, d: int) -> int:
        """How many shortest paths join node number ``s`` to node number ``d``."""
        totals = self.table(d)[s][1]
        if totals:
            return totals[-1]
        if s == d:
            return 1
        raise ValueError(f"no path from {self.names[s]!r} to {self.names[d]!r}")

    def next_hops(self, node: str, dst: str) -> tuple[str, ...]:
        """The neighbours of ``node`` one step closer to ``dst``, in sorted order."""
        names = self.names
        return tuple(names[h] for h in self.table(self.number[dst])[self.number[node]][0])

    def path(self, src: str, dst: str, k: int) -> tuple[str, ...]:
        """Path ``k`` of the shortest paths from ``src`` to ``dst`` in sorted order, ``k``
        taken modulo their number: a rotation by any offset lands on one of them."""
        d = self.number[dst]
        table = self.table(d)
        node = self.number[src]
        totals = table[node][1]
        if totals:
            k %= totals[-1]
        elif node != d:
            raise ValueError(f"no path from {src!r} to {dst!r}")
        names = self.names
        out = [src]
        while node != d:
            hops, totals = table[node]
            i = bisect_right(totals, k)
            if i:
                k -= totals[i - 1]
            node = hops[i]
            out.append(names[node])
        return tuple(out)

    def paths(self, src: str, dst: str) -> list[tuple[str, ...]]:
        """Every shortest path from ``src`` to ``dst``, in sorted order."""
        return [self.path(src, dst, k) for k in range(self.count(src, dst))]
