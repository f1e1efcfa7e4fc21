"""A ring collective as NCCL runs it: channels, loops, protocol lines and endpoint costs.

Theory of operation
-------------------
Every rank runs one block per channel (``ccl.channels.launch_for``), each block its own ring
over the same rank order, each carrying its share of the buffer. The buffer is cut into
loops (``ccl.plan.ring_plan``): per loop, a channel moves one chunk per rank, so a loop is
``channels x ranks`` lanes of one chunk each, at the offsets NCCL gives them (an all-reduce
cuts the whole buffer, channel by channel; an all-gather or reduce-scatter cuts each rank's
slice alike), the last lanes short or empty. Within a loop a block takes the ring's steps
in order: a send of its own chunk, then, for each step, the chunk its upstream neighbour
sent at the step before, reduced or copied and sent on; then a last receive. A chunk is
seen by the receiver in pieces, each signalled on its own: Simple's slices (two per chunk),
or for LL and LL128, whose every line carries its flag, the passes of the block's loop
(``Protocol.pass_data_bytes``: the receiver's threads poll their own lines, so a block acts
on a pass as it lands, not on the whole chunk), whole passes first and the last what is
left, as NCCL's loop takes them, each at most one message.

A block is sequential: it acts on a piece once the piece has landed and its handshake is
done (``EndpointCosts.step_ns``), and once it has finished the piece before, each piece
taking the block ``EndpointCosts.copy_ns`` of its payload; its send leaves as the block
finishes it. The last receive copies only where the protocol unpacks its lines into the
output (``Protocol.unpacks``: LL and LL128; under Simple the peer stored into it). A
block's next loop starts when its last receive of the loop is done, and its first after
the kernel's fixed cost (``EndpointCosts.kernel_ns``). On the wire a piece is its
protocol's lines (``Protocol.wire_bytes``: LL sends 16 bytes per 8 of data) in the write
packets of the call's stores (``CclCall.writes``: a header per 128 bytes from an SM), as
messages of at most ``max_message_bytes``; an empty piece sends nothing and lands at once,
as a step with no elements does. A rank is done when its last block is.

The data are tracked symbolically per piece, as in ``sitssim.workloads.collectives``.
Reductions cost ``3 x payload / reduce_bytes_per_ns`` on the receiving GPU when a piece lands,
one at a time per GPU, if a reduction bandwidth is given. NCCL's flow control (eight buffer
slots per connection) is not modelled: a block forwards what it receives as it receives it,
so a slot is freed as soon as it is filled, except behind a slow link.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sitssim.ccl.endpoint import EndpointCosts
from sitssim.ccl.plan import RingPlan, ring_plan
from sitssim.ccl.protocols import PROTOCOLS, Protocol
from sitssim.ccl.write_packets import SM_WRITES, WritePackets
from sitssim.workloads.collectives import (
    CollectiveHandle,
    CollectiveRun,
    chunk_sizes,
    ring_step_offsets,
)

if TYPE_CHECKING:
    from sitssim.fabric.transport import Transport


Lane = tuple[int, int, int]
"""(loop, channel, chunk): one chunk of one channel's ring in one loop."""


def _lane_splits(
    plan: RingPlan, size: int, max_message_bytes: int, writes: WritePackets
) -> Iterator[tuple[Lane, list[tuple[int, int]]]]:
    """Each lane with its pieces as runs of (payload bytes, how many), in loop, channel, chunk
    order (module docstring); an empty lane has one empty piece."""
    n, op = plan.n_ranks, plan.operation
    protocol = PROTOCOLS[plan.protocol]
    slices = protocol.slices_per_chunk("ring", op)
    # A line protocol's piece is one pass of the block's loop, or as much payload as one
    # message's write packets carry if that is less.
    lines = writes.data_within(max_message_bytes) // protocol.line_bytes
    per_piece = max(1, lines * protocol.data_bytes_per_line)
    if protocol.pass_data_bytes is not None:
        per_piece = min(per_piece, protocol.pass_data_bytes)
    per_rank = chunk_sizes(size, n)
    grid = 0
    for loop, chunk in enumerate(plan.chunks):
        for ch in range(plan.channels):
            for c in range(n):
                if op == "all_reduce":
                    nbytes = min(chunk, size - grid - (ch * n + c) * chunk)
                else:
                    nbytes = min(chunk, per_rank[c] - grid // n - ch * chunk)
                if nbytes <= 0:
                    yield (loop, ch, c), [(0, 1)]
                elif slices > 1:
                    # Simple cuts a chunk into slices of equal size.
                    count = min(slices, nbytes)
                    base, extra = divmod(nbytes, count)
                    yield (loop, ch, c), [(base + 1, extra), (base, count - extra)]
                else:
                    # A line protocol's block loops over the chunk a whole pass at a time, its
                    # last pass taking what is left (prims_ll.h, prims_ll128.h).
                    full, rest = divmod(nbytes, per_piece)
                    yield (loop, ch, c), [(per_piece, full), (rest, 1 if rest else 0)]
        grid += chunk * plan.channels * n


def lane_pieces(
    plan: RingPlan, size: int, max_message_bytes: int, writes: WritePackets
) -> dict[Lane, list[int]]:
    """Each lane's pieces (payload bytes), in loop, channel, chunk order (module docstring)."""
    return {
        lane: [nbytes for nbytes, count in runs for _ in range(count)]
        for lane, runs in _lane_splits(plan, size, max_message_bytes, writes)
    }


def piece_wire_bytes(protocol: Protocol, writes: WritePackets, nbytes: int) -> int:
    """Transaction-layer bytes of a piece of ``nbytes`` payload: its protocol's lines, in
    write packets."""
    return writes.wire_bytes(protocol.wire_bytes(nbytes))


def ring_messages(plan: RingPlan, size: int, max_message_bytes: int, writes: WritePackets) -> int:
    """Messages a call of ``plan`` sends: every lane's chunk once per ring step."""
    protocol = PROTOCOLS[plan.protocol]

    def messages(piece: int) -> int:
        return -(-piece_wire_bytes(protocol, writes, piece) // max_message_bytes)

    # Counted, not listed: the resource estimate asks before every run.
    per_pass = 0
    for _, runs in _lane_splits(plan, size, max_message_bytes, writes):
        per_pass += sum(count * messages(nbytes) for nbytes, count in runs)
    return plan.steps_per_loop * per_pass


@dataclass(frozen=True)
class CclCall:
    """How one call runs: its algorithm and protocol, channels, endpoint costs, and the write
    packets its stores cross the links in (a kernel's: ``SM_WRITES``)."""

    algorithm: str
    protocol: str
    channels: int
    costs: EndpointCosts
    writes: WritePackets = SM_WRITES


@dataclass
class _Block:
    """One rank's block of one channel: where it is in its steps, and what has landed."""

    rank: int
    channel: int
    loop: int = 0
    step: int = 0
    piece: int = 0
    free_ns: float = 0.0
    released: bool = False
    done: bool = False
    landed: dict[tuple[int, int, int], float] = field(default_factory=dict)


class CclRing(CollectiveRun):
    """A ring ``operation`` cut by ``ring_plan`` and run block by block (module docstring)."""

    def __init__(
        self,
        transport: Transport,
        gpus: list[str],
        size_bytes: int,
        operation: str,
        call: CclCall,
        tenant: int,
        workload: int,
        on_done: Callable[[float], None] | None,
        max_message_bytes: int,
        reduce_bytes_per_ns: float | None,
    ) -> None:
        super().__init__(
            transport,
            gpus,
            size_bytes,
            operation,
            "ring",
            tenant,
            workload,
            on_done,
            max_message_bytes,
            reduce_bytes_per_ns,
            1,
        )
        self.call = call
        self.protocol = PROTOCOLS[call.protocol]
        self.handle.protocol = call.protocol
        self.handle.channels = call.channels

    # --- start -----------------------------------------------------------------

    def start(self, hold: bool = False) -> CollectiveHandle:
        """Set the call up and start every rank's kernel now, or, with ``hold``, only as each
        rank is ``release``d."""
        h = self.handle
        plan = ring_plan(h.operation, self.call.protocol, h.size, self.n, self.call.channels)
        self._plan = plan
        self._pieces_of = lane_pieces(plan, h.size, self.max_message, self.call.writes)
        self._first_id: dict[Lane, int] = {}
        owner: list[int] = []
        for key, pieces in self._pieces_of.items():
            self._first_id[key] = len(owner)
            owner += [key[2]] * len(pieces)
        h.owner = owner
        n = self.n
        self._steps = ring_step_offsets(h.operation, n)
        self._init_data(len(h.owner), own_chunk_only=h.operation == "all_gather")
        self._blocks = [[_Block(r, ch) for ch in range(plan.channels)] for r in range(n)]
        self._blocks_left = [plan.channels] * n
        self._woken: deque[_Block] = deque()
        self._pumping = False
        if not hold:
            for rank in range(n):
                self.release(rank)
        return h

    def release(self, rank: int) -> None:
        """Start ``rank``'s kernel now: its blocks take their first step after its fixed cost,
        and act on what has landed for them meanwhile."""
        begin = self.env.now + self.call.costs.kernel_ns
        for block in self._blocks[rank]:
            block.free_ns = begin
            block.released = True
            self._wake(block)

    # --- one block ---------------------------------------------------------------

    def _chunk_at(self, rank: int, step: int) -> int:
        """The chunk ``rank`` handles at ``step``: what its upstream neighbour sent it at the
        step before (for the last receive too), or its own at step 0."""
        steps = self._steps
        if step < len(steps):
            return (rank + steps[step][0]) % self.n
        return (rank - 1 + steps[-1][0]) % self.n

    def _wake(self, block: _Block) -> None:
        """Pump ``block``, and every block its sends wake, without nesting the calls: an empty
        piece lands at once, and a chain of them would otherwise recurse round the ring."""
        self._woken.append(block)
        if self._pumping:
            return
        self._pumping = True
        while self._woken:
            self._pump(self._woken.popleft())
        self._pumping = False

    def _pump(self, block: _Block) -> None:
        """Take every step the block can take now, in order; stop at a piece not yet landed."""
        if not block.released:
            return
        costs = self.call.costs
        last = len(self._steps)
        loops = self._plan.loops
        while block.loop < loops:
            step, piece = block.step, block.piece
            key = (block.loop, block.channel, self._chunk_at(block.rank, step))
            pieces = self._pieces_of[key]
            ready = block.free_ns
            if step > 0:
                landed = block.landed.pop((block.loop, step, piece), None)
                if landed is None:
                    return
                ready = max(ready, landed + costs.step_ns)
            copies = step < last or self.protocol.unpacks
            block.free_ns = ready + (costs.copy_ns(pieces[piece]) if copies else 0.0)
            if step < last:
                self._at(block.free_ns, self._send_piece, block, key, step, piece, pieces[piece])
            block.piece += 1
            if block.piece == len(pieces):
                block.piece = 0
                block.step += 1
                if block.step > last:
                    block.step = 0
                    block.loop += 1
        if not block.done:
            block.done = True
            self._block_done(block)

    def _send_piece(self, block: _Block, key: Lane, step: int, piece: int, nbytes: int) -> None:
        src = block.rank
        dst = (src + 1) % self.n
        chunk_id = self._first_id[key] + piece
        h = self.handle
        mask = h.contributions[src][chunk_id]
        reduce = self._steps[step][1]
        target = self._blocks[dst][block.channel]
        unit = (key[0], step + 1, piece)
        if piece == 0:
            h.chunk_sends += 1
        if nbytes == 0:
            self._landed(target, unit, chunk_id, mask, 0, reduce)
            return
        wire = piece_wire_bytes(self.protocol, self.call.writes, nbytes)
        messages = chunk_sizes(wire, self._pieces(wire))
        left = [len(messages)]

        def arrived(_msg: int) -> None:
            left[0] -= 1
            if left[0] == 0:
                self._landed(target, unit, chunk_id, mask, nbytes, reduce)

        for size in messages:
            self._message(self.ids[src], self.ids[dst], size, arrived)

    def _landed(
        self,
        block: _Block,
        unit: tuple[int, int, int],
        chunk_id: int,
        mask: int,
        nbytes: int,
        reduce: bool,
    ) -> None:
        ready = self._reduction_done(block.rank, nbytes) if reduce and nbytes else self.env.now
        self.handle.contributions[block.rank][chunk_id] |= mask
        block.landed[unit] = ready
        self._wake(block)

    def _block_done(self, block: _Block) -> None:
        rank = block.rank
        self._blocks_left[rank] -= 1
        if self._blocks_left[rank]:
            return
        self._at(max(b.free_ns for b in self._blocks[rank]), self._rank_done, rank)
