"""Endpoint costs taken from the inputs of NCCL 2.20.3's cost model (docs/ccl_sources.md §1).

The expected rates are worked out here from the model's tables, not by its own functions."""

from __future__ import annotations

import math

import pytest

from sitssim.ccl.endpoint import EndpointCosts, nccl_endpoint_costs
from sitssim.ccl.search import ring_search
from sitssim.ccl.tuning import NCCL_2_20, generation_of

H100 = ring_search(18, "hopper")
A100 = ring_search(12, "ampere")


def test_the_searches_are_the_ones_the_rates_below_assume() -> None:
    assert (H100.channels, H100.per_channel_GBps) == (12, 30.0)
    assert (A100.channels, A100.per_channel_GBps) == (12, 20.0)


def test_a_ring_ll_call_pays_the_base_latency_once_and_the_nvlink_latency_per_step() -> None:
    costs = nccl_endpoint_costs(NCCL_2_20, "ring", "ll", "all_reduce", H100, "hopper", 24)
    assert costs.kernel_ns == 6600.0
    assert costs.step_ns == 600.0
    # A quarter of 12 x 30 GB/s, capped at llMaxBw (87.7 GB/s), over the 24 running blocks.
    assert costs.block_bytes_per_ns == pytest.approx(87.7 / 24)
    assert costs.copy_ns(8772) == pytest.approx(2400.0, rel=1e-3)


def test_a_block_moves_at_most_one_channels_estimate_and_the_blocks_together_the_bus() -> None:
    # H100, LL: a quarter of one search channel's 30 GB/s is 7.5 GB/s, however few blocks run;
    # 24 blocks share the bus (a quarter of 12 x 30, capped at llMaxBw: 87.7 GB/s).
    one = nccl_endpoint_costs(NCCL_2_20, "ring", "ll", "all_reduce", H100, "hopper", 1)
    eight = nccl_endpoint_costs(NCCL_2_20, "ring", "ll", "all_reduce", H100, "hopper", 8)
    many = nccl_endpoint_costs(NCCL_2_20, "ring", "ll", "all_reduce", H100, "hopper", 24)
    assert one.block_bytes_per_ns == pytest.approx(7.5)
    assert eight.block_bytes_per_ns == pytest.approx(7.5)
    assert many.block_bytes_per_ns == pytest.approx(87.7 / 24)
    # A100: a quarter of 20 GB/s a block; 2 blocks are far from the bus (a quarter of 240).
    a100 = nccl_endpoint_costs(NCCL_2_20, "ring", "ll", "all_reduce", A100, "ampere", 2)
    assert a100.block_bytes_per_ns == pytest.approx(5.0)
    # LL128 on one block: 92 % of a channel's 30 GB/s, under Hopper's 36.7 per channel.
    ll128 = nccl_endpoint_costs(NCCL_2_20, "ring", "ll128", "all_reduce", H100, "hopper", 1)
    assert ll128.block_bytes_per_ns == pytest.approx(0.92 * 30)


def test_ll128_and_simple_blocks_share_their_protocols_bus_bandwidth() -> None:
    # LL128: 92 % of the search's bandwidth, capped at 36.7 (Hopper) or 20 (Ampere) GB/s per
    # search channel; Simple: the search's bandwidth.
    ll128 = nccl_endpoint_costs(NCCL_2_20, "ring", "ll128", "all_reduce", H100, "hopper", 24)
    assert ll128.block_bytes_per_ns == pytest.approx(0.92 * 360 / 24)
    ll128 = nccl_endpoint_costs(NCCL_2_20, "ring", "ll128", "all_reduce", A100, "ampere", 24)
    assert ll128.block_bytes_per_ns == pytest.approx(0.92 * 240 / 24)
    simple = nccl_endpoint_costs(NCCL_2_20, "ring", "simple", "all_reduce", A100, "ampere", 24)
    assert simple.block_bytes_per_ns == pytest.approx(10.0)
    assert (simple.kernel_ns, simple.step_ns) == (8400.0, 3400.0)


def test_nvls_pays_its_latency_once_and_simples_handshake_per_step() -> None:
    nvls = nccl_endpoint_costs(NCCL_2_20, "nvls", "simple", "all_reduce", H100, "hopper", 16)
    assert (nvls.kernel_ns, nvls.step_ns) == (23_000.0, 3400.0)
    assert nvls.block_bytes_per_ns == math.inf and nvls.copy_ns(1 << 30) == 0.0


def test_a_call_on_no_channel_is_refused() -> None:
    with pytest.raises(ValueError, match="channels"):
        nccl_endpoint_costs(NCCL_2_20, "ring", "ll", "all_reduce", H100, "hopper", 0)


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
