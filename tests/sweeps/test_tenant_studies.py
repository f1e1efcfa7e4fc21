"""The multi-tenant study's two study files (``switch.vc_tenants``): at four tenants, where
requests first meet completions on a shared VC, the shared arm deadlocks from the mechanism
and its control, a VC per tenant and class, does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import sitssim
from sitssim.sweeps.points import expand

ROOT = Path(__file__).resolve().parents[2]


def four_tenants(arm: str, out: Path) -> tuple[dict[str, Any], Any]:
    study = sitssim.load_study(ROOT / "studies" / f"tenants_{arm}.yaml")
    assert study.replications == 10
    (axis,) = [a for a in study.axes if "tenants" in a.paths]
    assert [v[axis.paths.index("tenants")] for v in axis.values] == list(range(1, 11))
    quick = study.restricted(replications=1, keep={"tenants": [4]})
    (point,) = expand(quick)
    (row,) = sitssim.sweep(quick, out, workers=1, figures=False).to_dict("records")
    assert row["status"] == "ok" and row["seed"] == 1
    return {k.removeprefix("metrics."): v for k, v in row.items()}, point.scenario


@pytest.mark.slow
def test_four_tenants_deadlock_where_requests_meet_completions_and_the_control_does_not(
    tmp_path: Path,
) -> None:
    shared, shared_scenario = four_tenants("shared", tmp_path / "shared")
    control, control_scenario = four_tenants("control", tmp_path / "control")
    assert [t.name for t in control_scenario.tenants] == ["t0", "t1", "t2", "t3"]
    assert shared_scenario.switch.vcs_per_port == 8 and control_scenario.switch.vcs_per_port == 12
    assert control_scenario.topology.planes == 1 and control_scenario.duration == 30_000.0
    # Read from the run: the watchdog's cycle, requests stranded by it, and the one busy
    # VC (of 7: the posted-class VC nobody uses stays idle) where t3's requests ride with
    # t0's completions.
    assert shared["tenants.deadlocked"] == 1.0 and shared["tenants.ack_timeout_pct"] > 0
    assert shared["tenants.deadlock_possible"] == 1.0
    assert shared["tenants.mixed_vc_pct"] == pytest.approx(100 / 7)
    assert shared["tenants.vc_reuse_observed"] == pytest.approx(8 / 7)
    # The quota table's count, the source's: 12 (tenant, VC) pairs over 8 VCs.
    assert shared["vc_quota.max_vc_reuse"] == 1.5 and control["vc_quota.max_vc_reuse"] == 1.0
    assert control["tenants.deadlocked"] == 0.0 and control["tenants.ack_timeout_pct"] == 0.0
    assert control["tenants.deadlock_possible"] == 0.0
    assert control["tenants.mixed_vc_pct"] == 0.0 and control["tenants.vc_reuse_observed"] == 1.0
    assert shared["tenants.throughput_loss_pct"] > control["tenants.throughput_loss_pct"]
    # The control's 12 VCs break the 8-VC cap on purpose; the shared port keeps it.
    assert shared["clauses.switch.vc_quota.verdict"] == "pass"
    assert control["clauses.switch.vc_quota.verdict"] == "fail"
