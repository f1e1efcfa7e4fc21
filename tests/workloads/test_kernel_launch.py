"""Kernel streams: when each kernel of a step starts, launched eagerly or as a graph."""

from __future__ import annotations

from sitssim.workloads.kernel_launch import (
    EagerLaunch,
    GraphLaunch,
    IdealLaunch,
    LaunchCosts,
)

COSTS = LaunchCosts(enqueue_ns=3.0, graph_ns=10.0, gap_ns=0.5)


def run(stream, durations: list[float], ready_ns: float = 0.0) -> list[tuple[float, float]]:
    """(start, end) of kernels run one after the other, each ready when the last ends."""
    out = []
    t = ready_ns
    for d in durations:
        start = stream.start(t)
        t = start + d
        out.append((start, t))
    return out


def test_eager_kernels_shorter_than_a_launch_start_one_launch_apart():
    starts = [s for s, _ in run(EagerLaunch(100.0, COSTS), [1.0, 1.0, 1.0], ready_ns=100.0)]
    assert starts == [103.5, 106.5, 109.5]


def test_eager_kernels_longer_than_a_launch_run_a_gap_apart_once_the_host_is_ahead():
    kernels = run(EagerLaunch(0.0, COSTS), [10.0, 10.0, 10.0])
    assert kernels == [(3.5, 13.5), (14.0, 24.0), (24.5, 34.5)]


def test_a_graph_starts_its_first_kernel_after_its_launch_and_the_rest_a_gap_apart():
    kernels = run(GraphLaunch(0.0, COSTS), [1.0, 1.0, 1.0])
    assert kernels == [(10.5, 11.5), (12.0, 13.0), (13.5, 14.5)]


def test_without_launch_costs_kernels_run_back_to_back():
    assert run(IdealLaunch(0.0, COSTS), [2.0, 3.0]) == [(0.0, 2.0), (2.0, 5.0)]
