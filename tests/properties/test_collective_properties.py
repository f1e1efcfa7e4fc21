"""Hypothesis properties of collectives on generated fabrics, buffer sizes and message caps.

* No ring all-reduce beats the analytic bound, on any topology.
* Ring all-reduce puts exactly 2S - S_r - S_(r+1) bytes on the wire from rank r (the
  buffer minus the two slices it never forwards), which is 2(N-1)/N * S when N divides S.
* Every algorithm leaves every rank with every contribution, and finishes exactly once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from idle_fabrics import idle_transport

from sitssim.config.collective_config import ALGORITHMS
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.workloads.collectives import (
    chunk_sizes,
    ring_all_reduce_lower_bound_ns,
    start_collective,
)


def idle(topology: dict[str, Any], lanes: int) -> tuple[Fabric, Transport]:
    data = {
        "name": "prop",
        "duration": "1us",
        "topology": topology,
        "links": {"default": {"rate": "64GT/s", "lanes": lanes}},
    }
    return idle_transport(data)


@st.composite
def topologies(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(2, 8))
    kind = draw(st.sampled_from(["nvswitch", "fat_tree", "direct_rc"]))
    if kind == "nvswitch":
        return {"kind": kind, "gpus": n, "links_per_gpu": draw(st.integers(4, 18))}
    if kind == "fat_tree":
        return {"kind": kind, "gpus": n, "levels": 2, "radix": 2 if n <= 4 else 4}
    return {"kind": kind, "gpus": n}


cases = st.tuples(
    topologies(),
    st.integers(1, 16),
    st.integers(1, 1 << 20),
    st.integers(1, 64),
)


@given(cases)
def test_ring_never_beats_the_bound_and_sends_exactly_its_share(case: tuple) -> None:
    topology, lanes, size, pieces = case
    fabric, transport = idle(topology, lanes)
    max_message = max(1, -(-size // pieces))
    done: list[float] = []
    handle = start_collective(
        "all_reduce",
        transport,
        fabric.gpus,
        size,
        max_message_bytes=max_message,
        on_done=done.append,
    )
    transport.run()
    n = len(fabric.gpus)
    assert done == [handle.end_ns]
    assert handle.result_complete()
    assert handle.duration_ns >= ring_all_reduce_lower_bound_ns(fabric, fabric.gpus, size) * (
        1 - 1e-12
    )
    src = np.asarray(transport.src)[handle.messages]
    nbytes = np.asarray(transport.size)[handle.messages]
    chunks = chunk_sizes(size, n)
    for r, gpu in enumerate(fabric.gpus):
        sent = int(nbytes[src == transport.node_id[gpu]].sum())
        assert sent == 2 * size - chunks[r] - chunks[(r + 1) % n]
        if size % n == 0:
            assert sent * n == 2 * (n - 1) * size


@given(
    st.integers(2, 8),
    st.integers(1, 1 << 16),
    st.sampled_from(ALGORITHMS),
    st.integers(1, 8),
)
def test_every_algorithm_completes_once_with_every_contribution(
    n: int, size: int, algorithm: str, min_messages: int
) -> None:
    fabric, transport = idle({"kind": "nvswitch", "gpus": n}, 2)
    done: list[float] = []
    handle = start_collective(
        "all_reduce",
        transport,
        fabric.gpus,
        size,
        algorithm,
        on_done=done.append,
        max_message_bytes=4096,
        min_messages=min_messages,
    )
    transport.run()
    full = (1 << n) - 1
    assert done == [handle.end_ns] == [max(handle.rank_done_ns)]
    assert all(mask == full for row in handle.contributions for mask in row)
