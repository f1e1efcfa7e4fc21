"""Max-min fair rates of flows over shared channels, by progressive filling.

Theory of operation
-------------------
A fluid network gives each flow a rate, and a channel's flows share its capacity. The
max-min fair allocation is the one in which no flow's rate can grow without lowering the
rate of a flow that already has no more (Bertsekas & Gallager, *Data Networks*, §6.5.2).
Progressive filling finds it: every flow's rate rises at the same pace from zero; when a
channel's flows fill it, that channel is a bottleneck and its flows stop rising, at the
fair share they reached; the others go on, until every flow is stopped.

While the rising flows are all at one level, a channel fills at the level
``(capacity - frozen) / rising``: what its stopped flows leave, shared by the flows still
rising through it. So the channels wait in a heap keyed on that level; the least fills
next, its rising flows stop there, and each channel those flows cross has its level
worked out again (it can only rise: that channel was not full at this level). Each flow
stops once and updates each of its channels once, so the whole allocation costs
``O(hops log channels)`` heap operations, however many distinct levels there are; equal
levels are taken in channel order, so the result is deterministic.

Sans-I/O: plain sequences in and out, no clock and no fabric; the flow-level transport
(``sitssim.fabric.flow_transport``) calls it when its set of flows or a channel's capacity
changes. A channel whose capacity is zero (a link in an outage) gives its flows rate zero;
a flow crossing no channel is limited by none (rate infinite).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence


def max_min_rates(
    paths: Sequence[Sequence[int]],
    capacity: Sequence[float],
    counts: Sequence[int] | None = None,
) -> list[float]:
    """Each flow's max-min fair rate, in the unit of ``capacity``.

    ``paths[f]`` lists flow ``f``'s channels; ``capacity[c]`` is channel ``c``'s.
    ``counts[f]``: how many flows share path ``f`` (each gets the rate returned for it: the
    allocation is unique, so flows on one path get equal rates); None: one each.
    """
    many = [1] * len(paths) if counts is None else counts
    rate = [math.inf] * len(paths)
    flows_on: dict[int, list[int]] = {}
    rising: dict[int, int] = {}
    for f, path in enumerate(paths):
        for c in path:
            flows_on.setdefault(c, []).append(f)
            rising[c] = rising.get(c, 0) + many[f]
    frozen = dict.fromkeys(flows_on, 0.0)
    heap = [(capacity[c] / n, c) for c, n in rising.items()]
    heapq.heapify(heap)
    stopped = [False] * len(paths)
    while heap:
        level, c = heapq.heappop(heap)
        n = rising[c]
        if n == 0 or level != (capacity[c] - frozen[c]) / n:
            continue  # stale: this channel's level changed since it was pushed
        for f in flows_on[c]:
            if stopped[f]:
                continue
            stopped[f] = True
            rate[f] = level
            n_f = many[f]
            for other in paths[f]:
                rising[other] -= n_f
                frozen[other] += level * n_f
                left = rising[other]
                if other != c and left:
                    heapq.heappush(heap, ((capacity[other] - frozen[other]) / left, other))
    return rate
