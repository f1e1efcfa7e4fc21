"""A serving engine's custom all-reduce over NVLink: one-shot or two-shot, barriers of flags.

Theory of operation
-------------------
vLLM (and TensorRT-LLM, and SGLang after them) replace NCCL for small tensor-parallel
all-reduces with one kernel per GPU that reads its peers' buffers directly over NVLink,
their buffers registered with each other beforehand (``docs/ccl_sources.md`` §7; our
reading of vLLM's ``csrc/custom_all_reduce.cuh``):

* **one-shot**: a barrier, then every GPU reads every peer's whole buffer and reduces
  them with its own, then a barrier (so no peer reuses its buffer while it is read);
* **two-shot**: a barrier; GPU ``r`` reads slice ``r`` of every peer's buffer and reduces
  it (a reduce-scatter); a barrier; GPU ``r`` reads every peer's reduced slice (an
  all-gather); a barrier.

A barrier is flags: a GPU entering it writes a flag to every peer, and leaves it once it
has entered and seen every peer's flag, a poll (``EndpointCosts.step_ns``) after the last
one landed. A read is a request (a packet header) to the peer and the data coming back in
the peer's write packets (``ccl.write_packets``); the peer's SMs take no part, so a read is
served whatever the peer is doing, with what its memory holds at that moment. The reader's
kernel takes in data at most at its load rate (``EndpointCosts.block_bytes_per_ns``: all its
blocks together), and the kernel's fixed cost (``EndpointCosts.kernel_ns``) comes first.
No NCCL cost applies: the kernel is not NCCL's.

The data are tracked symbolically as in ``sitssim.workloads.collectives``: a read carries
the peer's mask of the slice at the moment the request reaches it, so a read past a
barrier that did not hold shows as a missing contribution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sitssim.ccl.custom_ar import (
    CUSTOM_ALGORITHMS,
    ONE_SHOT,
    TWO_SHOT,
    custom_algorithm,
    custom_costs,
)
from sitssim.ccl.endpoint import EndpointCosts
from sitssim.ccl.write_packets import SM_WRITES, WritePackets
from sitssim.workloads.collectives import (
    CollectiveHandle,
    CollectiveRun,
    chunk_sizes,
    messages_per_send,
)

if TYPE_CHECKING:
    from sitssim.config.collective_config import CustomKernel
    from sitssim.fabric.transport import Transport

FLAG_BYTES = 16
"""A barrier flag as one GPU writes it to a peer: one 16-byte store."""


def custom_messages(
    n_ranks: int, n_bytes: int, max_message_bytes: int, writes: WritePackets = SM_WRITES
) -> int:
    """Messages of one custom all-reduce: every barrier's flags, every read's request, and
    the data that answers it."""
    pairs = n_ranks * (n_ranks - 1)

    def data(nbytes: int) -> int:
        return messages_per_send(writes.wire_bytes(nbytes), max_message_bytes)

    if custom_algorithm(n_ranks, n_bytes) == ONE_SHOT:
        return 2 * pairs + pairs + pairs * data(n_bytes)
    # Each shot reads every slice from the n - 1 GPUs that do not reduce it, or hold it.
    shots = 2 * (n_ranks - 1) * sum(data(s) for s in chunk_sizes(n_bytes, n_ranks))
    return 3 * pairs + 2 * pairs + shots


def custom_run(
    transport: Transport,
    gpus: list[str],
    size_bytes: int,
    kernel: CustomKernel,
    tenant: int,
    workload: int,
    on_done: Callable[[float], None] | None,
    max_message_bytes: int,
) -> CustomAllReduce | None:
    """The custom all-reduce vLLM would run for ``size_bytes`` with ``kernel``'s costs, set
    up but not started; None where vLLM hands the call to NCCL (past its buffer)."""
    algorithm = custom_algorithm(len(gpus), size_bytes)
    if algorithm is None:
        return None
    return CustomAllReduce(
        transport,
        gpus,
        size_bytes,
        algorithm,
        custom_costs(kernel.kernel, kernel.load_bandwidth),
        tenant,
        workload,
        on_done,
        max_message_bytes,
    )


class CustomAllReduce(CollectiveRun):
    """A one-shot or two-shot custom all-reduce over ``gpus`` (module docstring)."""

    def __init__(
        self,
        transport: Transport,
        gpus: list[str],
        size_bytes: int,
        algorithm: str,
        costs: EndpointCosts,
        tenant: int,
        workload: int,
        on_done: Callable[[float], None] | None,
        max_message_bytes: int,
        writes: WritePackets = SM_WRITES,
    ) -> None:
        if algorithm not in CUSTOM_ALGORITHMS:
            raise ValueError(f"a custom all-reduce is one of {CUSTOM_ALGORITHMS}: {algorithm!r}")
        # The base checks its arguments as a bare call's; the handle says what ran.
        super().__init__(
            transport,
            gpus,
            size_bytes,
            "all_reduce",
            "one_shot",
            tenant,
            workload,
            on_done,
            max_message_bytes,
            None,
            1,
        )
        self.costs = costs
        self.writes = writes
        self.two_shot = algorithm == TWO_SHOT
        self.handle.algorithm = algorithm
        self.handle.protocol = "custom"
        self.handle.channels = 0

    def start(self, hold: bool = False) -> CollectiveHandle:
        """Start every rank's kernel now, or, with ``hold``, as each is ``release``d."""
        n = self.n
        slices = n if self.two_shot else 1
        self._slice_bytes = chunk_sizes(self.handle.size, slices)
        self._init_data(slices, own_chunk_only=False)
        barriers = 3 if self.two_shot else 2
        self._entered = [[False] * barriers for _ in range(n)]
        self._flags = [[0] * barriers for _ in range(n)]
        self._phase = [0] * n
        self._reads_left = [0] * n
        self._reader_free = [0.0] * n
        self._pending_mask: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        if not hold:
            for rank in range(n):
                self.release(rank)
        return self.handle

    def release(self, rank: int) -> None:
        self._at(self.env.now + self.costs.kernel_ns, self._enter, rank, 0)

    # --- barriers ------------------------------------------------------------------

    def _enter(self, rank: int, barrier: int) -> None:
        self._entered[rank][barrier] = True
        wire = self.writes.wire_bytes(FLAG_BYTES)
        for peer in range(self.n):
            if peer != rank:
                self._message(self.ids[rank], self.ids[peer], wire, self._flagged(peer, barrier))
        self._maybe_leave(rank, barrier)

    def _flagged(self, rank: int, barrier: int) -> Callable[[int], None]:
        def landed(_msg: int) -> None:
            self._flags[rank][barrier] += 1
            self._maybe_leave(rank, barrier)

        return landed

    def _maybe_leave(self, rank: int, barrier: int) -> None:
        if self._entered[rank][barrier] and self._flags[rank][barrier] == self.n - 1:
            self._at(self.env.now + self.costs.step_ns, self._after_barrier, rank, barrier)

    def _after_barrier(self, rank: int, barrier: int) -> None:
        last = len(self._entered[rank]) - 1
        if barrier == last:
            self._rank_done(rank)
        elif not self.two_shot:
            self._read_all(rank, [0] * self.n)
        elif barrier == 0:
            self._read_all(rank, [rank] * self.n)
        else:
            self._read_all(rank, list(range(self.n)))

    # --- reads -----------------------------------------------------------------------

    def _read_all(self, rank: int, slice_of_peer: list[int]) -> None:
        """Read from every peer the slice ``slice_of_peer[peer]`` of its buffer."""
        self._reads_left[rank] = self.n - 1
        for peer in range(self.n):
            if peer != rank:
                self._request(rank, peer, slice_of_peer[peer])

    def _request(self, rank: int, peer: int, chunk: int) -> None:
        header = self.writes.header_bytes or 1
        self._message(
            self.ids[rank], self.ids[peer], header, lambda _msg: self._serve(peer, rank, chunk)
        )

    def _serve(self, peer: int, reader: int, chunk: int) -> None:
        """``peer``'s memory answers ``reader`` with ``chunk`` as it holds it now."""
        h = self.handle
        h.chunk_sends += 1
        mask = h.contributions[peer][chunk]
        nbytes = self._slice_bytes[chunk]
        wire = self.writes.wire_bytes(nbytes)
        count = self._pieces(wire)
        left = [count]
        for size, payload in zip(chunk_sizes(wire, count), chunk_sizes(nbytes, count), strict=True):
            self._message(
                self.ids[peer], self.ids[reader], size, self._loaded(reader, payload, left)
            )
        self._pending_mask[reader].append((chunk, mask))

    def _loaded(self, reader: int, payload: int, left: list[int]) -> Callable[[int], None]:
        """The reader's kernel takes each message in at its load rate, as it lands."""

        def landed(_msg: int) -> None:
            ready = max(self.env.now, self._reader_free[reader]) + self.costs.copy_ns(payload)
            self._reader_free[reader] = ready
            left[0] -= 1
            if left[0] == 0:
                self._reads_left[reader] -= 1
                if self._reads_left[reader] == 0:
                    self._at(ready, self._reads_done, reader)

        return landed

    def _reads_done(self, rank: int) -> None:
        """Every read of the shot is in: the rank holds what it read, and enters the next
        barrier."""
        row = self.handle.contributions[rank]
        for chunk, mask in self._pending_mask[rank]:
            row[chunk] |= mask
        self._pending_mask[rank].clear()
        self._phase[rank] += 1
        self._enter(rank, self._phase[rank])
