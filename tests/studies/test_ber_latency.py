"""The BER-to-latency sweep: honest run lengths and honest intervals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.scenario import scenario_from_data
from sitssim.studies.ber_latency import ber_latency_sweep, quantile_interval


def test_quantile_interval_covers_the_true_quantile_at_its_confidence() -> None:
    rng = np.random.default_rng(5)
    hits = 0
    trials = 400
    for _ in range(trials):
        interval = quantile_interval(rng.random(300), 0.9, confidence=0.95)
        hits += interval.low <= 0.9 <= interval.high
    # Order-statistic intervals are conservative: coverage at least the nominal 95 %.
    assert hits / trials >= 0.93


def test_quantile_interval_is_undefined_when_samples_are_too_few() -> None:
    interval = quantile_interval(np.arange(10.0), 0.999)
    assert np.isnan(interval.high)


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
    table = ber_latency_sweep(
        scenario, bers=(1e-9, 1e-5, 1e-4), min_replays=20, max_duration_ns=1_000_000.0
    )
    ok = table[table["status"] == "ok"]
    none = table[table["status"] == "none expected"]
    assert list(none["pre_fec_ber"]) == [1e-9]
    assert (ok["expected_replays"] >= 20 - 1e-9).all()
    assert (ok["replays"] > 0).all()
    assert (table["duration_ns"] >= 10_000.0).all()
    assert table["p99"].iloc[-1] > table["p99"].iloc[0]


def test_cli_writes_the_table_and_plot(tmp_path: Path) -> None:
    scenario = Path(__file__).resolve().parents[2] / "scenarios/violations/chain_9hop.yaml"
    out = tmp_path / "sweep"
    result = CliRunner().invoke(
        app,
        [
            "study",
            "ber-latency",
            str(scenario),
            "--ber",
            "1e-9,1e-4",
            "--out",
            str(out),
            "--max-duration",
            "40us",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (out / "ber_latency.png").stat().st_size > 0
    assert "none expected" in (out / "ber_latency.csv").read_text()
    bad = CliRunner().invoke(app, ["study", "ber-latency", str(scenario), "--ber", "2"])
    assert bad.exit_code == 2 and "every BER" in bad.output
