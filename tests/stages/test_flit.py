"""Flit mode inside a run: efficiency at BER 0, replays that only ever add latency, and the
L1 Recovery a REPLAY_NUM rollover sends the link through."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.link.flit import payload_efficiency
from sitssim.results.phy_plots import retrain_episodes, retrain_timeline
from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate


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


@pytest.fixture(scope="module")
def rollovers(one_link_data: Callable[..., dict[str, Any]]) -> RunResult:
    """Traffic both ways over a link whose REPLAY_NUM has one bit (a device that asks for
    Recovery on the 2nd replay without progress) at a pre-FEC BER that makes that happen."""
    data = one_link_data(
        [
            {
                "kind": "synthetic",
                "pattern": "pair",
                "src": src,
                "dst": dst,
                "message_bytes": "4KiB",
                "load": 0.5,
            }
            for src, dst in (("a", "b"), ("b", "a"))
        ],
        duration="10us",
        seed=3,
    )
    data["links"]["default"]["encoding"] = "flit256"
    data["link_layer"] = {"flit": {"pre_fec_ber": 3e-4, "replay_num_bits": 1}}
    return simulate(scenario_from_data(data))


def _episodes(result: RunResult) -> list[tuple[float, float]]:
    """(start, back) of each rollover Recovery on the traffic clock, from ``link_states``."""
    states = result.tables["link_states"]
    start = result.metrics["phy"]["traffic_start_ns"]
    l0 = states.loc[states["state"] == "L0", "t_enter_ns"].to_numpy()
    return [
        (t - start, float(l0[l0 > t].min()) - start)
        for t in states.loc[states["cause"] == "replay_rollover", "t_enter_ns"]
    ]


def test_replay_num_rollover_holds_both_directions_through_an_l1_retraining(
    rollovers: RunResult,
) -> None:
    episodes = _episodes(rollovers)
    assert len(episodes) >= 2
    assert rollovers.metrics["phy"]["replay_recoveries"] == len(episodes)
    replays = rollovers.tables["replays"]
    entered = replays.loc[replays["event"] == "enter_recovery", "t_ns"].to_numpy()
    replayed = replays.loc[replays["event"] == "recovery", "t_ns"].to_numpy()
    for start, back in episodes:
        # Recovery entered at the rollover, the retry buffer replayed when L1 is back in L0.
        assert np.isclose(entered, start).any() and np.isclose(replayed, back).any()
    # Every rollover either started an episode or came while one was under way.
    assert all(any(s - 1e-6 <= t <= b + 1e-6 for s, b in episodes) for t in entered)
    # Each outage spans a full Level-3 EQ round: an L1 retraining, not a fixed wait.
    eq = rollovers.tables["eq"]
    start_phy = rollovers.metrics["phy"]["traffic_start_ns"]
    for start, back in episodes:
        inside = eq[(eq["t_start_ns"] >= start + start_phy) & (eq["t_end_ns"] <= back + start_phy)]
        assert set(inside["phase"]) == {0, 1, 2, 3}
    # Neither direction delivers anything while the link retrains (what was already on
    # the wire, one message and the flight time, excepted).
    messages = rollovers.tables["messages"]
    assert set(messages["src"]) == {"a", "b"}
    link = rollovers.tables["links"].iloc[0]
    on_wire = 4096 / link["bytes_per_ns"] + link["propagation_ns"]
    delivered = messages["t_deliver_ns"].to_numpy()
    for start, back in episodes:
        assert not ((delivered > start + on_wire) & (delivered < back)).any()
    assert np.isfinite(delivered).all()


def test_the_retrainings_figure_counts_every_rollover_episode(
    rollovers: RunResult, tmp_path: Path
) -> None:
    episodes = retrain_episodes(rollovers.tables["link_states"])
    assert set(episodes["cause"]) == {"replay_rollover"}
    start = rollovers.metrics["phy"]["traffic_start_ns"]
    # Both directions may ask for Recovery before the link is back: one stay out of L0,
    # one Recovery in the metric.
    stays: dict[float, float] = {}
    for begin, back in _episodes(rollovers):
        stays[back] = min(begin, stays.get(back, math.inf))
    drawn = zip(episodes["t_start_ns"] - start, episodes["t_end_ns"] - start, strict=True)
    assert sorted(drawn) == pytest.approx(sorted((s, b) for b, s in stays.items()))
    assert len(stays) == rollovers.metrics["phy"]["replay_recoveries"]
    end_ns = start + rollovers.metrics["simulated_ns"]
    assert retrain_timeline(rollovers.tables, "rollovers", tmp_path / "r.png", end_ns)


def test_a_scenario_that_still_sets_recovery_is_told_it_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text(
        "name: old\n"
        "topology: {kind: fat_tree, gpus: 4, levels: 1, radix: 4}\n"
        "link_layer:\n"
        "  flit:\n"
        "    pre_fec_ber: 1e-6\n"
        "    recovery: 5us\n"
        "workloads: [{kind: synthetic, pattern: uniform_random, message_bytes: 2KiB, load: 0.2}]\n"
    )
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert f"{path.name}:6" in result.output and "link_layer.flit.recovery" in result.output
