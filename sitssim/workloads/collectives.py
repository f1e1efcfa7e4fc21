"""Collective operations (all-reduce, all-gather, reduce-scatter) as real messages on the fabric.

Theory of operation
-------------------
A collective is a closed loop over ``Transport.inject(..., on_deliver=cb)``:
every *chunk send* (one rank handing one piece of the buffer to another) is
split into messages of at most ``max_message_bytes`` and, bytes permitting, at
least ``min_messages`` of them (NCCL stripes a transfer over its channels), so
a chunk is pipelined through the store-and-forward ports and sprayed over the
NVSwitch planes. The cap trades fidelity for speed: a port holds a whole
message before forwarding it, where NVLink forwards flits. A chunk has
*landed* when its last message is delivered (and, for a reducing step, when
the receiver's reduction of it is done); what a rank does next depends only on
what has landed there, exactly as in NCCL, where the next step of a rank waits
for its input, not for a global barrier.

Algorithms (S bytes, N ranks; chunk c is the c-th of N near-equal slices):

``ring``      reduce-scatter: at step k rank r sends chunk (r-k-1) mod N to r+1,
              which reduces it; all-gather: at step j rank r forwards chunk
              (r-j) mod N. All-reduce is both: 2(N-1) chunk sends of S/N per rank.
``tree``      NCCL's double binary tree: two trees whose leaves are each other's
              inner nodes, each carrying half of the buffer in one-message
              segments; segments are reduced up and broadcast down, pipelined.
              All-reduce only.
``direct``    two-shot: rank r sends chunk c to rank c, which reduces it, then
              sends the reduced chunk to every rank. Suits a full-bisection
              NVSwitch, where all N(N-1) pairs have their own path.
``one_shot``  every rank sends its whole buffer to every other rank and reduces
              locally: N-1 times the traffic of ``direct`` in one step.
              All-reduce only.

The data are tracked symbolically: ``contributions[rank][chunk]`` is the set
of ranks (a bit mask) whose input a rank holds for that chunk. A send carries
the sender's mask at the time it is sent, and landing ORs it in, so a step
started before its input arrived would show up as a missing contribution. A
reduction costs ``3 * bytes / reduce_bytes_per_ns`` (read two operands, write
one) on the receiving GPU, piece by piece as messages arrive, one reduction at
a time per GPU; it is optional and off by default.

The scenario schema (``CollectiveWorkload``) is in
:mod:`sitssim.config.collective_config`, so loading a scenario imports none of this.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from typing import TYPE_CHECKING

import networkx as nx

from sitssim.config.collective_config import (
    ALGORITHMS,
    ALL_REDUCE_ONLY,
    DEFAULT_MAX_MESSAGE_BYTES,
    OPERATIONS,
)
from sitssim.fabric.messages import KIND_COLLECTIVE

if TYPE_CHECKING:
    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport

# A reduction reads both operands and writes the result.
REDUCTION_BYTES_PER_BYTE = 3


def bus_factor(operation: str, n_ranks: int) -> float:
    """nccl-tests' busbw / algbw: the fraction of the buffer each rank moves on its busiest link."""
    if n_ranks < 2:
        return 0.0
    if operation == "all_reduce":
        return 2.0 * (n_ranks - 1) / n_ranks
    return (n_ranks - 1) / n_ranks


def messages_per_send(nbytes: int, max_message_bytes: int, min_messages: int = 1) -> int:
    """Messages one send of ``nbytes`` is split into: none above the cap, at least
    ``min_messages`` if bytes allow, and one even for an empty send."""
    return max(1, -(-nbytes // max_message_bytes), min(min_messages, nbytes))


def chunk_sizes(size: int, n: int) -> list[int]:
    """S bytes cut into n slices that differ by at most one byte (the first ones larger)."""
    base, extra = divmod(size, n)
    return [base + (1 if c < extra else 0) for c in range(n)]


def ring_step_offsets(operation: str, n: int) -> list[tuple[int, bool]]:
    """A ring's steps as (chunk offset, reduces): at step k rank r sends chunk (r + offset)
    mod n on to r + 1, reducing it there or not. A reduce-scatter's n - 1 steps send chunk
    r - k - 1, an all-gather's send chunk r - k, and an all-reduce is the one then the other."""
    reduce_scatter = [(-k - 1, True) for k in range(n - 1)]
    all_gather = [(-j, False) for j in range(n - 1)]
    if operation == "all_reduce":
        return reduce_scatter + all_gather
    if operation == "reduce_scatter":
        return reduce_scatter
    return all_gather


def binary_tree(n: int) -> list[int]:
    """Parent of each position 0..n-1 in NCCL's in-order binary tree (root 0, parent -1).

    The lowest set bit of a position is its height: odd positions are leaves,
    position p with lowest bit b has children p - b/2 and p + b/2.
    """
    parent = [-1] * n
    for p in range(1, n):
        bit = p & -p
        up = (p ^ bit) | (bit << 1)
        parent[p] = up if up < n else p ^ bit
    return parent


def double_binary_tree(n: int) -> tuple[list[int], list[int]]:
    """Parents (by rank) of NCCL's two complementary trees.

    The second tree is the first one mirrored (even n) or shifted by one rank
    (odd n), so a rank that is a leaf in one tree is an inner node in the
    other and the per-rank load is balanced.
    """
    first = binary_tree(n)
    rank_at = [n - 1 - p if n % 2 == 0 else (p + 1) % n for p in range(n)]
    second = [-1] * n
    for p, up in enumerate(first):
        second[rank_at[p]] = rank_at[up] if up >= 0 else -1
    return first, second


def _children(parent: list[int]) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in parent]
    for r, up in enumerate(parent):
        if up >= 0:
            kids[up].append(r)
    return kids


@dataclass
class CollectiveHandle:
    """One collective in flight or done; ``end_ns`` is NaN until every rank has its result."""

    operation: str
    algorithm: str
    size: int
    gpus: tuple[str, ...]
    start_ns: float
    max_message_bytes: int
    end_ns: float = math.nan
    messages: list[int] = field(default_factory=list)
    chunk_sends: int = 0
    contributions: list[list[int]] = field(default_factory=list)
    rank_done_ns: list[float] = field(default_factory=list)
    protocol: str | None = None
    channels: int = 1
    owner: list[int] | None = None
    """The rank whose slice each tracked chunk is (None: chunk c is rank c's)."""

    def owner_of(self, chunk: int) -> int:
        return chunk if self.owner is None else self.owner[chunk]

    @property
    def n_ranks(self) -> int:
        return len(self.gpus)

    @property
    def done(self) -> bool:
        return not math.isnan(self.end_ns)

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns

    def result_complete(self) -> bool:
        """Whether every rank holds what the operation promises it (from the tracked data)."""
        n = self.n_ranks
        full = (1 << n) - 1
        c = self.contributions
        if self.operation == "all_reduce":
            return all(mask == full for row in c for mask in row)
        chunks = range(len(c[0]) if c else 0)
        if self.operation == "reduce_scatter":
            return all(c[r][k] == full for r in range(n) for k in chunks if self.owner_of(k) == r)
        return all(c[r][k] == 1 << self.owner_of(k) for r in range(n) for k in chunks)


class _Transfer:
    """One chunk send in flight: its messages still to arrive and what to do when it lands."""

    __slots__ = ("chunk", "dst", "left", "mask", "ready", "reduce", "then")

    def __init__(
        self, dst: int, chunk: int, mask: int, reduce: bool, then: Callable[[], None]
    ) -> None:
        self.dst = dst
        self.chunk = chunk
        self.mask = mask
        self.reduce = reduce
        self.then = then
        self.left = 0
        self.ready = 0.0


class CollectiveRun:
    """The driver of one collective: issues chunk sends as their inputs land."""

    def __init__(
        self,
        transport: Transport,
        gpus: list[str],
        size_bytes: int,
        operation: str,
        algorithm: str,
        tenant: int,
        workload: int,
        on_done: Callable[[float], None] | None,
        max_message_bytes: int,
        reduce_bytes_per_ns: float | None,
        min_messages: int,
    ) -> None:
        _check_arguments(
            transport, gpus, size_bytes, operation, algorithm, max_message_bytes, min_messages
        )
        if reduce_bytes_per_ns is not None and not reduce_bytes_per_ns > 0:
            raise ValueError(f"reduce_bytes_per_ns must be positive, got {reduce_bytes_per_ns}")
        self._kind = KIND_COLLECTIVE
        self.transport = transport
        self.env = transport.env
        self.n = len(gpus)
        self.ids = [transport.node_id[g] for g in gpus]
        self.tenant = tenant
        self.workload = workload
        self.on_done = on_done
        # Called with each rank as it finishes: a stream's next kernel waits for it.
        self.on_rank_done: Callable[[int], None] | None = None
        self.max_message = max_message_bytes
        self.min_messages = min_messages
        self.reduce_bw = reduce_bytes_per_ns
        self.handle = CollectiveHandle(
            operation=operation,
            algorithm=algorithm,
            size=size_bytes,
            gpus=tuple(gpus),
            start_ns=self.env.now,
            max_message_bytes=max_message_bytes,
            rank_done_ns=[math.nan] * self.n,
        )
        self._reducer_free = [0.0] * self.n
        self._got = [0] * self.n
        self._need = 0
        self._pending = self.n

    # --- plumbing --------------------------------------------------------------

    def _pieces(self, nbytes: int) -> int:
        """Messages for ``nbytes``: none above the cap, at least ``min_messages`` if bytes allow."""
        return messages_per_send(nbytes, self.max_message, self.min_messages)

    def _send(
        self,
        src: int,
        dst: int,
        chunk: int,
        nbytes: int,
        reduce: bool,
        then: Callable[[], None],
        whole: bool = False,
    ) -> None:
        """Send ``chunk`` from ``src`` to ``dst``; ``whole`` sends it as one message."""
        h = self.handle
        transfer = _Transfer(dst, chunk, h.contributions[src][chunk], reduce, then)
        pieces = chunk_sizes(nbytes, 1 if whole else self._pieces(nbytes))
        transfer.left = len(pieces)
        h.chunk_sends += 1
        arrived = partial(self._piece_arrived, transfer)
        for piece in pieces:
            self._message(self.ids[src], self.ids[dst], piece, arrived)

    def _message(
        self, src: int, dst: int, nbytes: int, then: Callable[[int], None], replica: bool = False
    ) -> None:
        """Inject one message of this collective between node ids (``replica``: a copy the
        switch ``src`` makes), calling ``then(msg)`` on its delivery."""
        msg = self.transport.inject(
            src,
            dst,
            nbytes,
            self.tenant,
            self._kind,
            self.workload,
            on_deliver=then,
            replica=replica,
        )
        self.handle.messages.append(msg)

    def _at(self, t: float, action: Callable[..., None], *args: object) -> None:
        """Do ``action(*args)`` at ``t``: now if ``t`` is not in the future."""
        delay = t - self.env.now
        if delay > 0:
            self.env.timeout(delay).callbacks.append(lambda _ev: action(*args))
        else:
            action(*args)

    def release(self, rank: int) -> None:
        """Start ``rank``'s kernel now, for a run started with ``hold``; a bare collective
        has no kernel and starts every rank at once."""
        raise TypeError(f"a {type(self).__name__} starts all its ranks at once")

    def release_at(self, rank: int, t: float) -> None:
        """``release(rank)`` at ``t``: now if ``t`` is not in the future."""
        self._at(t, self.release, rank)

    def _reduction_done(self, rank: int, nbytes: int) -> float:
        """When ``rank`` has reduced ``nbytes`` that arrived now, one reduction at a time
        (now, if no reduction bandwidth is given)."""
        now = self.env.now
        if self.reduce_bw is None:
            return now
        start = max(now, self._reducer_free[rank])
        ready = start + REDUCTION_BYTES_PER_BYTE * nbytes / self.reduce_bw
        self._reducer_free[rank] = ready
        return ready

    def _piece_arrived(self, transfer: _Transfer, msg: int) -> None:
        if transfer.reduce:
            ready = self._reduction_done(transfer.dst, self.transport.size[msg])
            transfer.ready = max(transfer.ready, ready)
        transfer.left -= 1
        if transfer.left == 0:
            self._at(transfer.ready, self._land, transfer)

    def _land(self, transfer: _Transfer) -> None:
        self.handle.contributions[transfer.dst][transfer.chunk] |= transfer.mask
        transfer.then()

    def _count(self, rank: int) -> None:
        """One more piece of ``rank``'s result is final; the rank is done at ``_need``."""
        self._got[rank] += 1
        if self._got[rank] == self._need:
            self._rank_done(rank)

    def _rank_done(self, rank: int) -> None:
        now = self.env.now
        h = self.handle
        h.rank_done_ns[rank] = now
        if self.on_rank_done is not None:
            self.on_rank_done(rank)
        self._pending -= 1
        if self._pending == 0:
            h.end_ns = now
            if self.on_done is not None:
                self.on_done(now)

    def _init_data(self, chunks: int, own_chunk_only: bool) -> None:
        """Each rank starts with its own input: every chunk, or only the chunks it owns."""
        if own_chunk_only:
            owner = self.handle.owner_of
            self.handle.contributions = [
                [(1 << r) if owner(c) == r else 0 for c in range(chunks)] for r in range(self.n)
            ]
        else:
            self.handle.contributions = [[1 << r] * chunks for r in range(self.n)]

    # --- start -----------------------------------------------------------------

    def start(self) -> CollectiveHandle:
        if self.n == 1:
            self._init_data(1, own_chunk_only=False)
            self.env.timeout(0).callbacks.append(lambda _ev: self._rank_done(0))
        else:
            _ALGORITHM_STARTS[self.handle.algorithm](self, self.handle.operation)
        return self.handle

    # --- ring ------------------------------------------------------------------

    def _start_ring(self, op: str) -> None:
        n = self.n
        self._sizes = chunk_sizes(self.handle.size, n)
        self._steps = ring_step_offsets(op, n)
        self._need = len(self._steps)
        self._init_data(n, own_chunk_only=op == "all_gather")
        for r in range(n):
            self._ring_step(r, 0)

    def _ring_step(self, rank: int, step: int) -> None:
        offset, reduce = self._steps[step]
        chunk = (rank + offset) % self.n
        dst = (rank + 1) % self.n
        self._send(
            rank, dst, chunk, self._sizes[chunk], reduce, partial(self._ring_landed, dst, step)
        )

    def _ring_landed(self, rank: int, step: int) -> None:
        if step + 1 < len(self._steps):
            self._ring_step(rank, step + 1)
        self._count(rank)

    # --- double binary tree ----------------------------------------------------

    def _start_tree(self, op: str) -> None:
        # All-reduce only (ALL_REDUCE_ONLY): ``op`` is always that.
        n = self.n
        size = self.handle.size
        halves = ((size + 1) // 2, size // 2)
        self._parents = double_binary_tree(n)
        self._kids = [_children(p) for p in self._parents]
        self._segments: list[list[int]] = []
        self._first_chunk = []
        chunks = 0
        for half in halves:
            count = self._pieces(half)
            self._segments.append(chunk_sizes(half, count))
            self._first_chunk.append(chunks)
            chunks += count
        self._need = chunks
        self._init_data(chunks, own_chunk_only=False)
        self._waiting = [
            [[len(self._kids[t][r])] * len(self._segments[t]) for r in range(n)] for t in (0, 1)
        ]
        for t in (0, 1):
            for r in range(n):
                if not self._kids[t][r]:
                    for s in range(len(self._segments[t])):
                        self._tree_up(t, r, s)

    def _tree_up(self, tree: int, rank: int, seg: int) -> None:
        """``rank`` holds the reduction of its subtree for ``seg``: pass it up, or turn it round."""
        parent = self._parents[tree][rank]
        if parent < 0:
            self._count(rank)
            self._tree_down(tree, rank, seg)
            return
        self._send(
            rank,
            parent,
            self._first_chunk[tree] + seg,
            self._segments[tree][seg],
            True,
            partial(self._tree_child_landed, tree, parent, seg),
            whole=True,
        )

    def _tree_child_landed(self, tree: int, rank: int, seg: int) -> None:
        waiting = self._waiting[tree][rank]
        waiting[seg] -= 1
        if waiting[seg] == 0:
            self._tree_up(tree, rank, seg)

    def _tree_down(self, tree: int, rank: int, seg: int) -> None:
        for kid in self._kids[tree][rank]:
            self._send(
                rank,
                kid,
                self._first_chunk[tree] + seg,
                self._segments[tree][seg],
                False,
                partial(self._tree_broadcast_landed, tree, kid, seg),
                whole=True,
            )

    def _tree_broadcast_landed(self, tree: int, rank: int, seg: int) -> None:
        self._count(rank)
        self._tree_down(tree, rank, seg)

    # --- direct (two-shot) and one-shot ----------------------------------------

    def _start_direct(self, op: str) -> None:
        n = self.n
        self._sizes = chunk_sizes(self.handle.size, n)
        self._need = {"all_reduce": n, "reduce_scatter": 1, "all_gather": n - 1}[op]
        self._reduced = [0] * n
        self._init_data(n, own_chunk_only=op == "all_gather")
        if op == "all_gather":
            for r in range(n):
                self._direct_scatter(r)
            return
        for r in range(n):
            for c in range(n):
                if c != r:
                    self._send(r, c, c, self._sizes[c], True, partial(self._direct_reduced, c, op))

    def _direct_reduced(self, rank: int, op: str) -> None:
        self._reduced[rank] += 1
        if self._reduced[rank] < self.n - 1:
            return
        self._count(rank)
        if op == "all_reduce":
            self._direct_scatter(rank)

    def _direct_scatter(self, rank: int) -> None:
        """Send chunk ``rank`` (final at ``rank``) to every other rank."""
        for other in range(self.n):
            if other != rank:
                self._send(
                    rank,
                    other,
                    rank,
                    self._sizes[rank],
                    False,
                    partial(self._count, other),
                )

    def _start_one_shot(self, op: str) -> None:
        # All-reduce only (ALL_REDUCE_ONLY): ``op`` is always that.
        n = self.n
        self._need = n - 1
        self._init_data(1, own_chunk_only=False)
        for r in range(n):
            for other in range(n):
                if other != r:
                    self._send(r, other, 0, self.handle.size, True, partial(self._count, other))


def _check_arguments(
    transport: Transport,
    gpus: list[str],
    size_bytes: int,
    operation: str,
    algorithm: str,
    max_message_bytes: int,
    min_messages: int,
) -> None:
    if operation not in OPERATIONS:
        raise ValueError(f"unknown operation {operation!r}; expected one of {OPERATIONS}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    if algorithm in ALL_REDUCE_ONLY and operation != "all_reduce":
        raise ValueError(f"algorithm {algorithm!r} implements all_reduce only, not {operation}")
    if not gpus:
        raise ValueError("a collective needs at least one GPU")
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"a GPU takes part in a collective once: {list(gpus)}")
    fabric = transport.fabric
    for g in gpus:
        if g not in fabric.graph or fabric.node_kind(g) != "gpu":
            raise ValueError(f"{g!r} is not a GPU of this fabric")
    if size_bytes < 1:
        raise ValueError(f"size_bytes must be at least 1, got {size_bytes}")
    if max_message_bytes < 1:
        raise ValueError(f"max_message_bytes must be at least 1, got {max_message_bytes}")
    if min_messages < 1:
        raise ValueError(f"min_messages must be at least 1, got {min_messages}")


REDUCES = {"all_reduce": True, "all_gather": False, "reduce_scatter": True}
"""Whether an operation reduces what it receives, so whether a reduction bandwidth applies."""


# Each algorithm's start, given the operation: one entry per name of ALGORITHMS.
_ALGORITHM_STARTS: dict[str, Callable[[CollectiveRun, str], None]] = {
    "ring": CollectiveRun._start_ring,
    "tree": CollectiveRun._start_tree,
    "direct": CollectiveRun._start_direct,
    "one_shot": CollectiveRun._start_one_shot,
}
if set(_ALGORITHM_STARTS) != set(ALGORITHMS):
    raise TypeError(f"algorithms and starts differ: {set(ALGORITHMS) ^ set(_ALGORITHM_STARTS)}")


def start_collective(
    operation: str,
    transport: Transport,
    gpus: list[str],
    size_bytes: int,
    algorithm: str = "ring",
    tenant: int = 0,
    workload: int = 0,
    on_done: Callable[[float], None] | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    *,
    reduce_bytes_per_ns: float | None = None,
    min_messages: int = 1,
) -> CollectiveHandle:
    """Start ``operation`` (one of ``OPERATIONS``) over ``gpus`` now; ``on_done(end_ns)``
    once every rank holds its result.

    ``size_bytes`` is the buffer an all-reduce reduces, the output an all-gather assembles
    (each rank contributes its slice) and the input a reduce-scatter splits (rank i ends
    with the reduced slice i). ``reduce_bytes_per_ns`` times the reductions of an operation
    that reduces (``REDUCES``; None: reductions take no time).
    """
    if reduce_bytes_per_ns is not None and not REDUCES.get(operation, True):
        raise ValueError(f"an {operation} reduces nothing: it takes no reduce_bytes_per_ns")
    return CollectiveRun(
        transport,
        list(gpus),
        size_bytes,
        operation,
        algorithm,
        tenant,
        workload,
        on_done,
        max_message_bytes,
        reduce_bytes_per_ns,
        min_messages,
    ).start()


# --- analytic oracle -----------------------------------------------------------


def _fixed_latency_ns(fabric: Fabric, src: str, dst: str) -> float:
    """Flight time plus forwarding latency of the fastest shortest path (no serialisation)."""
    best = math.inf
    for path in nx.all_shortest_paths(fabric.graph, src, dst):
        total = 0.0
        for a, b in pairwise(path):
            ch = fabric.channels[fabric.channel_index[(a, b)]]
            total += ch.propagation_ns + fabric.node_latency_ns[ch.dst]
        best = min(best, total)
    return best


def ring_all_reduce_lower_bound_ns(fabric: Fabric, gpus: list[str], size: int) -> float:
    """A time no ring all-reduce of ``size`` bytes over ``gpus`` (in ring order) can beat.

    Each of the 2(N-1) dependent steps moves at least floor(S/N) bytes out of
    one GPU and into the next, so it lasts at least that many bytes over the
    smaller of the sender's injection and the receiver's ejection bandwidth,
    plus the fixed latency of the path: 2(N-1) * (floor(S/N) / B + L), with B
    the best such bandwidth and L the shortest such latency over the ring.
    """
    n = len(gpus)
    if n < 2:
        return 0.0
    out_bw = dict.fromkeys(gpus, 0.0)
    in_bw = dict.fromkeys(gpus, 0.0)
    for ch in fabric.channels:
        if ch.src in out_bw:
            out_bw[ch.src] += ch.bytes_per_ns
        if ch.dst in in_bw:
            in_bw[ch.dst] += ch.bytes_per_ns
    pairs = [(gpus[r], gpus[(r + 1) % n]) for r in range(n)]
    bandwidth = max(min(out_bw[a], in_bw[b]) for a, b in pairs)
    latency = min(_fixed_latency_ns(fabric, a, b) for a, b in pairs)
    return 2 * (n - 1) * ((size // n) / bandwidth + latency)
