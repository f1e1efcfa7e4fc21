"""Flit mode inside a run: efficiency at BER 0, and replays that only ever add latency."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from sitssim.link.flit import payload_efficiency
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate


@pytest.fixture
def pair_scenario(
    one_link_data: Callable[..., dict[str, Any]],
) -> Callable[..., dict[str, Any]]:
    def build(ber: float | None, load: float = 0.95) -> dict[str, Any]:
        data = one_link_data(
            [
                {
                    "kind": "synthetic",
                    "pattern": "pair",
                    "src": "a",
                    "dst": "b",
                    "message_bytes": "4KiB",
                    "load": load,
                }
            ],
            duration="40us",
            seed=3,
        )
        data["links"]["default"]["encoding"] = "flit256"
        data["link_layer"] = {"flit": {} if ber is None else {"pre_fec_ber": ber}}
        return data

    return build


def test_error_free_flit_throughput_is_the_layout_efficiency(
    pair_scenario: Callable[..., dict[str, Any]],
) -> None:
    result = simulate(scenario_from_data(pair_scenario(None, load=2.0)))
    link = result.tables["links"].set_index("name").loc["a>b"]
    raw_bytes_per_ns = 64 * 16 / 8
    assert link["bytes"] / link["busy_ns"] == pytest.approx(raw_bytes_per_ns * payload_efficiency())
    assert result.tables["replays"].empty


def test_replays_only_add_latency_to_the_same_arrivals(
    pair_scenario: Callable[..., dict[str, Any]],
) -> None:
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
