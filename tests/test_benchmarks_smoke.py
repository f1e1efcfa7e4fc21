"""The transport benchmark runs, and its naive SimPy model computes what sitssim computes.

Correctness only: nothing here looks at wall time.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from sitssim.fabric.oracles import zero_load_latency_ns

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_transport.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_transport", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve their module through sys.modules while the class body runs.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_naive_model_matches_sitssim_latency(bench: ModuleType) -> None:
    setup = bench.build(messages=600, load=0.97, seed=3)
    _, _, sitssim_latency = bench.time_sitssim(setup)
    _, _, naive_latency = bench.time_naive(setup)
    assert len(sitssim_latency) == len(naive_latency) == len(setup.schedule) > 0
    schedule, nodes, router = setup.schedule, setup.nodes, setup.router
    route_ids = np.array(
        [
            router.route(nodes[s], nodes[d]).id
            for s, d in zip(schedule.src, schedule.dst, strict=True)
        ]
    )
    zero_load = zero_load_latency_ns(setup.fabric, router.routes, route_ids, schedule.size)
    # Queueing only adds: no message of either model beats its empty-fabric latency.
    assert np.all(naive_latency >= zero_load * (1 - 1e-9))
    assert np.all(sitssim_latency >= zero_load * (1 - 1e-9))
    # The load must really queue, or matching means would only compare zero-load sums.
    assert sitssim_latency.mean() > 1.2 * zero_load.mean()
    assert naive_latency.mean() == pytest.approx(sitssim_latency.mean(), rel=0.01)


def test_main_reports_figures_and_exits_zero(bench: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    code = bench.main(["--messages", "300", "--repeats", "1", "--json", str(out)])
    figures = json.loads(out.read_text())
    assert code == 0
    assert figures["latency_match"] is True
    assert figures["messages"] > 0
    # Every message crosses at least its GPU's uplink and the destination's downlink.
    assert figures["hop_events"] >= 2 * figures["messages"]
    for key in ("sitssim_hop_events_per_s", "naive_hop_events_per_s", "bare_timeouts_per_s"):
        assert figures[key] > 0


def test_link_layer_benchmark_runs_both_configurations(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = BENCH.with_name("bench_link_layer.py")
    spec = importlib.util.spec_from_file_location("bench_link_layer", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    assert module.main(["--messages", "300", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "flits+credits" in out and "ratio" in out


def test_scale_benchmark_counts_hop_events_and_reports_its_ratio(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_scale", BENCH.parent / "bench_scale.py")
    assert spec is not None and spec.loader is not None
    scale = importlib.util.module_from_spec(spec)
    # Each size runs in a spawned process, which finds ``measure`` by its module's name.
    sys.modules[spec.name] = scale
    spec.loader.exec_module(scale)
    out = tmp_path / "scale.json"
    code = scale.main(["--gpus", "64", "128", "--duration", "0.5us", "--json", str(out)])
    figures = json.loads(out.read_text())
    assert code == 0
    small, large = figures["rows"]
    assert (small["gpus"], large["gpus"]) == (64, 128)
    # Hop-events are what delivered messages crossed: at least one link each, at most four.
    for row in (small, large):
        assert row["messages"] <= row["hop_events"] <= 4 * row["messages"]
        assert row["phase_wall_s"]["simulate"] > 0
    assert figures["ratio"] == pytest.approx(
        large["simulate_us_per_hop_event"] / small["simulate_us_per_hop_event"]
    )


def test_switch_benchmark_runs_both_models_on_one_workload(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_switch", BENCH.parent / "bench_switch.py")
    assert spec is not None and spec.loader is not None
    switch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(switch)
    out = tmp_path / "switch.json"
    assert switch.main(["--messages", "400", "--pairs", "2", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert len(figures["ratios"]) == 2
    # Both models delivered every message (checked by the script), and the figure is the
    # median of the pairs' ratios.
    assert all(r > 0 for r in figures["ratios"])
    assert figures["ratio"] == pytest.approx(sum(figures["ratios"]) / 2)
