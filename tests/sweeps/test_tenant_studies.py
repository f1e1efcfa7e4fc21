"""The tenant study's two study files on the sweep machinery: each point is the run the
multi-tenant study's own code makes of it (``sitssim.studies.tenant_sharing``), measured
alike."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import sitssim
from sitssim.studies.tenant_sharing import TenantPoint, run_point

ROOT = Path(__file__).resolve().parents[2]
BASE = str(ROOT / "scenarios" / "nvswitch_multitenant.yaml")
SAME = {
    "tenants.ack_timeout_pct": "ack_timeout_pct",
    "tenants.throughput_loss_pct": "throughput_loss_pct",
    "tenants.worst_p99_latency_ns": "worst_p99_latency_ns",
    "tenants.deadlocked": "deadlocked",
    "tenants.deadlock_possible": "cycle_possible",
}


@pytest.mark.parametrize("arm", ["shared", "control"])
def test_a_tenant_study_point_is_the_studys_own_run_of_it(arm: str, tmp_path: Path) -> None:
    study = sitssim.load_study(ROOT / "studies" / f"tenants_{arm}.yaml")
    assert study.replications == 10
    (axis,) = [a for a in study.axes if "tenants" in a.paths]
    assert [v[axis.paths.index("tenants")] for v in axis.values] == list(range(1, 11))
    # Four tenants: where requests first meet completions on a shared VC.
    quick = study.restricted(replications=1, keep={"tenants": [4]})
    (row,) = sitssim.sweep(quick, tmp_path / "out", workers=1, figures=False).to_dict("records")
    assert row["status"] == "ok" and row["seed"] == 1
    own = run_point(TenantPoint(BASE, 4, arm, 1, 0.8, "30us", {"planes": 1, "links_per_gpu": 2}))  # type: ignore[arg-type]
    for metric, column in SAME.items():
        assert row[f"metrics.{metric}"] == pytest.approx(float(own[column]), nan_ok=True), metric
    assert not math.isnan(row["metrics.tenants.throughput_loss_pct"])
    # The pre-run check sees a possible cycle only where the VCs are shared.
    assert row["metrics.tenants.deadlock_possible"] == (arm == "shared")
    # The configured reuse: 12 (tenant, class) pairs on 8 VCs, or one VC each.
    assert row["metrics.vc_quota.max_vc_reuse"] == (1.5 if arm == "shared" else 1.0)
    # The control's 12 VCs break the 8-VC cap on purpose; the shared port keeps it.
    assert row["clauses.switch.vc_quota.verdict"] == ("pass" if arm == "shared" else "fail")
