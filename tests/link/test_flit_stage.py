"""Flit mode inside a run: efficiency at BER 0, and replays that only ever add latency."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sitssim.link.flit import payload_efficiency
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate


def pair_scenario(ber: float | None, load: float = 0.95) -> dict[str, Any]:
    flit: dict[str, Any] = {} if ber is None else {"pre_fec_ber": ber}
    return {
        "name": "flit_pair",
        "seed": 3,
        "duration": "40us",
        "topology": {
            "kind": "graph",
            "nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}],
            "edges": [{"a": "a", "b": "b"}],
        },
        "links": {"default": {"rate": "64GT/s", "lanes": 16, "encoding": "flit256"}},
        "link_layer": {"flit": flit},
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "pair",
                "src": "a",
                "dst": "b",
                "message_bytes": "4KiB",
                "load": load,
            }
        ],
    }


def test_error_free_flit_throughput_is_the_layout_efficiency() -> None:
    result = simulate(scenario_from_data(pair_scenario(None, load=2.0)))
    link = result.tables["links"].set_index("name").loc["a>b"]
    raw_bytes_per_ns = 64 * 16 / 8
    assert link["bytes"] / link["busy_ns"] == pytest.approx(raw_bytes_per_ns * payload_efficiency())
    assert result.tables["replays"].empty


def test_replays_only_add_latency_to_the_same_arrivals() -> None:
    clean = simulate(scenario_from_data(pair_scenario(None)))
    noisy = simulate(scenario_from_data(pair_scenario(1e-4)))
    a = clean.tables["messages"]
    b = noisy.tables["messages"]
    np.testing.assert_array_equal(a["t_inject_ns"], b["t_inject_ns"])
    assert (b["latency_ns"].to_numpy() >= a["latency_ns"].to_numpy() - 1e-9).all()
    assert b["latency_ns"].mean() > a["latency_ns"].mean()
    replays = noisy.tables["replays"]
    assert len(replays) == noisy.metrics["link_layer"]["replays"] > 0
    assert set(replays["link"]) <= {"a>b", "b>a"}
    assert noisy.metrics["oracle_latency_violations"] == 0
