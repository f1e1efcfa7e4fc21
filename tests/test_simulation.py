"""One run end to end through the Python API: determinism and seeds."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pandas as pd
import pytest

import sitssim
from sitssim.results.report import report_json
from sitssim.scenario import Scenario, scenario_from_data
from sitssim.simulation import RunResult, simulate
from sitssim.spec.registry import CLAUSES


def _small_fat_tree(seed: int) -> dict[str, Any]:
    return {
        "name": "small_fat_tree",
        "seed": seed,
        "duration": "10us",
        "topology": {"kind": "fat_tree", "gpus": 8, "levels": 2, "radix": 4, "spines": 4},
        "root_complex": {"tso_window": "2us"},
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "uniform_random",
                "message_bytes": "2KiB",
                "load": 0.5,
            },
            {"kind": "probes", "interval": "500ns"},
        ],
    }


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return scenario_from_data(_small_fat_tree(seed=5))


@pytest.fixture(scope="module")
def first(scenario: Scenario) -> RunResult:
    return simulate(scenario)


def test_same_scenario_and_seed_give_byte_identical_reports(
    scenario: Scenario, first: RunResult
) -> None:
    again = simulate(scenario_from_data(_small_fat_tree(seed=5)))
    assert report_json(again) == report_json(first)
    pd.testing.assert_frame_equal(again.tables["messages"], first.tables["messages"])


def test_another_seed_changes_the_messages(scenario: Scenario, first: RunResult) -> None:
    other = simulate(scenario, seed=6)
    assert len(other.tables["messages"]) > 0
    assert not other.tables["messages"].equals(first.tables["messages"])
    assert report_json(other) != report_json(first)


def test_seed_argument_overrides_the_scenarios_seed(scenario: Scenario) -> None:
    overridden = sitssim.simulate(scenario, seed=11)
    written = simulate(scenario_from_data(_small_fat_tree(seed=11)))
    assert scenario.seed == 5
    assert overridden.seed == overridden.scenario.seed == 11
    assert json.loads(report_json(overridden))["seed"] == 11
    pd.testing.assert_frame_equal(overridden.tables["messages"], written.tables["messages"])


def test_every_catalogued_clause_is_judged_exactly_once(first: RunResult) -> None:
    ids = [v.id for v in first.verdicts]
    assert Counter(ids) == Counter(CLAUSES.keys())
    assert ids == list(CLAUSES)
    for verdict in first.verdicts:
        assert verdict.layer == CLAUSES[verdict.id].layer
        assert verdict.verdict in ("pass", "fail", "n/a")
    judged = {v.id: v.verdict for v in first.verdicts}
    # The L3 clauses this run has facts for are judged, not skipped.
    for clause in ("fabric.hop_limit", "fabric.topology_limits", "fabric.tso_window"):
        assert judged[clause] != "n/a"


def test_latency_is_summarised_per_message_kind(first: RunResult) -> None:
    messages = first.tables["messages"]
    by_kind = first.metrics["latency_by_kind_ns"]
    assert set(by_kind) == set(messages["kind"].astype(str))
    for kind, summary in by_kind.items():
        latency = messages.loc[messages["kind"] == kind, "latency_ns"]
        assert summary["max"] == latency.max()
    assert by_kind["data"] == first.metrics["data_latency_ns"]
