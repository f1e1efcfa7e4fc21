"""The BER-to-latency study: run lengths sized to expect replays, swept as a study."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.scenario import scenario_from_data
from sitssim.studies.ber_latency import NONE_EXPECTED, size_points

CHAIN_9HOP = Path(__file__).resolve().parents[2] / "scenarios/violations/chain_9hop.yaml"
BER = "link_layer.flit.pre_fec_ber"


def test_each_point_runs_long_enough_for_its_replays_or_says_none_expected(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    scenario = scenario_from_data(
        one_link_data(
            [
                {
                    "kind": "synthetic",
                    "pattern": "pair",
                    "src": "a",
                    "dst": "b",
                    "message_bytes": "2KiB",
                    "load": 0.5,
                }
            ],
            duration="10us",
            seed=2,
        )
    )
    sized = size_points(
        scenario, bers=(1e-9, 1e-5, 1e-4), min_replays=20, max_duration_ns=1_000_000.0
    )
    assert [p.status for p in sized] == [NONE_EXPECTED, "ok", "ok"]
    assert sized[0].duration_ns == 10_000.0
    # The rarer the replays, the longer a run must be to expect 20 of them.
    assert sized[1].duration_ns > sized[2].duration_ns >= 10_000.0
    assert all(p.expected_replays >= 20 - 1e-9 for p in sized[1:])


def test_the_command_sweeps_the_sized_points_as_a_study(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    result = CliRunner().invoke(
        app,
        [
            "study",
            "ber-latency",
            str(CHAIN_9HOP),
            "--ber",
            "1e-9,1e-4",
            "--out",
            str(out),
            "--max-duration",
            "40us",
            "--replications",
            "2",
            "--workers",
            "1",
        ],
    )
    # The chain breaks the hop limit in every run: the study reports it as a sweep does.
    assert result.exit_code == 1, result.output
    assert NONE_EXPECTED in result.output and "fabric.hop_limit" in result.output
    points = pd.read_parquet(out / "points").sort_values([BER, "seed"])
    assert len(points) == 4 and (points["status"] == "ok").all()
    clean, noisy = points[points[BER] == 1e-9], points[points[BER] == 1e-4]
    assert (clean["metrics.link_layer.replays"] == 0).all()
    # Sized to expect 100 replays: every seed of the noisy point sees of that order.
    assert (noisy["metrics.link_layer.replays"] >= 50).all()
    summary = pd.read_parquet(out / "summary.parquet")
    assert len(summary) == 2 and summary["metrics.data_latency_ns.p99.ci"].notna().all()
    assert (out / "figures" / f"{BER}.png").stat().st_size > 0


def test_bad_bers_are_refused_before_anything_runs(tmp_path: Path) -> None:
    for ber, expected in (("2", "every BER"), ("1e-6,1e-6", "once"), ("x", "expected BERs")):
        out = tmp_path / ber
        bad = CliRunner().invoke(
            app, ["study", "ber-latency", str(CHAIN_9HOP), "--ber", ber, "--out", str(out)]
        )
        assert bad.exit_code == 2 and expected in bad.output, bad.output
        assert not out.exists()
