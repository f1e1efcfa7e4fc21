"""Flow control in a run: credits gate sending, back-pressure spreads, every credit returns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate


def scenario(
    credits: dict[str, Any] | None, pattern: str = "uniform_random", load: float = 0.6, **extra: Any
) -> Any:
    data: dict[str, Any] = {
        "name": "credits",
        "seed": 1,
        "duration": "20us",
        "topology": {"kind": "fat_tree", "gpus": 8, "levels": 2, "radix": 4, "spines": 2},
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": pattern,
                "message_bytes": "2KiB",
                "load": load,
                **extra,
            },
            {"kind": "probes", "interval": "300ns"},
        ],
    }
    if credits is not None:
        data["link_layer"] = {"credits": credits}
    return scenario_from_data(data)


AMPLE = {"header_credits": 10_000, "data_credits": 1_000_000}
TIGHT = {"header_credits": 2, "data_credits": 256}


def test_ample_credits_change_nothing_on_a_single_link(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    one_link = one_link_data(
        [
            {
                "kind": "synthetic",
                "pattern": "pair",
                "src": "a",
                "dst": "b",
                "message_bytes": "1KiB",
                "load": 0.9,
            }
        ],
        seed=2,
    )
    free = simulate(scenario_from_data(one_link))
    gated = simulate(scenario_from_data({**one_link, "link_layer": {"credits": AMPLE}}))
    np.testing.assert_allclose(
        gated.tables["messages"]["latency_ns"], free.tables["messages"]["latency_ns"], rtol=1e-9
    )
    assert gated.tables["credits"].empty


def test_ample_credits_keep_the_fabric_mean_latency() -> None:
    free = simulate(scenario(None)).tables["messages"]["latency_ns"].mean()
    gated = simulate(scenario(AMPLE)).tables["messages"]["latency_ns"].mean()
    # Only the order of exactly simultaneous arrivals may differ.
    assert gated == pytest.approx(free, rel=1e-3)


def test_tight_buffers_back_pressure_a_hotspot_and_return_every_credit() -> None:
    free = simulate(scenario(None, pattern="hotspot", load=0.5, hotspot_fraction=0.6))
    gated = simulate(scenario(TIGHT, pattern="hotspot", load=0.5, hotspot_fraction=0.6))
    stalls = gated.tables["credits"]
    assert len(stalls) > 0
    assert (stalls["end_ns"] >= stalls["start_ns"]).all()
    # Back-pressure reaches links that do not feed the hotspot directly.
    assert stalls["link"].nunique() > 1
    messages = gated.tables["messages"]
    assert messages["t_deliver_ns"].notna().all()
    assert (messages["latency_ns"] >= messages["zero_load_ns"] * (1 - 1e-9)).all()
    assert gated.metrics["delivered_GBps"] <= gated.metrics["throughput_bound_GBps"] * (1 + 1e-9)
    assert messages["latency_ns"].mean() >= free.tables["messages"]["latency_ns"].mean()
    assert gated.metrics["link_layer"]["credit_stall_ns"] > 0


def test_a_buffer_smaller_than_one_tlp_is_bad_input() -> None:
    from sitssim.errors import InputError

    with pytest.raises(InputError, match="cannot hold one 4096 B TLP"):
        scenario({"data_credits": 100})


def test_a_transport_that_ignores_credits_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation witness: a port that believes every message fits
    sends without credit, and the run stops at the first such grant."""
    from sitssim.errors import InvariantViolation
    from sitssim.link.credit_link import CreditLink

    monkeypatch.setattr(CreditLink, "fits", lambda self, cost, now: True)
    with pytest.raises(InvariantViolation, match="credits below zero"):
        simulate(scenario(TIGHT, pattern="hotspot", load=0.5, hotspot_fraction=0.6))
