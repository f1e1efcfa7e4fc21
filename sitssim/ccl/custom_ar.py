"""A serving engine's custom all-reduce: which kernel runs a call, and its endpoint costs.

vLLM's ``CustomAllreduce::allreduce`` (``csrc/custom_all_reduce.cuh``) runs the one-shot
kernel on two GPUs, and on a fully connected node below 512 KiB for up to four GPUs and
below 256 KiB for up to eight; otherwise the two-shot kernel (``docs/ccl_sources.md`` §7).
``vllm/distributed/device_communicators/custom_all_reduce.py`` hands NCCL every call above
its buffer, 8 MiB by default. The kernels and their barriers are in
``sitssim.workloads.custom_allreduce``.

Two of their costs have no published figure and are the scenario's to give (each shipped
scenario says what it fitted them on): the kernel's fixed cost and its load rate. The
third, a poll seeing a peer's flag, is NCCL's own estimate of the same act under LL, a flag
polled across NVLink: ``hwLat`` for ring LL (NCCL 2.20.3 ``src/graph/tuning.cc``).
"""

from __future__ import annotations

from sitssim.ccl.endpoint import NS_PER_US, EndpointCosts
from sitssim.ccl.tuning import NCCL_2_20
from sitssim.config.collective_config import CUSTOM_MAX_BYTES

ONE_SHOT = "custom_one_shot"
TWO_SHOT = "custom_two_shot"
CUSTOM_ALGORITHMS = (ONE_SHOT, TWO_SHOT)

_ONE_SHOT_BELOW = ((4, 512 * 1024), (8, 256 * 1024))
"""(up to this many GPUs, one-shot below this many bytes), in vLLM's order."""

FLAG_POLL_NS = NCCL_2_20.hw_latency_us["nvlink"][("ring", "ll")] * NS_PER_US
"""A poll seeing a peer's flag: NCCL's per-hop latency of LL on NVLink (0.6 µs in every
release ``ccl.tuning`` models)."""


def custom_algorithm(n_ranks: int, n_bytes: int) -> str | None:
    """The kernel vLLM runs for an all-reduce of ``n_bytes`` over ``n_ranks`` fully connected
    GPUs, or None where it hands the call to NCCL."""
    if n_ranks < 2 or n_bytes < 1:
        raise ValueError(f"need n_ranks >= 2 and n_bytes >= 1, got {n_ranks}, {n_bytes}")
    if n_bytes > CUSTOM_MAX_BYTES:
        return None
    if n_ranks == 2:
        return ONE_SHOT
    if any(n_ranks <= gpus and n_bytes < below for gpus, below in _ONE_SHOT_BELOW):
        return ONE_SHOT
    return TWO_SHOT


def custom_costs(kernel_ns: float, load_bytes_per_ns: float) -> EndpointCosts:
    """The endpoint costs of a custom all-reduce kernel: the given fixed cost and load rate,
    and NCCL's LL flag latency for each barrier's poll."""
    return EndpointCosts(
        kernel_ns=kernel_ns, step_ns=FLAG_POLL_NS, block_bytes_per_ns=load_bytes_per_ns
    )
