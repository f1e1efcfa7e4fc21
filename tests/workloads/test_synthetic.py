"""Synthetic traffic: destination patterns, rates, arrivals, random streams."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.stages.schedule import scenario_schedule


def _fat_tree(gpus: int, workloads: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    return {
        "name": "patterns",
        "seed": seed,
        "duration": "10us",
        "topology": {"kind": "fat_tree", "gpus": gpus, "levels": 2, "radix": 4},
        "workloads": workloads,
    }


def _schedule(data: dict[str, Any]) -> tuple[pd.DataFrame, Fabric]:
    """The pre-drawn injections as a table with node names and GPU indices."""
    scenario = scenario_from_data(data)
    fabric = build_fabric(scenario)
    nodes = sorted(fabric.graph)
    schedule = scenario_schedule(scenario, fabric, {n: i for i, n in enumerate(nodes)})
    gpu_index = {g: i for i, g in enumerate(fabric.gpus)}
    table = pd.DataFrame(
        {
            "t": schedule.t_ns,
            "src": [nodes[i] for i in schedule.src],
            "dst": [nodes[i] for i in schedule.dst],
            "bytes": schedule.size,
            "workload": schedule.workload,
        }
    )
    table["s"] = table["src"].map(gpu_index)
    table["d"] = table["dst"].map(gpu_index)
    return table, fabric


def _synthetic(pattern: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "synthetic",
        "pattern": pattern,
        "message_bytes": "1KiB",
        "interval": "100ns",
        **extra,
    }


def _destination_map(table: pd.DataFrame) -> dict[int, int]:
    grouped = table.groupby("s")["d"].unique()
    assert all(len(d) == 1 for d in grouped), "a fixed pattern sends each source to one place"
    return {int(s): int(d[0]) for s, d in grouped.items()}


# Hand-derived over GPU indices 0..7 (3 address bits); sources that map to
# themselves stay silent, so they are absent.
EIGHT_GPU_MAPS = {
    "tornado": {0: 3, 1: 4, 2: 5, 3: 6, 4: 7, 5: 0, 6: 1, 7: 2},
    "bit_complement": {0: 7, 1: 6, 2: 5, 3: 4, 4: 3, 5: 2, 6: 1, 7: 0},
    "shuffle": {1: 2, 2: 4, 3: 6, 4: 1, 5: 3, 6: 5},
    # With an odd number of bits, transpose rotates by floor(3/2) = 1 bit, like shuffle.
    "transpose": {1: 2, 2: 4, 3: 6, 4: 1, 5: 3, 6: 5},
}


@pytest.mark.parametrize("pattern", EIGHT_GPU_MAPS)
def test_fixed_patterns_on_eight_gpus(pattern: str) -> None:
    table, _ = _schedule(_fat_tree(8, [_synthetic(pattern)]))
    assert _destination_map(table) == EIGHT_GPU_MAPS[pattern]


def test_transpose_on_sixteen_gpus_transposes_a_four_by_four_grid() -> None:
    table, _ = _schedule(_fat_tree(16, [_synthetic("transpose")]))
    mapping = _destination_map(table)
    expected = {4 * r + c: 4 * c + r for r in range(4) for c in range(4) if r != c}
    assert mapping == expected


@pytest.mark.parametrize("seed", range(5))
def test_permutation_is_a_derangement(seed: int) -> None:
    table, _ = _schedule(_fat_tree(8, [_synthetic("permutation")], seed=seed))
    mapping = _destination_map(table)
    assert sorted(mapping) == list(range(8))
    assert sorted(mapping.values()) == list(range(8))
    assert all(s != d for s, d in mapping.items())


def test_permutation_changes_with_the_seed() -> None:
    maps = []
    for seed in range(5):
        table, _ = _schedule(_fat_tree(8, [_synthetic("permutation")], seed=seed))
        maps.append(_destination_map(table))
    assert any(m != maps[0] for m in maps[1:])


def test_uniform_random_never_sends_to_itself_and_covers_the_rest_evenly() -> None:
    table, _ = _schedule(_fat_tree(8, [_synthetic("uniform_random", interval="5ns")]))
    assert (table["s"] != table["d"]).all()
    for s, group in table.groupby("s"):
        counts = group["d"].value_counts().reindex([d for d in range(8) if d != s], fill_value=0)
        assert (counts > 0).all()
        assert stats.chisquare(counts.to_numpy()).pvalue > 1e-4


def test_hotspot_fraction() -> None:
    fraction = 0.3
    table, fabric = _schedule(
        _fat_tree(
            8,
            [_synthetic("hotspot", interval="5ns", hotspot="gpu5", hotspot_fraction=fraction)],
        )
    )
    n = len(fabric.gpus)
    assert (table["s"] != table["d"]).all()
    others = table[table["src"] != "gpu5"]
    # Hotspot messages plus the uniform remainder's share that lands on the hotspot.
    p = fraction + (1 - fraction) / (n - 1)
    hits = int((others["dst"] == "gpu5").sum())
    assert stats.binomtest(hits, len(others), p).pvalue > 1e-4
    # The hotspot itself sends uniformly to everyone else.
    own = table[table["src"] == "gpu5"]["d"].value_counts()
    assert len(own) == n - 1
    assert stats.chisquare(own.to_numpy()).pvalue > 1e-4


def _uneven_graph(workloads: list[dict[str, Any]]) -> dict[str, Any]:
    """GPUs with different injection bandwidths: a x16 link, a x4 link, and two x8 links."""
    return {
        "name": "uneven",
        "seed": 3,
        "duration": "50us",
        "topology": {
            "kind": "graph",
            "nodes": [{"id": "sw", "kind": "switch"}]
            + [{"id": g, "kind": "gpu"} for g in ("wide", "narrow", "dual")],
            "edges": [
                {"a": "wide", "b": "sw"},
                {"a": "narrow", "b": "sw", "link": "x4"},
                {"a": "dual", "b": "sw", "link": "x8"},
                {"a": "dual", "b": "wide", "link": "x8"},
            ],
        },
        "links": {
            "default": {"lanes": 16},
            "x4": {"lanes": 4},
            "x8": {"lanes": 8},
        },
        "workloads": workloads,
    }


@pytest.mark.parametrize("load", [0.2, 0.75, 1.4])
def test_load_sets_the_interval_from_the_sources_injection_bandwidth(load: float) -> None:
    size = 2048
    wl = {
        "kind": "synthetic",
        "pattern": "uniform_random",
        "arrivals": "periodic",
        "message_bytes": f"{size}B",
        "load": load,
    }
    table, fabric = _schedule(_uneven_graph([wl]))
    for src, group in table.groupby("src"):
        outgoing = sum(c.bytes_per_ns for c in fabric.channels if c.src == src)
        assert fabric.injection_bytes_per_ns[src] == pytest.approx(outgoing)
        gaps = np.diff(group["t"].to_numpy())
        np.testing.assert_allclose(gaps, size / (load * outgoing), rtol=1e-9)
    # The offered bytes per ns of each source is exactly load x its injection bandwidth.
    rates = table.groupby("src")["bytes"].sum() / 50_000.0
    for src, rate in rates.items():
        assert rate == pytest.approx(load * fabric.injection_bytes_per_ns[src], rel=0.01)


def test_poisson_load_matches_its_mean_and_is_memoryless() -> None:
    size, load = 1024, 0.6
    wl = {"kind": "synthetic", "pattern": "uniform_random", "message_bytes": "1KiB", "load": load}
    table, fabric = _schedule(_uneven_graph([wl]))
    for src, group in table.groupby("src"):
        mean = size / (load * fabric.injection_bytes_per_ns[src])
        gaps = np.diff(group["t"].to_numpy())
        assert abs(gaps.mean() - mean) < 5 * mean / np.sqrt(len(gaps))
        assert stats.kstest(gaps, "expon", args=(0, mean)).pvalue > 1e-4


def test_periodic_spacing_is_exact() -> None:
    wl = _synthetic(
        "pair",
        src="gpu1",
        dst="gpu6",
        arrivals="periodic",
        start="250ns",
        stop="3us",
        interval="70ns",
    )
    table, _ = _schedule(_fat_tree(8, [wl]))
    times = table["t"].to_numpy()
    assert times[0] == 250.0
    np.testing.assert_allclose(np.diff(times), 70.0, rtol=1e-12)
    assert times[-1] < 3000.0 <= times[-1] + 70.0
    assert set(zip(table["src"], table["dst"], strict=True)) == {("gpu1", "gpu6")}


def test_sources_draw_independent_streams() -> None:
    table, _ = _schedule(_fat_tree(8, [_synthetic("uniform_random", interval="20ns")]))
    gaps = [np.diff(g["t"].to_numpy())[:400] for _, g in table.groupby("s")]
    for a, b in pairwise(gaps):
        assert not np.array_equal(a, b)
        assert abs(stats.pearsonr(a, b).statistic) < 0.2


def test_identical_workloads_draw_different_streams() -> None:
    wl = _synthetic("uniform_random", interval="20ns")
    table, _ = _schedule(_fat_tree(8, [wl, wl]))
    first = table[(table["workload"] == 0) & (table["s"] == 2)]["t"].to_numpy()
    second = table[(table["workload"] == 1) & (table["s"] == 2)]["t"].to_numpy()
    n = min(len(first), len(second))
    assert not np.allclose(first[:n], second[:n])


def test_adding_a_workload_leaves_the_others_arrivals_unchanged() -> None:
    base = [_synthetic("uniform_random", interval="20ns"), _synthetic("permutation")]
    extra = _synthetic("hotspot", interval="15ns", hotspot="gpu2")
    alone, _ = _schedule(_fat_tree(8, base))
    joined, _ = _schedule(_fat_tree(8, [*base, extra]))
    assert (joined["workload"] == 2).sum() > 0
    for w in (0, 1):
        a = alone[alone["workload"] == w].sort_values(["s", "t"]).reset_index(drop=True)
        b = joined[joined["workload"] == w].sort_values(["s", "t"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b)


def test_the_seed_changes_the_streams() -> None:
    wl = [_synthetic("uniform_random", interval="20ns")]
    one, _ = _schedule(_fat_tree(8, wl, seed=1))
    two, _ = _schedule(_fat_tree(8, wl, seed=2))
    again, _ = _schedule(_fat_tree(8, wl, seed=1))
    pd.testing.assert_frame_equal(one, again)
    assert not one["t"].equals(two["t"])
