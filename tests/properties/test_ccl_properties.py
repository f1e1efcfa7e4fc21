"""Hypothesis properties of collectives run as NCCL runs them, on generated NVSwitch fabrics.

For any buffer size, rank count, operation, protocol, channel count and message cap:

* every rank ends with every contribution it is promised, exactly once (the symbolic masks),
  and the call finishes exactly once;
* an all-reduce never beats the analytic lower bound of a ring on its fabric;
* the wire carries at least the data of every step at the protocol's efficiency;
* an NVLS all-reduce through switches that multicast and reduce does the same, its GPUs
  sending exactly the buffer and their heads' share of it up, and getting as much down;
* a serving engine's custom all-reduce (vLLM's one-shot or two-shot kernel) ends the same
  way, in the messages it counts, never faster than its GPUs' links take in what it reads.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from idle_fabrics import idle_transport

from sitssim.ccl.custom_ar import ONE_SHOT, custom_algorithm, custom_costs
from sitssim.ccl.endpoint import nccl_endpoint_costs
from sitssim.ccl.protocols import PROTOCOLS
from sitssim.ccl.search import ring_search
from sitssim.ccl.tuning import NCCL_2_20, ring_steps
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.workloads.ccl_nvls import CclNvls
from sitssim.workloads.ccl_ring import CclCall, CclRing
from sitssim.workloads.collectives import ring_all_reduce_lower_bound_ns
from sitssim.workloads.custom_allreduce import CustomAllReduce, custom_messages

H100_RINGS = ring_search(18, "hopper")
"""What NCCL's search finds on an H100's 18 NVLinks (12 channels at 30 GB/s)."""


def idle(n: int, links: int) -> tuple[Fabric, Transport]:
    data: dict[str, Any] = {
        "name": "prop",
        "duration": "1us",
        "topology": {"kind": "nvswitch", "gpus": n, "links_per_gpu": links},
        "links": {"default": {"rate": "64GT/s", "lanes": 2}},
    }
    return idle_transport(data)


cases = st.tuples(
    st.integers(2, 8),
    st.integers(4, 18),
    # Log-uniform from 1 byte to 8 MiB: empty lanes, short last loops and full chunks.
    st.integers(0, 23).flatmap(lambda e: st.integers(1 << e, (2 << e) - 1)),
    st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]),
    st.sampled_from(sorted(PROTOCOLS)),
    st.integers(1, 24),
    st.sampled_from([4096, 65536, 1 << 20]),
)


@given(cases)
def test_every_rank_ends_with_its_promise_and_an_all_reduce_never_beats_the_bound(
    case: tuple,
) -> None:
    n, links, size, operation, protocol, channels, max_message = case
    fabric, transport = idle(n, links)
    call = CclCall(
        "ring",
        protocol,
        channels,
        nccl_endpoint_costs(NCCL_2_20, "ring", protocol, operation, H100_RINGS, "hopper", channels),
    )
    done: list[float] = []
    handle = CclRing(
        transport, fabric.gpus, size, operation, call, 0, 0, done.append, max_message, None
    ).start()
    transport.run()
    assert done == [handle.end_ns]
    assert handle.result_complete()
    wire = int(np.asarray(transport.size)[handle.messages].sum())
    proto = PROTOCOLS[protocol]
    # Each step, every rank sends one chunk of every lane: the whole buffer once per step.
    moved = ring_steps(operation, n) * size
    assert wire * proto.data_bytes_per_line >= moved * proto.line_bytes
    if operation == "all_reduce":
        assert handle.duration_ns >= ring_all_reduce_lower_bound_ns(fabric, fabric.gpus, size)


nvls_cases = st.tuples(
    st.integers(3, 8),
    st.integers(4, 18),
    st.integers(0, 23).flatmap(lambda e: st.integers(1 << e, (2 << e) - 1)),
    st.integers(1, 16),
    st.sampled_from([4096, 65536, 1 << 20]),
)


@given(nvls_cases)
def test_an_nvls_all_reduce_sums_every_contribution_through_the_switches(case: tuple) -> None:
    n, links, size, channels, max_message = case
    fabric, transport = idle(n, links)
    switches = fabric.switches
    per_plane = [fabric.graph.edges[fabric.gpus[0], s]["links"] for s in switches]
    call = CclCall(
        "nvls",
        "simple",
        channels,
        nccl_endpoint_costs(
            NCCL_2_20, "nvls", "simple", "all_reduce", H100_RINGS, "hopper", channels
        ),
    )
    done: list[float] = []
    handle = CclNvls(
        transport,
        fabric.gpus,
        size,
        call,
        switches,
        per_plane,
        math.inf,
        0,
        0,
        done.append,
        max_message,
    ).start()
    transport.run()
    assert done == [handle.end_ns]
    assert handle.result_complete()
    src = np.asarray(transport.src)[handle.messages]
    dst = np.asarray(transport.dst)[handle.messages]
    nbytes = np.asarray(transport.size)[handle.messages]
    up = sum(int(nbytes[src == transport.node_id[g]].sum()) for g in fabric.gpus)
    down = sum(int(nbytes[dst == transport.node_id[g]].sum()) for g in fabric.gpus)
    # Every GPU's contribution goes up and the stores of its heads; as much comes down. On
    # the wire each is in write packets: a 16-byte header per 128 bytes, or part of them.
    data = n * size + size
    assert up == down
    assert data * 144 / 128 <= up < data * 144 / 128 + 16 * len(handle.messages)


custom_cases = st.tuples(
    st.integers(2, 8),
    st.integers(4, 18),
    # Log-uniform from 1 byte to vLLM's 8 MiB buffer: both kernels, slices of 0 to n bytes.
    st.integers(0, 22).flatmap(lambda e: st.integers(1 << e, (2 << e) - 1)),
    st.sampled_from([4096, 65536, 1 << 20]),
)


@given(custom_cases)
def test_a_custom_all_reduce_sums_every_contribution_and_never_beats_the_bound(
    case: tuple,
) -> None:
    n, links, size, max_message = case
    fabric, transport = idle(n, links)
    algorithm = custom_algorithm(n, size)
    assert algorithm is not None
    done: list[float] = []
    handle = CustomAllReduce(
        transport,
        fabric.gpus,
        size,
        algorithm,
        custom_costs(kernel_ns=0.0, load_bytes_per_ns=math.inf),
        0,
        0,
        done.append,
        max_message,
    ).start()
    transport.run()
    assert done == [handle.end_ns]
    assert handle.result_complete()
    assert len(handle.messages) == custom_messages(n, size, max_message)
    # Every GPU takes in (n - 1) buffers (one-shot) or 2 (n - 1) / n of one (two-shot); its
    # links cannot carry that faster than their rate.
    read = (n - 1) * size if algorithm == ONE_SHOT else 2 * (size - size // n)
    per_gpu = sum(c.bytes_per_ns for c in fabric.channels if c.dst == fabric.gpus[0])
    assert handle.duration_ns >= read / per_gpu
