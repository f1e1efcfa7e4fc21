"""nccl-tests' timed loop: calls enqueued by the host ahead of the GPUs, each GPU's stream in
order, so the loop runs at the pace of the slower side."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError

from sitssim.ccl.endpoint import nccl_endpoint_costs
from sitssim.ccl.search import ring_search
from sitssim.ccl.tuning import NCCL_2_20
from sitssim.config.collective_config import CollectiveWorkload, HostLaunch
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate
from sitssim.workloads.host_launch import enqueued_ns, issue_started_ns

H100_RINGS = ring_search(18, "hopper")
"""What NCCL's search finds on an H100's 18 NVLinks (12 channels at 30 GB/s)."""

LL_KERNEL_NS = nccl_endpoint_costs(
    NCCL_2_20, "ring", "ll", "all_reduce", H100_RINGS, "hopper", 1
).kernel_ns


def run(gpus: int, sizes: list[str], reps: int, host: dict[str, Any] | None) -> pd.DataFrame:
    wl: dict[str, Any] = {
        "kind": "collective",
        "algorithm": "ring",
        "protocol": "auto",
        "sizes": sizes,
        "repetitions": reps,
    }
    if host is not None:
        wl["host"] = host
    data = {
        "name": "h",
        "duration": "1us",
        "topology": {"kind": "nvswitch", "gpus": gpus, "planes": 4, "links_per_gpu": 18},
        "links": {"default": {"rate": "64GT/s", "lanes": 3}},
        "workloads": [wl],
    }
    return simulate(scenario_from_data(data)).tables["collectives"]


def periods_us(table: pd.DataFrame) -> list[float]:
    ends = table["t_end_ns"].to_numpy()
    return [round((b - a) / 1e3, 3) for a, b in pairwise(ends)]


def test_one_host_thread_paces_small_calls_at_one_enqueue_per_gpu() -> None:
    table = run(4, ["8B"], 4, {"threads": "one", "enqueue": "10us"})
    assert periods_us(table) == [40.0, 40.0, 40.0]
    assert table["result_complete"].all()


def test_a_process_per_gpu_paces_them_at_one_enqueue() -> None:
    table = run(4, ["8B"], 4, {"threads": "per_gpu", "enqueue": "20us"})
    assert periods_us(table) == [20.0, 20.0, 20.0]


def test_the_first_call_ends_only_after_its_last_gpu_is_enqueued_and_its_kernel_ran() -> None:
    table = run(8, ["8B"], 1, {"threads": "one", "enqueue": "5us"})
    assert table["t_start_ns"].iloc[0] == 0.0
    assert table["t_end_ns"].iloc[0] > 8 * 5000 + LL_KERNEL_NS


def test_when_the_gpus_are_slower_calls_follow_each_other_on_every_stream() -> None:
    # 64 MiB takes far longer than eight 1 ns enqueues: each GPU runs its calls in turn.
    host = run(8, ["64MiB"], 3, {"threads": "one", "enqueue": "1ns"})
    lone = run(8, ["64MiB"], 1, None)["duration_ns"].iloc[0]
    for period in periods_us(host):
        assert period * 1e3 == pytest.approx(lone, rel=0.05)
    # No call can be faster than a lone one, even with its start staggered by the host.
    assert (host["t_end_ns"].diff().dropna() > 0.9 * lone).all()


def test_without_a_host_calls_run_one_after_the_other_with_no_launch_cost() -> None:
    table = run(4, ["8B"], 3, None)
    starts, ends = table["t_start_ns"].to_numpy(), table["t_end_ns"].to_numpy()
    assert list(starts[1:]) == list(ends[:-1])


def test_enqueue_times_follow_the_thread_layout() -> None:
    one = HostLaunch(threads="one", enqueue="2ns")
    each = HostLaunch(threads="per_gpu", enqueue="2ns")
    assert [enqueued_ns(one, 4, 1, r) for r in range(4)] == [10.0, 12.0, 14.0, 16.0]
    assert [enqueued_ns(each, 4, 1, r) for r in range(4)] == [4.0, 4.0, 4.0, 4.0]
    assert issue_started_ns(one, 4, 2) == 16.0
    assert issue_started_ns(each, 4, 2) == 4.0


def test_a_group_cost_is_paid_once_per_call_per_thread_not_per_gpu() -> None:
    # One thread: 6 us of group work plus four 10 us enqueues a call; a process per GPU
    # pays the group work and its own enqueue.
    one = run(4, ["8B"], 4, {"threads": "one", "group": "6us", "enqueue": "10us"})
    each = run(4, ["8B"], 4, {"threads": "per_gpu", "group": "6us", "enqueue": "20us"})
    assert periods_us(one) == [46.0, 46.0, 46.0]
    assert periods_us(each) == [26.0, 26.0, 26.0]


def test_the_group_work_comes_before_the_first_launch_of_a_call() -> None:
    one = HostLaunch(threads="one", group="3ns", enqueue="2ns")
    each = HostLaunch(threads="per_gpu", group="3ns", enqueue="2ns")
    assert [enqueued_ns(one, 4, 1, r) for r in range(4)] == [16.0, 18.0, 20.0, 22.0]
    assert [enqueued_ns(each, 4, 1, r) for r in range(4)] == [10.0, 10.0, 10.0, 10.0]
    assert issue_started_ns(one, 4, 2) == 22.0
    assert issue_started_ns(each, 4, 2) == 10.0


def test_a_negative_group_cost_is_refused() -> None:
    with pytest.raises(ValidationError, match="group"):
        HostLaunch(threads="one", group="-1us", enqueue="4us")


def test_a_host_needs_a_kernel_to_launch() -> None:
    with pytest.raises(ValidationError, match="'host' launches NCCL kernels"):
        CollectiveWorkload(
            kind="collective", sizes=["8B"], host={"threads": "one", "enqueue": "4us"}
        )
