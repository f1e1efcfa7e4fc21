"""An NVLS (NVLink SHARP) all-reduce as NCCL runs it: reduced in the switches, multicast back.

Theory of operation
-------------------
The buffer is cut as ``ccl.nvls.nvls_plan`` says: loops of ``channels x heads`` chunks, one
head per GPU, the head of a chunk being the GPU that has the switch reduce it. A (channel,
head) pair is a *lane*; its chunks come one per loop. A chunk moves in pieces of at most one
message each, every message carrying its data in the write packets of the GPUs' stores
(``CclCall.writes``), and the planes split the pieces between them as a GPU's links do
(``ccl.nvls.plane_shares``, dealt in a smooth weighted round robin), as the switches split
the multicast address space. NCCL's kernel signals chunk by chunk, as Simple does step by
step (NCCL's NVLS work: scatter, reduce and gather warps over connections of one chunk a
step; ``docs/ccl_sources.md`` §5.1, §5.4):

1. every GPU's scatter copies its part of a chunk into its buffer and posts the chunk, at
   most ``WINDOW_CHUNKS`` ahead of the chunks it has gathered back;
2. once every GPU has posted it, the head's reduce warps see that a handshake later
   (``EndpointCosts.step_ns``) and, if the lane's previous chunk is done, pull the chunk:
   each GPU's contribution of each piece goes to the piece's switch (its
   ``multimem.ld_reduce``), the switch combines them (``switch.in_switch_reduction``, at the
   switch's reduction bandwidth) and returns the sum to the head;
3. the head stores each sum back through the multicast address as it arrives (one message to
   the switch), and the switch multicasts it to every GPU of the group, the head too;
4. when every store of the chunk has landed (the head's fence), the head posts the chunk:
   the lane may pull its next, and every GPU's gather sees the post a handshake later and
   counts the chunk done.

A GPU is done once it has gathered every chunk. The kernel's fixed cost comes first, as in
``ccl_ring``; the scatter and gather copy within a GPU at the block's rate (Simple's:
unbounded). The data are tracked symbolically: a piece's sum carries the union of the masks
the switch combined, so a multicast sent before every contribution arrived shows as a
missing one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from sitssim.ccl.nvls import NvlsPlan, nvls_plan, plane_shares
from sitssim.ccl.protocols import NCCL_STEPS
from sitssim.ccl.write_packets import WritePackets
from sitssim.switch.in_switch_reduction import InSwitchReduction
from sitssim.workloads.ccl_ring import CclCall
from sitssim.workloads.collectives import CollectiveHandle, CollectiveRun, chunk_sizes

if TYPE_CHECKING:
    from sitssim.fabric.transport import Transport


WINDOW_CHUNKS = NCCL_STEPS
"""How many chunks a GPU's block posts ahead of those it has gathered back: one per slot of
the channel's buffer (our reading of NCCL's flow control on its NVLS buffers, not a figure
NCCL states)."""


def weighted_round_robin(shares: list[float], count: int) -> list[int]:
    """``count`` picks among ``len(shares)`` planes, each taken in proportion to its share
    and spread out (smooth weighted round robin, deterministic)."""
    credit = [0.0] * len(shares)
    picks: list[int] = []
    for _ in range(count):
        for p, share in enumerate(shares):
            credit[p] += share
        best = max(range(len(shares)), key=lambda p: (credit[p], -p))
        credit[best] -= 1.0
        picks.append(best)
    return picks


def nvls_pieces(
    plan: NvlsPlan, max_message_bytes: int, writes: WritePackets
) -> list[tuple[int, int, int, int]]:
    """Every piece as (loop, channel, head, payload bytes), lane by lane, each as much as one
    message's write packets carry; empty lanes have none."""
    per_message = writes.data_within(max_message_bytes)
    out: list[tuple[int, int, int, int]] = []
    for loop in range(plan.loops):
        for ch in range(plan.channels):
            for head in range(plan.heads):
                nbytes = plan.lane_bytes(loop, ch, head)
                if nbytes:
                    count = -(-nbytes // per_message)
                    out += [(loop, ch, head, b) for b in chunk_sizes(nbytes, count)]
    return out


def nvls_messages(plan: NvlsPlan, max_message_bytes: int, writes: WritePackets) -> int:
    """Messages an NVLS call sends: per piece, one up from each GPU, the sum to its head,
    the head's store, and one down to each GPU.

    Counted, not listed (the resource estimate asks before every run): the lanes tile the
    buffer chunk by chunk, so all are full but the last, which holds the remainder."""
    per_message = writes.data_within(max_message_bytes)
    full, tail = divmod(plan.n_bytes, plan.chunk)
    pieces = full * -(-plan.chunk // per_message) + -(-tail // per_message)
    return pieces * (2 * plan.heads + 2)


class CclNvls(CollectiveRun):
    """An NVLS all-reduce over ``gpus`` through ``switches`` (module docstring)."""

    def __init__(
        self,
        transport: Transport,
        gpus: list[str],
        size_bytes: int,
        call: CclCall,
        switches: list[str],
        links_per_switch: list[int],
        switch_reduce_bytes_per_ns: float,
        tenant: int,
        workload: int,
        on_done: Callable[[float], None] | None,
        max_message_bytes: int,
    ) -> None:
        super().__init__(
            transport,
            gpus,
            size_bytes,
            "all_reduce",
            # The base checks its arguments as a bare call's; the handle says what ran.
            "ring",
            tenant,
            workload,
            on_done,
            max_message_bytes,
            None,
            1,
        )
        if len(switches) != len(links_per_switch) or not switches:
            raise ValueError(f"need a link count per switch: {switches}, {links_per_switch}")
        self.call = call
        self.handle.algorithm = call.algorithm
        self.handle.protocol = call.protocol
        self.handle.channels = call.channels
        self.switch_ids = [transport.node_id[s] for s in switches]
        self.shares = plane_shares(links_per_switch)
        self.reducers = [InSwitchReduction(self.n, switch_reduce_bytes_per_ns) for _ in switches]

    def start(self, hold: bool = False) -> CollectiveHandle:
        """Set the call up and start every rank's kernel now, or, with ``hold``, only as each
        rank is ``release``d."""
        h = self.handle
        plan = nvls_plan(h.size, self.n, self.call.channels)
        self._heads = plan.heads
        self._pieces = nvls_pieces(plan, self.max_message, self.call.writes)
        self._planes = weighted_round_robin(self.shares, len(self._pieces))
        self._init_data(len(self._pieces), own_chunk_only=False)
        n, channels = self.n, plan.channels
        # A chunk is (channel, loop x heads + head); its pieces in order.
        self._of_chunk: dict[tuple[int, int], list[int]] = {}
        for p, (loop, ch, head, _) in enumerate(self._pieces):
            self._of_chunk.setdefault((ch, loop * plan.heads + head), []).append(p)
        self._chunks = [sorted(k for c, k in self._of_chunk if c == ch) for ch in range(channels)]
        self._posts = {key: 0 for key in self._of_chunk}
        self._fence_left = {key: n * len(ps) for key, ps in self._of_chunk.items()}
        self._lane_next = [[0] * plan.heads for _ in range(channels)]
        self._lane_free = [[0.0] * plan.heads for _ in range(channels)]
        self._lane_ready: dict[tuple[int, int], float] = {}
        self._cursor = [[0] * channels for _ in range(n)]
        self._gathered = [[0] * channels for _ in range(n)]
        self._chunks_left = [len(self._of_chunk)] * n
        self._free = [[0.0] * channels for _ in range(n)]
        # Until its kernel starts a rank posts nothing, whatever it gathers.
        self._timed = [[True] * channels for _ in range(n)]
        if not hold:
            for rank in range(n):
                self.release(rank)
        return h

    def release(self, rank: int) -> None:
        """Start ``rank``'s kernel now: its blocks scatter after its fixed cost."""
        begin = self.env.now + self.call.costs.kernel_ns
        for ch in range(len(self._free[rank])):
            self._free[rank][ch] = begin
            self._at(begin, self._scatter_timed, rank, ch, -1)

    def _scatter(self, rank: int, ch: int) -> None:
        """Copy and post ``rank``'s chunks on channel ``ch`` in order, each while it is within
        ``WINDOW_CHUNKS`` of the first chunk not yet gathered back."""
        order = self._chunks[ch]
        cursor = self._cursor[rank]
        now = self.env.now
        while cursor[ch] < len(order):
            if cursor[ch] >= self._gathered[rank][ch] + WINDOW_CHUNKS:
                return
            k = order[cursor[ch]]
            nbytes = sum(self._pieces[p][3] for p in self._of_chunk[(ch, k)])
            t = max(now, self._free[rank][ch]) + self.call.costs.copy_ns(nbytes)
            self._free[rank][ch] = t
            cursor[ch] += 1
            if t > now:
                self._timed[rank][ch] = True
                self._at(t, self._scatter_timed, rank, ch, k)
                return
            self._post(ch, k)

    def _scatter_timed(self, rank: int, ch: int, chunk: int) -> None:
        self._timed[rank][ch] = False
        if chunk >= 0:
            self._post(ch, chunk)
        self._scatter(rank, ch)

    def _post(self, ch: int, k: int) -> None:
        """One GPU has posted chunk ``k`` of channel ``ch``; once all have, its head's reduce
        warps see it a handshake later."""
        key = (ch, k)
        self._posts[key] += 1
        if self._posts[key] == self.n:
            self._lane_ready[key] = self.env.now + self.call.costs.step_ns
            self._gate(ch, k % self._heads)

    def _gate(self, ch: int, head: int) -> None:
        """Start the lane's next chunk if all GPUs posted it and the one before is fenced."""
        free = self._lane_free[ch][head]
        k = self._lane_next[ch][head] * self._heads + head
        if free == math.inf or (ch, k) not in self._lane_ready:
            return
        ready = self._lane_ready.pop((ch, k))
        self._lane_next[ch][head] += 1
        self._lane_free[ch][head] = math.inf
        self._at(max(ready, free), self._pull, ch, k)

    def _wire(self, nbytes: int) -> int:
        """A message's bytes for ``nbytes`` of data: in the call's write packets (the
        switch's reduction and multicast carry the same packets as the GPUs' stores)."""
        return self.call.writes.wire_bytes(nbytes)

    def _pull(self, ch: int, k: int) -> None:
        """The head's ``multimem.ld_reduce`` of a chunk: every GPU's contribution of each
        piece goes to the piece's switch."""
        for piece in self._of_chunk[(ch, k)]:
            for rank in range(self.n):
                self._contribute(rank, piece)

    def _contribute(self, rank: int, piece: int) -> None:
        mask = self.handle.contributions[rank][piece]
        nbytes = self._pieces[piece][3]
        plane = self._planes[piece]
        self.handle.chunk_sends += 1

        def arrived(_msg: int) -> None:
            summed = self.reducers[plane].contribute(piece, mask, nbytes, self.env.now)
            if summed is not None:
                ready, total = summed
                self._at(ready, self._to_head, piece, total)

        self._message(self.ids[rank], self.switch_ids[plane], self._wire(nbytes), arrived)

    def _to_head(self, piece: int, mask: int) -> None:
        _, _, head, nbytes = self._pieces[piece]
        switch = self.switch_ids[self._planes[piece]]

        def landed(_msg: int) -> None:
            self.handle.contributions[head][piece] |= mask
            self._store(piece)

        self._message(switch, self.ids[head], self._wire(nbytes), landed, replica=True)

    def _store(self, piece: int) -> None:
        _, _, head, nbytes = self._pieces[piece]
        mask = self.handle.contributions[head][piece]
        switch = self.switch_ids[self._planes[piece]]
        wire = self._wire(nbytes)
        self._message(self.ids[head], switch, wire, lambda _msg: self._multicast(piece, mask))

    def _multicast(self, piece: int, mask: int) -> None:
        wire = self._wire(self._pieces[piece][3])
        switch = self.switch_ids[self._planes[piece]]
        for rank in range(self.n):
            landed = self._landing(rank, piece, mask)
            self._message(switch, self.ids[rank], wire, landed, replica=True)

    def _landing(self, rank: int, piece: int, mask: int) -> Callable[[int], None]:
        loop, ch, head, _ = self._pieces[piece]
        key = (ch, loop * self._heads + head)

        def landed(_msg: int) -> None:
            self.handle.contributions[rank][piece] |= mask
            self._fence_left[key] -= 1
            if self._fence_left[key] == 0:
                self._fenced(*key)

        return landed

    def _fenced(self, ch: int, k: int) -> None:
        """Every store of the chunk has landed: the head posts it, and every GPU's gather
        sees the post a handshake later; the lane takes its next chunk."""
        head = k % self._heads
        self._lane_free[ch][head] = self.env.now
        self._gate(ch, head)
        seen = self.env.now + self.call.costs.step_ns
        for rank in range(self.n):
            self._at(seen, self._gather, rank, ch)

    def _gather(self, rank: int, ch: int) -> None:
        self._gathered[rank][ch] += 1
        if not self._timed[rank][ch]:
            self._scatter(rank, ch)
        self._chunks_left[rank] -= 1
        if self._chunks_left[rank] == 0:
            self._rank_done(rank)
