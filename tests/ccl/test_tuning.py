"""NCCL's modelled latencies against the worked example of docs/ccl_sources.md §1.9 (8 GPUs,
one NVSwitch node, all-reduce, NCCL 2.20.3) and the DGX-A100 step count."""

from __future__ import annotations

import pytest

from sitssim.ccl.tuning import latency_us, ring_steps


@pytest.mark.parametrize(
    ("algorithm", "protocol", "expected"),
    [
        ("ring", "ll", 15.0),
        ("ring", "ll128", 40.6),
        ("ring", "simple", 56.0),
        ("tree", "ll", 15.2),
        ("tree", "ll128", 31.5),
        ("tree", "simple", 392.0),
        ("nvls", "simple", 23.0),
    ],
)
def test_eight_gpu_all_reduce_latencies(algorithm: str, protocol: str, expected: float) -> None:
    assert latency_us(algorithm, protocol, "all_reduce", 8, "nvlink") == pytest.approx(expected)


def test_ring_steps_per_operation() -> None:
    assert [ring_steps(op, 8) for op in ("all_reduce", "all_gather", "reduce_scatter")] == [
        14,
        7,
        7,
    ]
    assert ring_steps("broadcast", 8) == 8
    with pytest.raises(ValueError, match="operation"):
        ring_steps("all_to_all", 8)


def test_the_ring_latency_grows_by_one_step_latency_per_step_over_pci() -> None:
    two = latency_us("ring", "ll", "all_reduce", 2, "pci")
    eight = latency_us("ring", "ll", "all_reduce", 8, "pci")
    assert eight - two == pytest.approx(12 * 1.0)


@pytest.mark.parametrize(
    ("algorithm", "protocol", "operation"),
    [
        ("nvls", "ll", "all_reduce"),
        ("tree", "ll", "all_gather"),
        ("collnet_chain", "simple", "all_reduce"),
    ],
)
def test_what_nccl_does_not_model_is_refused(algorithm: str, protocol: str, operation: str) -> None:
    with pytest.raises(ValueError):
        latency_us(algorithm, protocol, operation, 8, "nvlink")
