"""The tenant-requests stage: ``kind: tenant_requests`` workloads, their ACK timeouts, and
the deadlock they can run into (``switch.vc_tenants``).

* **Build.** The targets must accept a request only when they can queue its completion,
  so the stage asks for answering endpoints (``Wiring.answered_kinds``) with answer
  queues of ``completion_queue`` places (``Wiring.answer_slots``).
* **Start.** Before anything moves, the dependency check: every route the requests and
  completions may take, on the VCs their tenants' quota gives them
  (``switch.deadlock.dependency_cycle``), with each request's last buffer waiting for the
  first buffer of every completion its target sends (they share one answer queue, so any
  of them leaving frees the place a refused request waits for). A cycle there is a
  warning, never a verdict: whether its buffers ever fill together is for the run to
  show. Then the workloads, and a no-progress watchdog whose window is the shortest ACK
  timeout of them: a fabric that delivers nothing for a whole ACK timeout while messages
  are outstanding has timed out every request in flight, and a live one, however
  loaded, delivers far more often than that.
  When it fires, its snapshot is the observed wait-for graph of full buffers
  (``switch.wait_for``).
* **Tables.** ``tenants`` (per workload and tenant: requests offered, issued, completed on
  time and late, ACK timeouts, offered and delivered throughput, latency) and
  ``deadlocks`` (the pre-run cycle, and the observed one with when it was seen).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise, product
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sitssim.config.tenant_requests_config import TenantRequestsWorkload
from sitssim.errors import Locator
from sitssim.fabric.messages import FC_CLASS_OF_KIND, KIND_TENANT_REQUEST, KIND_TENANT_RESPONSE
from sitssim.fabric.topology import Fabric
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring, workload_section
from sitssim.switch.deadlock import (
    Flow,
    NoProgressWatchdog,
    Stall,
    cycle_text,
    dependency_graph,
    normal_cycle,
    wait_for_cycle,
)
from sitssim.switch.wait_for import wait_for_edges
from sitssim.workloads.section import WorkloadSection
from sitssim.workloads.tenant_requests import (
    TenantRequestRun,
    check_tenant_request_workloads,
    start_tenant_request_workloads,
    tenant_table,
)

if TYPE_CHECKING:
    from sitssim.fabric.transport import Transport
    from sitssim.switch.deadlock import Buffer

DEADLOCK_COLUMNS = (
    "deadlock_id",
    "kind",
    "t_ns",
    "last_delivery_ns",
    "outstanding",
    "buffers",
    "cycle",
)
"""The ``deadlocks`` table: ``kind`` ``possible`` (the pre-run cycle) or ``observed`` (the
cycle of full buffers when the watchdog fired); ``t_ns`` is when it fired (nan: before
the run), ``last_delivery_ns`` the last delivery before that, ``outstanding`` the messages
then in flight."""

Snapshot = list[tuple["Buffer", "Buffer"]]


def tenant_requests_section(scenario: Scenario) -> WorkloadSection[TenantRequestsWorkload]:
    return workload_section(scenario, TenantRequestsWorkload)


@dataclass
class TenantRequestStage(Stage):
    """The tenant-request workloads of one run; ``runs`` and the watchdog fill in as the run
    goes."""

    section: WorkloadSection[TenantRequestsWorkload]
    fabric: Fabric
    where: Locator
    message_vcs: tuple[tuple[int, ...], ...] | None
    runs: list[TenantRequestRun] = field(default_factory=list)
    possible: list[Buffer] | None = None
    watchdog: NoProgressWatchdog[Snapshot] | None = None

    def start(self, transport: Transport) -> None:
        self.runs = start_tenant_request_workloads(self.section, self.fabric, transport, self.where)
        self.possible = normal_cycle(dependency_graph(*self._flows(transport)))
        window = min(wl.ack_timeout for _, wl in self.section.workloads)
        self.watchdog = NoProgressWatchdog(
            transport.env,
            window,
            progress=lambda: transport.delivered,
            outstanding=lambda: transport.undelivered,
            snapshot=lambda: wait_for_edges(transport),
        )
        for run in self.runs:
            run.on_issue = self.watchdog.arm

    def _vc(self, tenant: int, kind: int) -> int:
        if self.message_vcs is None:
            return 0
        return self.message_vcs[tenant][FC_CLASS_OF_KIND[kind]]

    def _flows(self, transport: Transport) -> tuple[list[Flow], list[tuple[int, int]]]:
        """Every (route, VC, class) the requests and completions may take, and which
        completion flows a request flow waits for: every one its target sends, of any
        tenant, since a target's completions share one answer queue and any of them
        leaving frees the place a refused request waits for."""
        fabric = self.fabric
        tables = transport.router.tables
        flows: list[Flow] = []
        into: dict[str, set[int]] = {}
        out_of: dict[str, set[int]] = {}
        index: dict[Flow, int] = {}

        def add(path: tuple[str, ...], vc: int, kind: int) -> int:
            channels = tuple(fabric.channel_index[hop] for hop in pairwise(path))
            flow = Flow(channels, vc, FC_CLASS_OF_KIND[kind])
            if flow not in index:
                index[flow] = len(flows)
                flows.append(flow)
            return index[flow]

        for run in self.runs:
            pairs = {
                (transport.nodes[req.node], transport.nodes[dst])
                for req in run.requesters
                for dst in set(req.targets)
            }
            for (src, dst), tenant in product(sorted(pairs), run.tenants):
                into.setdefault(dst, set()).update(
                    add(p, self._vc(tenant, KIND_TENANT_REQUEST), KIND_TENANT_REQUEST)
                    for p in tables.paths(src, dst)
                )
                out_of.setdefault(dst, set()).update(
                    add(p, self._vc(tenant, KIND_TENANT_RESPONSE), KIND_TENANT_RESPONSE)
                    for p in tables.paths(dst, src)
                )
        answers = {
            pair for target, requests in into.items() for pair in product(requests, out_of[target])
        }
        return flows, sorted(answers)

    def _channel(self, channel: int) -> str:
        ch = self.fabric.channels[channel]
        return f"{ch.src}>{ch.dst}"

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        rows: list[tuple[object, ...]] = []
        if self.possible is not None:
            rows.append(
                ("possible", math.nan, math.nan, 0, len(self.possible), self._text(self.possible))
            )
        stall: Stall[Snapshot] | None = self.watchdog.stall if self.watchdog else None
        if stall is not None:
            seen = wait_for_cycle(stall.snapshot or [])
            delivered = np.asarray(run.transport.t_deliver, dtype=float)
            rows.append(
                (
                    "observed",
                    stall.t_ns,
                    float(np.nanmax(delivered)) if np.isfinite(delivered).any() else math.nan,
                    stall.outstanding,
                    len(seen) if seen else 0,
                    self._text(seen) if seen else "",
                )
            )
        deadlocks = pd.DataFrame(
            [(k, *row) for k, row in enumerate(rows)], columns=list(DEADLOCK_COLUMNS)
        )
        end = stall.t_ns if stall is not None else run.simulated_ns
        return {
            "tenants": tenant_table(self.runs, end, self.section.tenants),
            "deadlocks": deadlocks,
        }

    def _text(self, cycle: list[Buffer]) -> str:
        return cycle_text(cycle, self._channel)

    def metrics(self, run: Finished) -> dict[str, object]:
        table = run.tables["tenants"]
        issued = int(table["issued"].sum())
        offered = float(table["offered_gbps"].sum())
        delivered = float(table["delivered_gbps"].sum())
        stall = self.watchdog.stall if self.watchdog else None
        return {
            "tenants": {
                "tenants": int(table["tenant"].nunique()),
                "requests_issued": issued,
                "ack_timeouts": int(table["ack_timeouts"].sum()),
                "ack_timeout_pct": (
                    100.0 * float(table["ack_timeouts"].sum()) / issued if issued else None
                ),
                # Over every tenant: what a study of the tenant count compares.
                "offered_gbps": offered,
                "delivered_gbps": delivered,
                "throughput_loss_pct": 100.0 * (1.0 - delivered / offered) if offered else None,
                "worst_p99_latency_ns": _finite_max(table["p99_latency_ns"]),
                **self._vc_mixing(run.tables.get("vc_tenants")),
                "deadlock_possible": self.possible is not None,
                "deadlocked": stall is not None,
                "deadlocked_at_ns": None if stall is None else stall.t_ns,
            }
        }

    def _vc_mixing(self, seen: pd.DataFrame | None) -> dict[str, float | None]:
        """What the switches' inputs saw on their VCs (``vc_tenants``, input-queued switches
        only): tenants per VC that carried traffic (the observed VC reuse), the share of
        those VCs on which requests and completions met, and the share of its input's bytes
        the busiest such VC carried (mean over inputs; 0 where none mixes).

        A VC's rows are per tenant, so a tenant's requests and completions are told apart by
        their mean size: below the completion size, requests rode it; above the request
        size, completions did. That needs one request and one completion size over the
        workloads; otherwise (or with no such table) the three are None.
        """
        sizes = {
            (int(wl.request_bytes), int(wl.response_bytes)) for _, wl in self.section.workloads
        }
        none: dict[str, float | None] = dict.fromkeys(VC_MIXING)
        if seen is None or len(sizes) != 1:
            return none
        ((request_bytes, response_bytes),) = sizes
        seen = seen[seen["messages"] > 0]
        if seen.empty:
            return none
        mean_bytes = seen["bytes"] / seen["messages"]
        seen = seen.assign(
            requests=mean_bytes < response_bytes, completions=mean_bytes > request_bytes
        )
        per_vc = seen.groupby(["switch", "port", "vc"]).agg(
            tenants=("tenant", "nunique"),
            requests=("requests", "any"),
            completions=("completions", "any"),
            bytes=("bytes", "sum"),
        )
        mixed = per_vc["requests"] & per_vc["completions"]
        inputs = per_vc.groupby(level=["switch", "port"])["bytes"]
        share = per_vc["bytes"] / inputs.transform("sum")
        busiest = share.where(mixed, 0.0).groupby(level=["switch", "port"]).max()
        return {
            "vc_reuse_observed": float(per_vc["tenants"].mean()),
            "mixed_vc_pct": 100.0 * float(mixed.mean()),
            "mixed_vc_load_pct": 100.0 * float(busiest.mean()),
        }


VC_MIXING = ("vc_reuse_observed", "mixed_vc_pct", "mixed_vc_load_pct")


def _finite_max(column: pd.Series) -> float | None:
    """The column's largest finite value, or None (no tenant completed a request)."""
    finite = column[np.isfinite(column.to_numpy(dtype=float))]
    return float(finite.max()) if len(finite) else None


def _build(
    section: WorkloadSection[TenantRequestsWorkload],
    fabric: Fabric,
    wiring: Wiring,
    where: Locator,
) -> Stage:
    if not section.workloads:
        return Stage()
    wiring.answered_kinds = wiring.answered_kinds | {KIND_TENANT_REQUEST}
    # One answer queue per target: the smallest any workload asks for bounds them all.
    wiring.answer_slots = min(wl.completion_queue for _, wl in section.workloads)
    return TenantRequestStage(section, fabric, where, wiring.message_vcs)


STAGE = StageSpec(
    name="tenant_requests",
    section=tenant_requests_section,
    builder=_build,
    checker=check_tenant_request_workloads,
    packet_only="bounded answer queues and switch buffers, where requests wait (and can "
    "deadlock) holding their credits",
)
