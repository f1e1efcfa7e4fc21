"""Endpoint costs taken from the inputs of NCCL 2.20.3's cost model (docs/ccl_sources.md §1)."""

from __future__ import annotations

import math

import pytest

from sitssim.ccl.endpoint import EndpointCosts, nccl_endpoint_costs
from sitssim.ccl.tuning import generation_of


def test_a_ring_ll_call_pays_the_base_latency_once_and_the_nvlink_latency_per_step() -> None:
    costs = nccl_endpoint_costs("ring", "ll", "hopper", 24)
    assert costs.kernel_ns == 6600.0
    assert costs.step_ns == 600.0
    # llMaxBw (87.7 GB/s on one node) shared by the communicator's 24 channels.
    assert costs.block_bytes_per_ns == pytest.approx(87.7 / 24)
    assert costs.copy_ns(8772) == pytest.approx(2400.0, rel=1e-3)


def test_ll128_blocks_are_capped_per_channel_by_generation_and_simple_by_its_links() -> None:
    assert nccl_endpoint_costs("ring", "ll128", "hopper", 24).block_bytes_per_ns == 36.7
    assert nccl_endpoint_costs("ring", "ll128", "ampere", 24).block_bytes_per_ns == 20.0
    simple = nccl_endpoint_costs("ring", "simple", "ampere", 24)
    assert simple.block_bytes_per_ns == math.inf and simple.copy_ns(1 << 30) == 0.0
    assert (simple.kernel_ns, simple.step_ns) == (8400.0, 3400.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kernel_ns": -1.0, "step_ns": 0.0, "block_bytes_per_ns": 1.0}, "finite"),
        ({"kernel_ns": 0.0, "step_ns": 0.0, "block_bytes_per_ns": 0.0}, "block_bytes"),
    ],
)
def test_impossible_costs_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EndpointCosts(**kwargs)


def test_the_generation_follows_the_compute_capability() -> None:
    assert [generation_of(c) for c in (7.0, 7.5, 8.0, 8.6, 9.0, 10.0)] == [
        "volta",
        "volta",
        "ampere",
        "ampere",
        "hopper",
        "hopper",
    ]
    with pytest.raises(ValueError, match=r"7\.0"):
        generation_of(6.1)
