"""The multi-tenant study: its variants, its intervals and what a point reads from a run."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from sitssim.errors import InputError
from sitssim.studies.tenant_sharing import (
    TenantPoint,
    point_scenario,
    run_point,
    study_points,
    summarise,
)

ROOT = Path(__file__).resolve().parents[2]
BASE = str(ROOT / "scenarios" / "nvswitch_multitenant.yaml")
SMALL = {"planes": 1, "links_per_gpu": 2}


def _point(tenants: int, arm: str = "shared", **kw: object) -> TenantPoint:
    fields = {"load": 0.8, "duration": "30us", "topology": SMALL, **kw}
    return TenantPoint(BASE, tenants, arm, 1, **fields)  # type: ignore[arg-type]


def test_the_control_arm_gives_every_tenant_and_class_a_vc_and_shared_keeps_the_port() -> None:
    shared = point_scenario(_point(4))
    control = point_scenario(_point(4, "control"))
    assert shared.switch.vcs_per_port == 8
    assert control.switch.vcs_per_port == 12
    assert [t.name for t in control.tenants] == ["t0", "t1", "t2", "t3"]
    assert control.topology.planes == 1 and control.topology.links_per_gpu == 2
    assert control.workloads[0].load == 0.8
    assert control.duration == 30_000.0
    # A variant is a different scenario, and its hash says so.
    assert control.source.sha256 != shared.source.sha256


def test_a_variant_the_schema_rejects_is_a_located_error_in_the_base_file() -> None:
    with pytest.raises(InputError) as err:
        point_scenario(_point(2, load=-0.5))
    assert err.value.file == BASE
    assert "load" in str(err.value)


def test_points_cover_every_count_arm_and_seed_from_the_base_seed() -> None:
    points = study_points(BASE, [1, 3], 2, 0.5, "5us", SMALL)
    assert {(p.tenants, p.arm, p.seed) for p in points} == {
        (n, arm, seed) for n in (1, 3) for arm in ("shared", "control") for seed in (1, 2)
    }


def test_summary_means_and_student_t_half_widths_per_arm_and_count() -> None:
    rows = pd.DataFrame(
        {
            "arm": ["shared"] * 3 + ["control"],
            "tenants": [4, 4, 4, 4],
            "reuse_configured": [1.5, 1.5, 1.5, 1.0],
            "ack_timeout_pct": [1.0, 2.0, 3.0, 0.0],
            "throughput_loss_pct": [0.0, 0.0, 0.0, 0.0],
            "worst_p99_latency_ns": [10.0, 10.0, 10.0, 5.0],
            "reuse_observed": [1.0, 1.0, 1.0, 1.0],
            "mixed_vc_pct": [0.0, 0.0, 0.0, 0.0],
            "mixed_vc_load_pct": [0.0, 0.0, 0.0, 0.0],
            "deadlocked": [True, False, False, False],
            "cycle_possible": [True, True, True, False],
        }
    )
    summary = summarise(rows).set_index("arm")
    shared = summary.loc["shared"]
    assert shared["ack_timeout_pct"] == 2.0
    # t(0.975, 2 degrees of freedom) = 4.3027; sample sd 1; n = 3.
    assert shared["ack_timeout_pct_ci"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert shared["throughput_loss_pct_ci"] == 0.0
    assert shared["deadlocked_fraction"] == pytest.approx(1 / 3)
    assert shared["deadlocked_low"] < 1 / 3 < shared["deadlocked_high"]
    assert math.isnan(summary.loc["control", "ack_timeout_pct_ci"])
    assert shared["cycle_possible"] and not summary.loc["control", "cycle_possible"]


@pytest.mark.slow
def test_four_tenants_deadlock_where_requests_meet_completions_and_the_control_does_not() -> None:
    shared = run_point(_point(4))
    control = run_point(_point(4, "control"))
    # Read from the run: the watchdog's cycle, requests stranded by it, and the one busy
    # VC (of 7: the posted-class VC nobody uses stays idle) where t3's requests ride
    # with t0's completions.
    assert shared["deadlocked"] and shared["ack_timeouts"] > 0 and shared["cycle_possible"]
    assert shared["mixed_vc_pct"] == pytest.approx(100 / 7)
    assert shared["reuse_observed"] == pytest.approx(8 / 7)
    # The quota table's count, the source's: 12 (tenant, VC) pairs over 8 VCs.
    assert shared["reuse_configured"] == 1.5 and control["reuse_configured"] == 1.0
    assert not control["deadlocked"] and control["ack_timeouts"] == 0
    assert not control["cycle_possible"]
    assert control["mixed_vc_pct"] == 0.0 and control["reuse_observed"] == 1.0
    assert shared["throughput_loss_pct"] > control["throughput_loss_pct"]
