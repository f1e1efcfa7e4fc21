"""How many tenants can share a switch's VCs: the multi-tenant study (``switch.vc_tenants``).

A point is one run of a tenant-request scenario with ``tenants`` tenants splitting one
fixed total load, in one of two arms:

* ``shared``: the scenario's switch as configured (its ports' VCs, each tenant taking
  ``vcs_per_tenant`` of them round robin), so that from some tenant count on, tenants
  share VCs and one tenant's requests ride with another's completions;
* ``control``: the same switch with one VC per (tenant, flow-control class), as many as
  that takes, so nothing is shared. It breaks the 8-VC cap of ``switch.vc_quota`` on
  purpose: it is the counterfactual switch, not a design.

What a point reports is read from the run's tables, never from the scenario: ACK
timeouts and delivered throughput from ``tenants``, a deadlock from ``deadlocks`` (the
watchdog's observed cycle; the pre-run check's possible one beside it), and VC reuse
from ``vc_tenants`` (the tenants seen on each VC that carried traffic). The configured
reuse, the quota table's tenants per VC in use (``vc_quota_ports.vc_reuse``, the count
the source gives), is reported beside it, labelled so.

Replications differ only in their seed; ``summarise`` gives each metric's mean with a
95 % Student-t interval over them, and each arm's fraction of deadlocked runs with a
Wilson interval.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from sitssim.link.credit_link import N_CLASSES
from sitssim.scenario import Scenario, SwitchParams, load_scenario
from sitssim.simulation import RunResult, simulate
from sitssim.sweeps.statistics import t_half_width, wilson_interval

Arm = Literal["shared", "control"]
ARMS: tuple[Arm, ...] = ("shared", "control")

METRICS = (
    "ack_timeout_pct",
    "throughput_loss_pct",
    "worst_p99_latency_ns",
    "reuse_observed",
    "mixed_vc_pct",
    "mixed_vc_load_pct",
)


@dataclass(frozen=True)
class TenantPoint:
    """One run of the study: a scenario file, the tenant count, the arm and the seed."""

    base: str
    tenants: int
    arm: Arm
    seed: int
    load: float
    duration: str
    topology: dict[str, Any] = field(default_factory=dict)


def point_scenario(point: TenantPoint) -> Scenario:
    """The base scenario with the point's tenants, arm, load, duration and seed."""

    def edit(data: dict[str, Any]) -> None:
        data["seed"] = point.seed
        data["duration"] = point.duration
        data["topology"] = {**data["topology"], **point.topology}
        data["tenants"] = [{"name": f"t{k}"} for k in range(point.tenants)]
        data["workloads"] = [
            {**wl, "load": point.load} if wl.get("kind") == "tenant_requests" else wl
            for wl in data["workloads"]
        ]
        if point.arm == "control":
            # A VC per flow-control class (posted, non-posted, completion) and tenant.
            switch = data["switch"]
            configured = switch.get(
                "vcs_per_port", SwitchParams.model_fields["vcs_per_port"].default
            )
            vcs = max(configured, N_CLASSES * point.tenants)
            quota = {**switch.get("vc_quota", {}), "vcs_per_tenant": N_CLASSES}
            data["switch"] = {**switch, "vcs_per_port": vcs, "vc_quota": quota}

    return load_scenario(point.base, edit=edit)


def _observed_vcs(
    result: RunResult, request_bytes: int, response_bytes: int
) -> tuple[float, float, float]:
    """From what the switches' inputs saw: tenants per VC that carried traffic, the share
    of those VCs on which requests and completions met, and the share of its input's
    bytes that the busiest such VC carried (mean over inputs; 0 where none mixes)."""
    seen = result.tables["vc_tenants"]
    seen = seen[seen["messages"] > 0]
    if seen.empty:
        return math.nan, math.nan, math.nan
    mean_bytes = seen["bytes"] / seen["messages"]
    seen = seen.assign(requests=mean_bytes < response_bytes, completions=mean_bytes > request_bytes)
    per_vc = seen.groupby(["switch", "port", "vc"]).agg(
        tenants=("tenant", "nunique"),
        requests=("requests", "any"),
        completions=("completions", "any"),
        bytes=("bytes", "sum"),
    )
    mixed = per_vc["requests"] & per_vc["completions"]
    share = per_vc["bytes"] / per_vc.groupby(level=["switch", "port"])["bytes"].transform("sum")
    busiest = share.where(mixed, 0.0).groupby(level=["switch", "port"]).max()
    return (
        float(per_vc["tenants"].mean()),
        100.0 * float(mixed.mean()),
        100.0 * float(busiest.mean()),
    )


def run_point(point: TenantPoint) -> dict[str, Any]:
    """Run one point and return its row: the point's fields, then what the run measured."""
    scenario = point_scenario(point)
    started = time.perf_counter()
    result = simulate(scenario)
    wall_s = time.perf_counter() - started
    tenants = result.tables["tenants"]
    deadlocks = result.tables.get("deadlocks")
    observed = 0 if deadlocks is None else int((deadlocks["kind"] == "observed").sum())
    possible = deadlocks is not None and bool((deadlocks["kind"] == "possible").any())
    wl = next(w for w in scenario.workloads if w.kind == "tenant_requests")
    reuse, mixed, mixed_load = _observed_vcs(result, int(wl.request_bytes), int(wl.response_bytes))
    issued = int(tenants["issued"].sum())
    timeouts = int(tenants["ack_timeouts"].sum())
    offered = float(tenants["offered_gbps"].sum())
    return {
        **{k: v for k, v in asdict(point).items() if k != "topology"},
        "vcs_per_port": scenario.switch.vcs_per_port,
        "reuse_configured": float(result.tables["vc_quota_ports"]["vc_reuse"].mean()),
        "ack_timeouts": timeouts,
        "issued": issued,
        "ack_timeout_pct": 100.0 * timeouts / issued if issued else math.nan,
        "throughput_loss_pct": 100.0 * (1.0 - float(tenants["delivered_gbps"].sum()) / offered)
        if offered
        else math.nan,
        "worst_p99_latency_ns": float(tenants["p99_latency_ns"].max()),
        "reuse_observed": reuse,
        "mixed_vc_pct": mixed,
        "mixed_vc_load_pct": mixed_load,
        "deadlocked": observed > 0,
        "cycle_possible": possible,
        "wall_s": wall_s,
    }


def study_points(
    base: str | Path,
    tenants: Iterable[int],
    replications: int,
    load: float,
    duration: str,
    topology: dict[str, Any] | None = None,
    arms: Sequence[Arm] = ARMS,
) -> list[TenantPoint]:
    """Every point of a study; seeds follow the base scenario's, one per replication.
    Where the shared port already has a VC per tenant and class, the control point is the
    same run, and is run anyway so that each arm stands on its own rows."""
    seed0 = load_scenario(base).seed
    points = []
    for n in tenants:
        for arm in arms:
            for r in range(replications):
                points.append(
                    TenantPoint(str(base), n, arm, seed0 + r, load, duration, dict(topology or {}))
                )
    return points


def run_study(points: Sequence[TenantPoint], workers: int = 1) -> pd.DataFrame:
    """One row per point, in the points' order; ``workers`` processes run them."""
    if workers <= 1:
        rows = [run_point(p) for p in points]
    else:
        # spawn: a notebook kernel's threads make fork unsafe.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            rows = list(pool.map(run_point, points))
    return pd.DataFrame(rows)


def summarise(rows: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per (arm, tenants): each metric's mean and CI half-width (``<metric>_ci``), the
    configured reuse, whether the pre-run check found a possible cycle in every
    replication, and the deadlocked fraction with its Wilson bounds."""
    out = []
    for (arm, n), group in rows.groupby(["arm", "tenants"], sort=True):
        row: dict[str, Any] = {"arm": arm, "tenants": n, "replications": len(group)}
        row["reuse_configured"] = float(group["reuse_configured"].iloc[0])
        row["cycle_possible"] = bool(group["cycle_possible"].all())
        for metric in METRICS:
            row[metric] = float(group[metric].mean())
            row[f"{metric}_ci"] = t_half_width(group[metric], confidence)
        k = int(group["deadlocked"].sum())
        row["deadlocked_fraction"] = k / len(group)
        row["deadlocked_low"], row["deadlocked_high"] = wilson_interval(k, len(group), confidence)
        out.append(row)
    return pd.DataFrame(out)
