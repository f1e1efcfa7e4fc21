"""A serving engine's custom all-reduce: vLLM's kernel choice, its barriers and its reads."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest
from idle_fabrics import idle_transport

from sitssim.ccl.custom_ar import (
    FLAG_POLL_NS,
    ONE_SHOT,
    TWO_SHOT,
    custom_algorithm,
    custom_costs,
)
from sitssim.ccl.endpoint import EndpointCosts
from sitssim.errors import InputError
from sitssim.estimate import estimate
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate
from sitssim.workloads.collectives import CollectiveHandle
from sitssim.workloads.custom_allreduce import CustomAllReduce, custom_messages

KIB = 1024
NODE: dict[str, Any] = {
    "version": 1,
    "name": "custom",
    "seed": 1,
    "duration": "1us",
    "topology": {"kind": "nvswitch", "gpus": 8, "planes": 2, "links_per_gpu": 4, "link": "nv"},
    "links": {"nv": {"rate": "64GT/s", "lanes": 3, "encoding": "flit256", "length": "25cm"}},
}


def idle(gpus: int = 8) -> tuple[Fabric, Transport]:
    data = copy.deepcopy(NODE)
    data["topology"]["gpus"] = gpus
    return idle_transport(data)


def run(
    size: int, gpus: int = 8, costs: EndpointCosts | None = None, late: float = 0.0
) -> tuple[Transport, CollectiveHandle]:
    fabric, transport = idle(gpus)
    algorithm = custom_algorithm(gpus, size)
    assert algorithm is not None
    call = CustomAllReduce(
        transport,
        fabric.gpus,
        size,
        algorithm,
        costs or custom_costs(1000.0, 100.0),
        0,
        0,
        None,
        256 * KIB,
    )
    handle = call.start(hold=True)
    for rank in range(gpus):
        call.release_at(rank, late if rank == 0 else 0.0)
    transport.run()
    return transport, handle


@pytest.mark.parametrize(
    ("gpus", "size", "expected"),
    [
        (2, 8 * 1024 * KIB, ONE_SHOT),
        (4, 511 * KIB, ONE_SHOT),
        (4, 512 * KIB, TWO_SHOT),
        (8, 255 * KIB, ONE_SHOT),
        (8, 256 * KIB, TWO_SHOT),
        (8, 8 * 1024 * KIB + 1, None),
    ],
)
def test_the_kernel_is_the_one_vllm_picks(gpus: int, size: int, expected: str | None) -> None:
    assert custom_algorithm(gpus, size) == expected


@pytest.mark.parametrize("size", [8 * KIB, 1024 * KIB])
def test_every_gpu_ends_with_every_contribution_in_the_messages_it_counts(size: int) -> None:
    _transport, h = run(size)
    assert h.algorithm == (ONE_SHOT if size < 256 * KIB else TWO_SHOT)
    assert h.result_complete()
    assert len(h.messages) == custom_messages(8, size, 256 * KIB)


def test_a_small_call_is_the_kernel_two_barriers_and_one_read() -> None:
    costs = custom_costs(kernel_ns=5000.0, load_bytes_per_ns=math.inf)
    transport, h = run(16, gpus=2, costs=costs)
    flights = (
        np.asarray(transport.t_deliver)[h.messages] - np.asarray(transport.t_inject)[h.messages]
    )
    # Per GPU: a flag, a read request, the data back, a flag; all one flight each way.
    assert len(h.messages) == 8
    assert h.duration_ns == pytest.approx(5000.0 + 2 * FLAG_POLL_NS + 4 * flights.max(), rel=0.02)


def test_no_gpu_reads_past_a_barrier_a_late_peer_has_not_reached() -> None:
    costs = custom_costs(kernel_ns=1000.0, load_bytes_per_ns=math.inf)
    late = 50_000.0
    _, h = run(1024 * KIB, costs=costs, late=late)
    assert h.result_complete()
    # Every GPU waits for GPU 0's first flag, which it writes after its own fixed cost.
    assert min(h.rank_done_ns) > late + 1000.0


def test_the_load_rate_bounds_a_large_call() -> None:
    size = 8 * 1024 * KIB
    rate = 20.0
    _, h = run(size, gpus=2, costs=custom_costs(0.0, rate))
    # One-shot on two GPUs: each reads its peer's whole buffer at the kernel's load rate.
    assert h.duration_ns >= size / rate
    assert h.duration_ns < 1.1 * size / rate


def scenario(**workload: Any) -> dict[str, Any]:
    data = copy.deepcopy(NODE)
    data["workloads"] = [
        {
            "kind": "collective",
            "algorithm": "custom",
            "sizes": ["8KiB", "1MiB"],
            "custom": {"kernel": "8us", "load_bandwidth": "85GB/s"},
            **workload,
        }
    ]
    return data


def test_a_collective_workload_runs_the_custom_kernels_and_its_estimate_counts_them() -> None:
    sc = scenario_from_data(scenario())
    result = simulate(sc)
    table = result.tables["collectives"]
    assert list(table["algorithm"]) == [ONE_SHOT, TWO_SHOT]
    assert list(table["protocol"]) == ["custom", "custom"]
    assert table["result_complete"].all()
    assert estimate(sc, build_fabric(sc)).messages == table["messages"].sum()


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"custom": None}, r"custom.*'algorithm: custom'"),
        ({"algorithm": "ring"}, r"custom.*'algorithm: custom'"),
        ({"sizes": ["8KiB", "9MiB"]}, r"sizes\[1\].*at most 8388608 bytes"),
        ({"operation": "all_gather"}, r"all_reduce only"),
    ],
)
def test_a_custom_workload_is_refused_where_it_is_wrong(edit: dict[str, Any], match: str) -> None:
    data = scenario()
    wl = data["workloads"][0]
    for key, value in edit.items():
        if value is None:
            wl.pop(key)
        else:
            wl[key] = value
    with pytest.raises(InputError, match=match):
        scenario_from_data(data)
