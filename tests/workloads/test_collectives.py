"""Collectives as messages on the fabric: structure, data, timing against the analytic bound.

Each test builds an idle fabric and a transport with no scheduled traffic, starts
collectives through the public API and runs the event loop, so every figure
checked here comes out of the simulated messages.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from idle_fabrics import idle_transport
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.config.collective_config import ALGORITHMS, OPERATIONS
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import load_scenario
from sitssim.simulation import simulate
from sitssim.workloads.collectives import (
    REDUCES,
    CollectiveHandle,
    bus_factor,
    chunk_sizes,
    double_binary_tree,
    ring_all_reduce_lower_bound_ns,
    start_collective,
)

ROOT = Path(__file__).resolve().parents[2]
NVSWITCH = {"kind": "nvswitch", "gpus": 8}
NVLINK = {"rate": "64GT/s", "lanes": 3}
FAT_TREE = {"kind": "fat_tree", "gpus": 4, "levels": 1, "radix": 4, "root_complex": False}


def idle(topology: dict[str, Any], link: dict[str, Any] | None = None) -> tuple[Fabric, Transport]:
    data: dict[str, Any] = {"name": "idle", "duration": "1us", "topology": topology}
    if link is not None:
        data["links"] = {"default": link}
    return idle_transport(data)


def run_all_reduce(
    size: int, algorithm: str = "ring", topology: dict = NVSWITCH, **kwargs: Any
) -> tuple[Fabric, Transport, CollectiveHandle]:
    fabric, transport = idle(topology, NVLINK)
    handle = start_collective("all_reduce", transport, fabric.gpus, size, algorithm, **kwargs)
    transport.run()
    return fabric, transport, handle


def sent_by_rank(transport: Transport, handle: CollectiveHandle) -> list[int]:
    src = np.asarray(transport.src)[handle.messages]
    size = np.asarray(transport.size)[handle.messages]
    return [int(size[src == transport.node_id[g]].sum()) for g in handle.gpus]


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_ring_all_reduce_sends_2_n_minus_1_chunks_per_rank(n: int) -> None:
    size = 10_007
    fabric, transport = idle({"kind": "nvswitch", "gpus": n}, NVLINK)
    handle = start_collective("all_reduce", transport, fabric.gpus, size, max_message_bytes=512)
    transport.run()
    assert handle.chunk_sends == 2 * (n - 1) * n
    # Splitting never changes what is sent, only into how many messages.
    pieces = np.asarray(transport.size)[handle.messages]
    assert pieces.max() <= 512
    chunks = chunk_sizes(size, n)
    # Every chunk travels 2(N-1) times around the ring (N-1 to reduce, N-1 to gather).
    assert len(handle.messages) == 2 * (n - 1) * sum(-(-c // 512) for c in chunks)
    per_rank = sent_by_rank(transport, handle)
    assert per_rank == [2 * size - chunks[r] - chunks[(r + 1) % n] for r in range(n)]


def test_every_rank_ends_with_every_contribution_and_not_before_the_end() -> None:
    fabric, transport = idle(NVSWITCH, NVLINK)
    handle = start_collective("all_reduce", transport, fabric.gpus, 1 << 20)
    transport.env.run(until=transport.env.now + 1000.0)
    assert not handle.done
    assert not handle.result_complete()
    transport.run()
    full = (1 << 8) - 1
    assert handle.contributions == [[full] * 8 for _ in range(8)]
    assert handle.result_complete()


def test_reduce_scatter_leaves_each_rank_only_its_own_slice_reduced() -> None:
    fabric, transport = idle(NVSWITCH, NVLINK)
    handle = start_collective("reduce_scatter", transport, fabric.gpus, 4096)
    transport.run()
    full = (1 << 8) - 1
    assert handle.result_complete()
    assert handle.chunk_sends == 8 * 7
    for r, row in enumerate(handle.contributions):
        assert row[r] == full
        assert all(mask != full for c, mask in enumerate(row) if c != r)


def test_all_gather_gives_every_rank_every_slice_unreduced() -> None:
    fabric, transport = idle(NVSWITCH, NVLINK)
    handle = start_collective("all_gather", transport, fabric.gpus, 4096, algorithm="direct")
    transport.run()
    assert handle.chunk_sends == 8 * 7
    assert handle.contributions == [[1 << c for c in range(8)] for _ in range(8)]
    assert handle.result_complete()


@pytest.mark.parametrize("topology", [NVSWITCH, FAT_TREE], ids=["nvswitch", "fat_tree"])
@pytest.mark.parametrize("size", [8, 3000, 1 << 20])
def test_ring_duration_is_never_below_the_analytic_bound(topology: dict, size: int) -> None:
    fabric, _, handle = run_all_reduce(size, topology=topology)
    bound = ring_all_reduce_lower_bound_ns(fabric, fabric.gpus, size)
    assert bound > 0
    assert handle.duration_ns >= bound * (1 - 1e-12)


def test_ring_approaches_the_bound_as_the_buffer_grows_on_an_idle_fabric() -> None:
    # What the bound leaves out, one message's extra hop and the path latency per step,
    # is fixed per step, so its share falls as the chunks grow.
    ratios = []
    for size in (1 << 16, 1 << 20, 1 << 24, 1 << 25):
        fabric, _, handle = run_all_reduce(
            size, topology={"kind": "nvswitch", "gpus": 4}, max_message_bytes=1 << 14
        )
        ratios.append(
            handle.duration_ns / ring_all_reduce_lower_bound_ns(fabric, fabric.gpus, size)
        )
    assert ratios == sorted(ratios, reverse=True)
    assert ratios[-1] >= 1.0
    assert ratios[-1] - 1 < (ratios[-2] - 1) * 0.6
    assert ratios[-1] < 1.02


def test_algorithms_agree_on_the_result() -> None:
    results = {}
    for algorithm in ALGORITHMS:
        _, _, handle = run_all_reduce(50_000, algorithm, min_messages=4)
        assert handle.result_complete(), algorithm
        results[algorithm] = [
            np.bitwise_or.reduce(np.asarray(row, dtype=object)) for row in handle.contributions
        ]
    assert all(r == results["ring"] for r in results.values())


def test_chunk_sends_per_algorithm() -> None:
    n = 8
    counts = {a: run_all_reduce(4096, a)[2].chunk_sends for a in ("ring", "direct", "one_shot")}
    assert counts == {"ring": 2 * (n - 1) * n, "direct": 2 * n * (n - 1), "one_shot": n * (n - 1)}
    _, _, tree = run_all_reduce(4096, "tree")
    # Two trees, one segment each: every edge once up and once down.
    assert tree.chunk_sends == 2 * 2 * (n - 1)


def test_on_done_fires_once_when_the_last_rank_is_served() -> None:
    calls: list[float] = []
    _, transport, handle = run_all_reduce(1 << 16, "tree", on_done=calls.append)
    assert calls == [handle.end_ns]
    assert handle.end_ns == max(handle.rank_done_ns)
    delivered = np.asarray(transport.t_deliver)[handle.messages]
    assert handle.end_ns == delivered.max()


def test_a_slow_reduction_stretches_the_reduce_steps() -> None:
    size = 1 << 20
    _, _, free = run_all_reduce(size, max_message_bytes=1 << 16)
    slow_bw = 10.0
    _, _, slow = run_all_reduce(size, max_message_bytes=1 << 16, reduce_bytes_per_ns=slow_bw)
    # N-1 reduce-scatter steps each reduce a chunk, one after another on the critical path.
    reductions = 7 * 3 * (size // 8) / slow_bw
    assert slow.duration_ns >= reductions
    assert slow.duration_ns > free.duration_ns + 0.5 * reductions


@pytest.mark.parametrize("n", list(range(1, 34)))
def test_double_binary_tree_is_two_spanning_trees_with_disjoint_leaves(n: int) -> None:
    trees = double_binary_tree(n)
    leaves = []
    for parent in trees:
        assert sorted(parent).count(-1) == 1
        for r in range(n):
            seen = set()
            while parent[r] >= 0:
                assert r not in seen
                seen.add(r)
                r = parent[r]
        leaves.append({r for r in range(n) if r not in parent})
    if n > 1:
        assert not leaves[0] & leaves[1]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t, g: start_collective("all_gather", t, g, 64, "tree"), "all_reduce only"),
        (lambda t, g: start_collective("all_reduce", t, [*g[:2], "nvs0"], 64), "not a GPU"),
        (lambda t, g: start_collective("all_reduce", t, [g[0], g[0]], 64), "once"),
        (lambda t, g: start_collective("all_reduce", t, g, 0), "at least 1"),
        (lambda t, g: start_collective("all_reduce", t, g, 64, "butterfly"), "unknown algorithm"),
        (lambda t, g: start_collective("broadcast", t, g, 64), "unknown operation"),
        (
            lambda t, g: start_collective("all_gather", t, g, 64, reduce_bytes_per_ns=1.0),
            "reduces nothing",
        ),
    ],
)
def test_bad_arguments_are_refused(call: Any, message: str) -> None:
    fabric, transport = idle(NVSWITCH, NVLINK)
    with pytest.raises(ValueError, match=message):
        call(transport, fabric.gpus)


@pytest.mark.parametrize(
    ("operation", "sends", "ends_with"),
    [
        # Ring: N-1 reduce steps then N-1 gather steps; every rank ends with every chunk.
        ("all_reduce", 2 * 7 * 8, lambda r, c: (1 << 8) - 1),
        # Only the gather steps: chunk c holds rank c's contribution alone, everywhere.
        ("all_gather", 7 * 8, lambda r, c: 1 << c),
        # Only the reduce steps: rank r's own slice r is fully reduced (checked below).
        ("reduce_scatter", 7 * 8, None),
    ],
)
def test_one_starter_runs_each_operation_as_its_table_says(
    operation: str, sends: int, ends_with: Any
) -> None:
    fabric, transport = idle(NVSWITCH, NVLINK)
    done: list[float] = []
    reduce_bw = 10.0 if REDUCES[operation] else None
    handle = start_collective(
        operation, transport, fabric.gpus, 8192, on_done=done.append, reduce_bytes_per_ns=reduce_bw
    )
    transport.run()
    assert handle.operation == operation and handle.algorithm == "ring"
    assert done == [handle.end_ns] and handle.result_complete()
    assert handle.chunk_sends == sends
    full = (1 << 8) - 1
    if ends_with is None:
        assert all(row[r] == full for r, row in enumerate(handle.contributions))
        assert not all(mask == full for row in handle.contributions for mask in row)
    else:
        assert handle.contributions == [[ends_with(r, c) for c in range(8)] for r in range(8)]


def test_a_reducing_operation_spends_its_reduction_time() -> None:
    """The reduction bandwidth reaches the driver of each operation that reduces."""
    for operation in [op for op in OPERATIONS if REDUCES[op]]:
        times = []
        for bw in (None, 1.0):
            fabric, transport = idle(NVSWITCH, NVLINK)
            handle = start_collective(
                operation, transport, fabric.gpus, 1 << 16, reduce_bytes_per_ns=bw
            )
            transport.run()
            times.append(handle.duration_ns)
        assert times[1] > times[0], operation


def test_bus_factor_follows_nccl_tests() -> None:
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 8) == pytest.approx(7 / 8)


# --- the workload, end to end ---------------------------------------------------

SWEEP_SCENARIO = """\
version: 1
name: sweep
duration: 1us
topology: {kind: nvswitch, gpus: 4}
links: {default: {rate: 64GT/s, lanes: 3}}
workloads:
  - kind: collective
    name: ar
    sweep: {min: 1KiB, max: 64KiB, factor: 4}
    repetitions: 2
    gap: 100ns
    start: 2us
"""


def test_collective_workload_runs_back_to_back_and_fills_the_table(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP_SCENARIO)
    result = simulate(load_scenario(path))
    table = result.tables["collectives"]
    assert list(table["bytes"]) == [s for s in (1024, 4096, 16384, 65536) for _ in range(2)]
    assert table["t_start_ns"].iloc[0] == 2000.0
    gaps = table["t_start_ns"].to_numpy()[1:] - table["t_end_ns"].to_numpy()[:-1]
    assert np.allclose(gaps, 100.0)
    assert (table["duration_ns"] >= table["lower_bound_ns"]).all()
    assert table["result_complete"].all()
    algbw = table["bytes"] / table["duration_ns"]
    assert np.allclose(table["busbw_GBps"], algbw * 2 * 3 / 4)
    messages = result.tables["messages"]
    assert len(messages) == table["messages"].sum()
    assert result.metrics["collectives"]["count"] == len(table)


runner = CliRunner()


@pytest.mark.parametrize(
    ("body", "field", "expected"),
    [
        ("    sizes: [1KiB]\n    gpus: [gpu0, gpu9]\n", "workloads[0].gpus[1]", "unknown node"),
        ("    sizes: [1KiB]\n    gpus: [gpu0, nvs1]\n", "workloads[0].gpus[1]", "not a GPU"),
        ("    sizes: [1KiB]\n    sweep: {min: 1KiB, max: 2KiB}\n", "workloads[0]", "exactly one"),
        ("    sweep: {min: 4KiB, max: 2KiB}\n", "workloads[0].sweep.max", "at least 'min'"),
        (
            "    sizes: [1KiB]\n    operation: all_gather\n    algorithm: tree\n",
            "workloads[0].algorithm",
            "all_reduce only",
        ),
        ("    sizes: [1KiB]\n    reduction_bandwidth: 3TB\n", "workloads[0]", "bandwidth"),
        ("    sizes: [1KiB]\n    gpus: [gpu1, gpu1]\n", "workloads[0].gpus[1]", "twice"),
    ],
)
def test_bad_collective_input_exits_2_naming_the_field(
    tmp_path: Path, body: str, field: str, expected: str
) -> None:
    text = (
        "version: 1\nname: bad\nduration: 1us\ntopology: {kind: nvswitch, gpus: 4}\n"
        "workloads:\n  - kind: collective\n" + body
    )
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    for command in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "o")]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, result.output
        assert field in result.output
        assert expected in result.output
    assert not (tmp_path / "o").exists()


def test_the_hgx_h100_scenario_is_nvlink4_class() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "hgx_h100.yaml")
    fabric = build_fabric(scenario)
    per_gpu = [sum(c.bytes_per_ns for c in fabric.channels if c.src == g) for g in fabric.gpus]
    per_link = [c.bytes_per_ns / c.links for c in fabric.channels if c.src in fabric.gpus]
    # NVLink4: 18 links of ~25 GB/s per direction, 450 GB/s per GPU.
    assert len(fabric.gpus) == 8
    assert all(math.isclose(p, per_gpu[0]) for p in per_gpu)
    assert sum(c.links for c in fabric.channels if c.src == fabric.gpus[0]) == 18
    assert 20 <= min(per_link) <= max(per_link) <= 30
