"""An NVLS all-reduce on an idle HGX H100-like fabric whose switches multicast and reduce:
what each GPU sends and receives, how the planes share it, its chain for a tiny buffer, and
its pace for a large one. Every figure comes out of the simulated messages."""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from idle_fabrics import idle_transport

from sitssim.ccl.endpoint import EndpointCosts, nccl_endpoint_costs
from sitssim.ccl.nvls import nvls_plan
from sitssim.ccl.search import ring_search
from sitssim.ccl.tuning import NCCL_2_20
from sitssim.ccl.write_packets import SM_WRITES
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.workloads.ccl_nvls import CclNvls, nvls_messages, nvls_pieces, weighted_round_robin
from sitssim.workloads.ccl_ring import CclCall
from sitssim.workloads.collectives import CollectiveHandle

H100_RINGS = ring_search(18, "hopper")
"""What NCCL's search finds on an H100's 18 NVLinks (12 channels at 30 GB/s)."""

MIB = 1 << 20
PLANES = ["nvs0", "nvs1", "nvs2", "nvs3"]
LINKS = [5, 4, 4, 5]


def idle(gpus: int = 8) -> tuple[Fabric, Transport]:
    data: dict[str, Any] = {
        "name": "nvls",
        "duration": "1us",
        "topology": {"kind": "nvswitch", "gpus": gpus, "planes": 4, "links_per_gpu": 18},
        "links": {"default": {"rate": "64GT/s", "lanes": 3}},
        "switch": {
            "model": "input_queued",
            "voq": True,
            "allocator": "islip",
            "multicast": True,
            "reduction": True,
        },
    }
    return idle_transport(data, switch_model=True)


def run(
    size: int,
    costs: EndpointCosts | None = None,
    reduce_bytes_per_ns: float = math.inf,
    gpus: int = 8,
    channels: int = 16,
) -> tuple[Fabric, Transport, CollectiveHandle]:
    fabric, transport = idle(gpus)
    costs = costs or nccl_endpoint_costs(
        NCCL_2_20, "nvls", "simple", "all_reduce", H100_RINGS, "hopper", channels
    )
    call = CclCall("nvls", "simple", channels, costs)
    handle = CclNvls(
        transport,
        fabric.gpus,
        size,
        call,
        PLANES,
        LINKS,
        reduce_bytes_per_ns,
        0,
        0,
        None,
        256 * 1024,
    ).start()
    transport.run()
    return fabric, transport, handle


def column(transport: Transport, name: str, handle: CollectiveHandle) -> np.ndarray:
    return np.asarray(getattr(transport, name))[handle.messages]


def test_each_gpu_sends_its_buffer_up_once_and_gets_the_sum_down_once() -> None:
    size = 16 * MIB
    fabric, transport, h = run(size)
    assert h.result_complete()
    src, dst, nbytes = (column(transport, c, h) for c in ("src", "dst", "size"))
    for g in fabric.gpus:
        me = transport.node_id[g]
        # Up: its contribution of every piece, and the stores of the pieces it heads, with
        # a 16-byte header per 128 bytes written.
        assert nbytes[src == me].sum() == (size + size // 8) * 144 // 128
        # Down: the sums of the pieces it heads, and every piece's multicast.
        assert nbytes[dst == me].sum() == (size // 8 + size) * 144 // 128
    assert len(h.messages) == nvls_messages(nvls_plan(size, 8, 16), 256 * 1024, SM_WRITES)


def test_the_planes_share_the_pieces_as_a_gpu_shares_its_links() -> None:
    _, transport, h = run(8 * MIB)
    dst = column(transport, "dst", h)
    up = [int((dst == transport.node_id[p]).sum()) for p in PLANES]
    total = sum(up)
    for count, links in zip(up, LINKS, strict=True):
        assert abs(count - total * links / 18) <= 9


def test_weighted_round_robin_spreads_its_picks() -> None:
    picks = weighted_round_robin([5 / 18, 4 / 18, 4 / 18, 5 / 18], 18)
    assert [picks.count(p) for p in range(4)] == LINKS
    # No plane is picked twice in a row while the others wait.
    assert all(a != b for a, b in pairwise(picks))


def test_a_tiny_all_reduce_is_the_kernel_then_four_hops_and_a_handshake() -> None:
    costs = EndpointCosts(kernel_ns=23_000.0, step_ns=500.0, block_bytes_per_ns=math.inf)
    _, transport, h = run(8, costs)
    assert h.result_complete()
    # One piece: 8 contributions up, the sum to its head, the store up, 8 copies down.
    assert len(h.messages) == 18
    flights = column(transport, "t_deliver", h) - column(transport, "t_inject", h)
    up, to_head, store, down = flights[:8], flights[8], flights[9], flights[10:]
    expected = 23_000.0 + up.max() + to_head + 500.0 + store + down.max() + 500.0
    assert h.duration_ns == pytest.approx(expected, rel=1e-12)


def test_a_large_nvls_keeps_the_links_busy_rather_than_queueing_stores_behind_it() -> None:
    # Each link carries 9/8 of the buffer, in write packets of 144 bytes per 128; a scatter
    # running unbounded ahead would queue every store behind every contribution and take
    # about twice that.
    size = 128 * MIB
    fabric, _, h = run(size, EndpointCosts(0.0, 0.0, math.inf))
    per_gpu = sum(c.bytes_per_ns for c in fabric.channels if c.src == "gpu0")
    floor = size * 9 / 8 * 144 / 128 / per_gpu
    assert floor < h.duration_ns < 1.2 * floor


def test_a_slow_switch_reduction_sets_the_pace() -> None:
    size = 4 * MIB
    costs = EndpointCosts(0.0, 0.0, math.inf)
    fast = run(size, costs)[2].duration_ns
    slow = run(size, costs, reduce_bytes_per_ns=2.0)[2].duration_ns
    # Each plane reduces its share of 8 contributions of the buffer at 2 bytes per ns: an
    # outer plane 5/18 of the 16 KiB pieces, within one piece.
    assert slow >= 8 * (size * 5 / 18 - 16 * 1024) / 2.0
    assert slow > 5 * fast


@pytest.mark.parametrize("gpus", [3, 5])
@pytest.mark.parametrize("size", [1, 100_000, 3 * MIB + 17])
def test_every_gpu_ends_with_every_contribution(gpus: int, size: int) -> None:
    _, _, h = run(size, gpus=gpus, channels=3)
    assert h.result_complete()


@pytest.mark.parametrize("size", [1, 127, 128, 4097, 3 * MIB + 5, 16 * MIB, 33 * MIB - 1])
@pytest.mark.parametrize("heads, channels", [(2, 1), (4, 8), (8, 16)])
@pytest.mark.parametrize("cap", [1024, 256 * 1024])
def test_the_counted_messages_are_those_of_the_pieces_listed(
    size: int, heads: int, channels: int, cap: int
) -> None:
    plan = nvls_plan(size, heads, channels)
    listed = len(nvls_pieces(plan, cap, SM_WRITES)) * (2 * heads + 2)
    assert nvls_messages(plan, cap, SM_WRITES) == listed


class _Traced(CclNvls):
    """An NVLS run that notes when each lane's chunk is pulled and fenced."""

    def start(self, hold: bool = False) -> CollectiveHandle:
        self.pulled: dict[tuple[int, int], float] = {}
        self.fenced: dict[tuple[int, int], float] = {}
        return super().start(hold)

    def _pull(self, ch: int, k: int) -> None:
        self.pulled[(ch, k)] = self.env.now
        super()._pull(ch, k)

    def _fenced(self, ch: int, k: int) -> None:
        self.fenced[(ch, k)] = self.env.now
        super()._fenced(ch, k)


def test_a_lane_pulls_its_next_chunk_only_once_the_last_ones_stores_have_landed() -> None:
    # 3 GPUs on one channel: 96 KiB is two loops of three 16 KiB chunks, one lane per head.
    fabric, transport = idle(3)
    costs = EndpointCosts(kernel_ns=1000.0, step_ns=500.0, block_bytes_per_ns=math.inf)
    run = _Traced(
        transport,
        fabric.gpus,
        96 * 1024,
        CclCall("nvls", "simple", 1, costs),
        PLANES,
        LINKS,
        math.inf,
        0,
        0,
        None,
        256 * 1024,
    )
    h = run.start()
    transport.run()
    assert h.result_complete()
    heads = 3
    assert sorted(run.pulled) == [(0, k) for k in range(2 * heads)]
    for head in range(heads):
        first, second = (0, head), (0, heads + head)
        # The first chunk waits for every GPU's post (at the kernel's end) and a handshake.
        assert run.pulled[first] == pytest.approx(1000.0 + 500.0)
        assert run.fenced[first] <= run.pulled[second]
        assert run.pulled[second] == pytest.approx(run.fenced[first])
    # The lanes run side by side: every head pulls its first chunk at once.
    assert len({run.pulled[(0, head)] for head in range(heads)}) == 1
    # A GPU is done a handshake after it sees the last chunk's post.
    assert h.end_ns == pytest.approx(max(run.fenced.values()) + 500.0)
