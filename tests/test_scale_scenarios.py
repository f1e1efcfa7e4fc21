"""The scale scenarios (``scenarios/scale/``) load, pass the pre-run checks and are
estimated at what their full runs take. The runs themselves are too big for the suite
(``benchmarks/bench_memory_estimate.py`` runs them); the every-example test leaves the
folder out."""

from __future__ import annotations

from pathlib import Path

import pytest
from shipped_examples import EXAMPLES

from sitssim.errors import InputError
from sitssim.estimate import MEMORY_ENV
from sitssim.preflight import preflight
from sitssim.scenario import load_scenario

SCALE = Path(__file__).resolve().parents[1] / "scenarios" / "scale"
GIB = 2**30


def test_the_scale_folder_is_not_among_the_every_example_runs() -> None:
    assert sorted(SCALE.glob("*.yaml")) == [SCALE / "fat_tree_1024gpu.yaml", SCALE / "nvl72.yaml"]
    assert not any(p.parent == SCALE for p in EXAMPLES)


def test_the_1024_gpu_fat_tree_is_estimated_at_its_permutation_and_under_4_gib() -> None:
    check = preflight(load_scenario(SCALE / "fat_tree_1024gpu.yaml"))
    assert len(check.fabric.gpus) == 1024
    # 2 MiB per GPU in 4 KiB messages, beside the clock-sync exchanges.
    data = 1024 * 512
    assert data < check.estimate.messages < 1.5 * data
    # Its full run peaked at 1.3 GB resident (43 s on 2 cores).
    assert 0.65 * GIB < check.estimate.memory_bytes < 4 * GIB


def test_the_nvl72_rack_is_nine_tp8_groups_over_18_switch_chips() -> None:
    scenario = load_scenario(SCALE / "nvl72.yaml")
    check = preflight(scenario)
    assert len(check.fabric.gpus) == 72 and len(check.fabric.switches) == 18
    groups = [wl.gpus for wl in scenario.workloads if wl.kind == "inference"]
    assert len(groups) == 9 and all(len(g) == 8 for g in groups)
    assert sorted(g for group in groups for g in group) == sorted(check.fabric.gpus)
    # Its full run delivered 2.1 M messages and peaked at 1.8 GB resident.
    assert 1.0e6 < check.estimate.messages < 4.0e6
    assert 0.9 * GIB < check.estimate.memory_bytes < 3.6 * GIB


@pytest.mark.parametrize("name", ["fat_tree_1024gpu.yaml", "nvl72.yaml"])
def test_a_scale_scenario_is_refused_where_memory_is_short(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MEMORY_ENV, "512MB")
    with pytest.raises(InputError, match="this run needs about"):
        preflight(load_scenario(SCALE / name))
