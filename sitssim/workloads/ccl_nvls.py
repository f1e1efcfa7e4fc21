"""An NVLS (NVLink SHARP) all-reduce as NCCL runs it: reduced in the switches, multicast back.

Theory of operation
-------------------
The buffer is cut as ``ccl.nvls.nvls_plan`` says: loops of ``channels x heads`` chunks, one
head per GPU, the head of a chunk being the GPU that has the switch reduce it. A chunk is
seen in pieces of at most one message each, every message carrying its data in the write
packets of the GPUs' stores (``CclCall.writes``). The planes split the pieces between them
as a GPU's links do (``ccl.nvls.plane_shares``, dealt in a smooth weighted round robin), as
the switches split the multicast address space. For one piece on plane ``s`` with head
``h`` (NCCL's scatter, reduce and gather warps; ``docs/ccl_sources.md`` §5.1):

1. every GPU sends its contribution of the piece to switch ``s``;
2. the switch combines them (``switch.in_switch_reduction.InSwitchReduction``, at the
   switch's reduction bandwidth) and, when the last has arrived, sends the sum to the head,
   as it answers the head's ``multimem.ld_reduce``;
3. the head, a handshake after the sum has landed, stores it back through the multicast
   address: one message to switch ``s``;
4. the switch multicasts it: one message to every GPU of the group, the head too.

A GPU is done once every piece's sum has landed there and its handshake is done. Each
GPU's blocks copy at the protocol's rate (Simple: unbounded) and the kernel's fixed cost
comes first, as in ``ccl_ring``. The data are tracked symbolically: a piece's sum carries
the union of the masks the switch combined, so a multicast sent before every contribution
arrived shows as a missing one.
"""

from __future__ import annotations

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
"""How many chunks a GPU's block runs its scatter ahead of the first chunk whose sum has not
all come back: one per slot of the channel's buffer (our reading of NCCL's flow control on
its NVLS buffers, not a figure NCCL states), so a GPU's contributions queue ahead of its
stores by a bounded amount."""


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
        self._pieces = nvls_pieces(plan, self.max_message, self.call.writes)
        self._planes = weighted_round_robin(self.shares, len(self._pieces))
        self._init_data(len(self._pieces), own_chunk_only=False)
        n, channels = self.n, plan.channels
        self._left = [len(self._pieces)] * n
        self._of_block: list[list[int]] = [[] for _ in range(channels)]
        self._heads = plan.heads
        per_chunk = [[0] * (plan.loops * plan.heads) for _ in range(channels)]
        for p, (loop, ch, head, _) in enumerate(self._pieces):
            self._of_block[ch].append(p)
            per_chunk[ch][loop * plan.heads + head] += 1
        self._chunk_left = [[list(row) for row in per_chunk] for _ in range(n)]
        self._done_chunks = [[self._prefix(row, 0) for row in per_chunk] for _ in range(n)]
        self._cursor = [[0] * channels for _ in range(n)]
        self._free = [[0.0] * channels for _ in range(n)]
        # Until its kernel starts a rank scatters nothing, whatever lands for it.
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

    @staticmethod
    def _prefix(left: list[int], done: int) -> int:
        """Chunks done in order from ``done`` on: every piece of each landed (or none in it)."""
        while done < len(left) and left[done] == 0:
            done += 1
        return done

    def _scatter(self, rank: int, ch: int) -> None:
        """Send ``rank``'s contributions on channel ``ch`` in order, each once its block has
        copied it and while it is within ``WINDOW_CHUNKS`` of the first chunk not yet back."""
        order = self._of_block[ch]
        cursor = self._cursor[rank]
        copy_ns = self.call.costs.copy_ns
        now = self.env.now
        while cursor[ch] < len(order):
            p = order[cursor[ch]]
            loop, _, head, nbytes = self._pieces[p]
            if loop * self._heads + head >= self._done_chunks[rank][ch] + WINDOW_CHUNKS:
                return
            t = max(now, self._free[rank][ch]) + copy_ns(nbytes)
            self._free[rank][ch] = t
            cursor[ch] += 1
            if t > now:
                self._timed[rank][ch] = True
                self._at(t, self._scatter_timed, rank, ch, p)
                return
            self._contribute(rank, p)

    def _scatter_timed(self, rank: int, ch: int, piece: int) -> None:
        self._timed[rank][ch] = False
        if piece >= 0:
            self._contribute(rank, piece)
        self._scatter(rank, ch)

    def _wire(self, nbytes: int) -> int:
        """A message's bytes for ``nbytes`` of data: in the call's write packets (the
        switch's reduction and multicast carry the same packets as the GPUs' stores)."""
        return self.call.writes.wire_bytes(nbytes)

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
        step = self.call.costs.step_ns

        def landed(_msg: int) -> None:
            self.handle.contributions[head][piece] |= mask
            self._at(self.env.now + step, self._store, piece)

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
        chunk = loop * self._heads + head

        def landed(_msg: int) -> None:
            self.handle.contributions[rank][piece] |= mask
            left = self._chunk_left[rank][ch]
            left[chunk] -= 1
            if left[chunk] == 0:
                done = self._done_chunks[rank]
                done[ch] = self._prefix(left, done[ch])
                if not self._timed[rank][ch]:
                    self._scatter(rank, ch)
            self._left[rank] -= 1
            if self._left[rank] == 0:
                self._at(self.env.now + self.call.costs.step_ns, self._rank_done, rank)

        return landed
