"""A ring collective as NCCL runs it, on an idle HGX-like fabric: its chain of steps, its bytes
on the wire per protocol, its channels and loops, and the costs at its endpoints.

Every figure comes out of the simulated messages: the times at which they were injected and
delivered, and their sizes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from idle_fabrics import idle_transport

from sitssim.ccl.endpoint import EndpointCosts, nccl_endpoint_costs
from sitssim.ccl.plan import ring_plan
from sitssim.ccl.protocols import PROTOCOLS
from sitssim.ccl.search import ring_search
from sitssim.ccl.tuning import NCCL_2_20
from sitssim.ccl.write_packets import SM_WRITES
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.workloads.ccl_ring import (
    CclCall,
    CclRing,
    lane_pieces,
    piece_wire_bytes,
    ring_messages,
)
from sitssim.workloads.collectives import CollectiveHandle, ring_all_reduce_lower_bound_ns

H100_RINGS = ring_search(18, "hopper")
"""What NCCL's search finds on an H100's 18 NVLinks (12 channels at 30 GB/s)."""

HGX = {"kind": "nvswitch", "gpus": 8, "planes": 4, "links_per_gpu": 18}
NVLINK = {"rate": "64GT/s", "lanes": 3}
MIB = 1 << 20


def idle(topology: dict[str, Any] = HGX) -> tuple[Fabric, Transport]:
    data = {"name": "idle", "duration": "1us", "topology": topology, "links": {"default": NVLINK}}
    return idle_transport(data)


def run(
    size: int,
    protocol: str,
    channels: int,
    costs: EndpointCosts | None = None,
    operation: str = "all_reduce",
    topology: dict[str, Any] = HGX,
    max_message_bytes: int = 256 * 1024,
) -> tuple[Fabric, Transport, CollectiveHandle]:
    fabric, transport = idle(topology)
    if costs is None:
        costs = nccl_endpoint_costs(
            NCCL_2_20, "ring", protocol, operation, H100_RINGS, "hopper", channels
        )
    call = CclCall("ring", protocol, channels, costs)
    ring = CclRing(
        transport, fabric.gpus, size, operation, call, 0, 0, None, max_message_bytes, None
    )
    handle = ring.start()
    transport.run()
    return fabric, transport, handle


def column(transport: Transport, name: str, handle: CollectiveHandle) -> np.ndarray:
    return np.asarray(getattr(transport, name))[handle.messages]


def test_a_tiny_all_reduce_is_the_kernel_then_one_chunk_round_the_ring_twice() -> None:
    # 8 bytes on one channel: one lane carries them, the other lanes are empty, so the
    # call is the kernel's fixed cost, then 2(n - 1) sends of that lane's chunk, each one
    # delivered and then acted on after a handshake (the last receive too), each of the
    # 2n - 1 steps copying the 8 bytes once.
    costs = nccl_endpoint_costs(NCCL_2_20, "ring", "ll", "all_reduce", H100_RINGS, "hopper", 1)
    _, transport, h = run(8, "ll", 1, costs)
    assert h.result_complete()
    assert len(h.messages) == 14
    flights = column(transport, "t_deliver", h) - column(transport, "t_inject", h)
    expected = costs.kernel_ns + 14 * costs.step_ns + flights.sum() + 15 * costs.copy_ns(8)
    assert h.duration_ns == pytest.approx(expected, rel=1e-12)
    # Each message leaves when the one before it has landed and been acted on.
    t_inject = np.sort(column(transport, "t_inject", h))
    t_deliver = np.sort(column(transport, "t_deliver", h))
    assert np.allclose(t_inject[1:] - t_deliver[:-1], costs.step_ns + costs.copy_ns(8))


def test_simples_last_receive_waits_for_the_peers_store_and_copies_nothing() -> None:
    # One byte on one channel is one piece on one lane: the kernel, then 2(n - 1) sends each
    # copied, delivered and acted on after a handshake, then the last receive, which under
    # Simple only waits (the peer stored into the output), where LL unpacks its line.
    costs = EndpointCosts(kernel_ns=1000.0, step_ns=100.0, block_bytes_per_ns=0.001)
    _, transport, h = run(1, "simple", 1, costs)
    assert h.result_complete()
    assert len(h.messages) == 14
    flights = column(transport, "t_deliver", h) - column(transport, "t_inject", h)
    expected = costs.kernel_ns + 14 * costs.step_ns + flights.sum() + 14 * costs.copy_ns(1)
    assert h.duration_ns == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("protocol", "wire_per_data"),
    [("ll", 2.0 * 144 / 128), ("simple", 144 / 128)],
)
def test_the_wire_carries_the_protocol_lines_of_every_step(
    protocol: str, wire_per_data: float
) -> None:
    # Every lane of a 1 MiB all-reduce on 24 channels holds a whole number of LL lines, so
    # the wire carries 2(n - 1) buffers' worth of data at the protocol's efficiency, in
    # write packets of 128 bytes and a 16-byte header (to within each piece's last packet).
    _, transport, h = run(MIB, protocol, 24)
    assert h.result_complete()
    wire = column(transport, "size", h)
    assert wire_per_data * 14 * MIB <= wire.sum() < wire_per_data * 14 * MIB + 16 * len(wire)


def test_ll128_rounds_every_piece_up_to_whole_128_byte_lines() -> None:
    # Each 128-byte line is one write packet: 144 bytes with its header.
    _, transport, h = run(MIB, "ll128", 24)
    wire = column(transport, "size", h)
    assert (wire % 144 == 0).all()
    assert wire.sum() >= 14 * MIB * 144 / 120
    assert wire.sum() < 14 * MIB * 144 / 120 + len(wire) * 144


def test_the_call_takes_loops_of_one_chunk_per_channel_rank_and_step() -> None:
    # 4 channels of 8 ranks move 64 MiB of 2 MiB chunks per loop: 160 MiB takes 3 loops,
    # the last of smaller chunks.
    size = 160 * MIB
    _, _, h = run(size, "simple", 4)
    plan = ring_plan("all_reduce", "simple", size, 8, 4)
    assert plan.chunks[:2] == (2 * MIB, 2 * MIB) and plan.chunks[2] < 2 * MIB
    assert h.chunk_sends == 3 * 4 * 8 * 14
    assert h.result_complete()


def test_fewer_channels_take_longer_when_the_blocks_limit_the_rate() -> None:
    costs = EndpointCosts(kernel_ns=0.0, step_ns=0.0, block_bytes_per_ns=2.0)
    times = [run(8 * MIB, "simple", c, costs)[2].duration_ns for c in (2, 4, 8)]
    # Each block copies its share, 2(n - 1)/n of S / channels, at 2 bytes per ns.
    for c, t in zip((2, 4, 8), times, strict=True):
        assert t >= 14 * (8 * MIB / 8 / c) / 2.0
    assert times[0] > 1.8 * times[1] > 1.8 * 1.8 * times[2]


def test_the_first_message_leaves_after_the_kernels_fixed_cost() -> None:
    costs = EndpointCosts(kernel_ns=5000.0, step_ns=100.0, block_bytes_per_ns=math.inf)
    _, transport, h = run(4 * MIB, "simple", 4, costs)
    assert column(transport, "t_inject", h).min() - h.start_ns == 5000.0


@pytest.mark.parametrize("operation", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("protocol", ["ll", "ll128", "simple"])
def test_gather_and_scatter_end_with_what_they_promise(operation: str, protocol: str) -> None:
    _, transport, h = run(3 * MIB + 5, protocol, 6, operation=operation)
    assert h.result_complete()
    # n - 1 steps, each moving every rank's chunk of every lane once.
    data = column(transport, "size", h).sum()
    assert data >= 7 * (3 * MIB + 5) * (1.0 if protocol == "simple" else 128 / 120) - 8 * 7 * 6


def test_simple_posts_a_chunk_in_two_slices_each_forwarded_as_it_lands() -> None:
    # One loop of 2 MiB chunks: each chunk send is two slices of 1 MiB, four messages of
    # 256 KiB of data each (288 KiB in write packets), and without a handshake to wait for,
    # the next rank sends its first slice on before the second has landed.
    size = 2 * MIB * 8
    costs = EndpointCosts(kernel_ns=0.0, step_ns=0.0, block_bytes_per_ns=math.inf)
    _, transport, h = run(size, "simple", 1, costs, max_message_bytes=288 * 1024)
    assert len(h.messages) == 14 * 8 * 8
    assert h.result_complete()
    src = column(transport, "src", h)
    dst = column(transport, "dst", h)
    ids = [transport.node_id[g] for g in h.gpus]
    to_1 = np.sort(column(transport, "t_deliver", h)[(src == ids[0]) & (dst == ids[1])])
    from_1 = np.sort(column(transport, "t_inject", h)[src == ids[1]])
    # Rank 1's step 1 (its messages 9 to 16) starts before rank 0's step 0 (its first eight
    # messages to rank 1) has fully landed, but only after its first slice has.
    assert to_1[3] <= from_1[8] < to_1[7]
    fabric = idle()[0]
    assert h.duration_ns >= ring_all_reduce_lower_bound_ns(fabric, fabric.gpus, size)


@pytest.mark.parametrize("protocol", ["ll", "ll128"])
def test_a_line_protocols_receiver_acts_on_each_pass_as_it_lands(protocol: str) -> None:
    # One channel, chunks of four passes of the block's loop. A receiver's threads poll their
    # own lines, so a block takes up the step its upstream neighbour is on as soon as that
    # neighbour's first pass has landed: no block ever waits, and the call takes exactly its
    # blocks' copying, 2(n - 1) sends and the last unpack of one chunk each. Acting on whole
    # chunks would add a chunk's flight for every step after the first.
    costs = EndpointCosts(kernel_ns=0.0, step_ns=0.0, block_bytes_per_ns=1.0)
    pass_bytes = PROTOCOLS[protocol].pass_data_bytes
    assert pass_bytes is not None
    chunk = 4 * pass_bytes
    _, _, h = run(8 * chunk, protocol, 1, costs)
    assert h.result_complete()
    assert len(h.messages) == 14 * 8 * 4
    assert h.duration_ns == pytest.approx(15 * costs.copy_ns(chunk), rel=1e-9)


@pytest.mark.parametrize(("protocol", "rest"), [("ll", 512), ("ll128", 1920)])
def test_a_line_protocols_chunk_goes_a_whole_pass_at_a_time_and_its_rest_last(
    protocol: str, rest: int
) -> None:
    # A chunk of one pass and a fraction (LL128 cuts chunks in warps' 1,920-byte slices):
    # the block's loop stores a whole pass, then what is left, so every send is a full
    # pass's lines and then the rest's, never two halves. The rest takes the block too
    # short a time to hide the next full pass's flight, so blocks wait and the call takes
    # longer than its blocks' copying; two halves would hide it.
    costs = EndpointCosts(kernel_ns=0.0, step_ns=0.0, block_bytes_per_ns=10.0)
    pass_bytes = PROTOCOLS[protocol].pass_data_bytes
    assert pass_bytes is not None
    chunk = pass_bytes + rest
    _, transport, h = run(8 * chunk, protocol, 1, costs)
    assert h.result_complete()
    sizes, counts = np.unique(column(transport, "size", h), return_counts=True)
    proto = PROTOCOLS[protocol]
    assert sizes.tolist() == [piece_wire_bytes(proto, SM_WRITES, p) for p in (rest, pass_bytes)]
    assert counts.tolist() == [14 * 8, 14 * 8]
    assert h.duration_ns > 15 * costs.copy_ns(chunk) * 1.1


@pytest.mark.parametrize("operation", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("protocol", ["ll", "ll128", "simple"])
@pytest.mark.parametrize("size", [8, 1000, 65_537, 3 * MIB + 7, 33 * MIB])
@pytest.mark.parametrize("cap", [4096, 256 * 1024])
def test_the_counted_messages_are_those_of_the_pieces_listed(
    operation: str, protocol: str, size: int, cap: int
) -> None:
    plan = ring_plan(operation, protocol, size, 8, 4)
    proto = PROTOCOLS[protocol]
    listed = sum(
        -(-piece_wire_bytes(proto, SM_WRITES, piece) // cap)
        for pieces in lane_pieces(plan, size, cap, SM_WRITES).values()
        for piece in pieces
    )
    assert ring_messages(plan, size, cap, SM_WRITES) == plan.steps_per_loop * listed
