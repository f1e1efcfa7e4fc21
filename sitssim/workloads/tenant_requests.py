"""Tenants' requests and completions, and the ACK timeouts they see (``switch.vc_tenants``).

Theory of operation
-------------------
A ``kind: tenant_requests`` workload makes every requester GPU (``sources``, default all)
issue requests at Poisson times to the other GPUs (``targets``, uniform), dealt in turn
over the tenants (``tenants``, default all), so a fixed total load is split evenly however
many tenants share it. A request is a non-posted message (kind ``tenant_request``, class
NP) of ``request_bytes``; its target answers it after ``turnaround`` with a completion
(kind ``tenant_response``, class Cpl) of ``response_bytes``. Both travel on the VCs the
tenant's quota gives its classes (``sitssim.switch.vc_quota.message_vcs``), so with more
tenants than VCs, or a single VC per tenant, requests and completions share VCs.

Targets accept a request only when they can queue its completion
(``fabric.nodes.AnsweringEndpoint``): a target holds at most ``completion_queue``
completions being made or waiting for their link, and a request that finds no place
waits in the buffer it arrived in, keeping that buffer's credits. With bounded buffers
and requests and completions in one VC's FIFO this can deadlock, which is what the
run's watchdog and the switch layer's deadlock check look for
(``sitssim.switch.deadlock``).

A requester holds at most ``tags`` requests without their completion (its tag space); a
request ready while every tag is in use waits, in order, for one. The requester counts
an *ACK timeout* for each request whose completion came more than ``ack_timeout`` after
it was issued, or had not come when the run ended with the request issued longer ago
than that. A completion is *on time* otherwise; requests still within their timeout
when the run ends are *pending*. No retry is modelled: a timed-out request's tag is
freed when its completion finally comes. Offered throughput is the requests' completion
bytes over the workload's window (``start`` to ``stop``); delivered throughput counts
on-time completions only (a requester that has timed a request out has discarded it),
over the window or until the last of them came in, if later: a fabric that cannot keep up
delivers what it was offered late, over a longer span.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sitssim.config.tenant_requests_config import TenantRequestsWorkload
from sitssim.fabric.messages import KIND_TENANT_REQUEST, KIND_TENANT_RESPONSE
from sitssim.fabric.ports import Hop, callbacks_of
from sitssim.rng import component_rng
from sitssim.workloads.arrivals import poisson_times
from sitssim.workloads.gpu_names import require_gpu

if TYPE_CHECKING:
    from sitssim.errors import Locator
    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport
    from sitssim.workloads.section import WorkloadSection

TENANT_COLUMNS = (
    "workload",
    "tenant",
    "offered",
    "issued",
    "completed",
    "on_time",
    "ack_timeouts",
    "pending",
    "ack_timeout_pct",
    "offered_gbps",
    "delivered_gbps",
    "throughput_loss_pct",
    "mean_latency_ns",
    "p99_latency_ns",
)
"""The ``tenants`` table: one row per (workload, tenant)."""


@dataclass
class _Requester:
    node: int
    times: list[float]
    targets: list[int]
    tenants: list[int]
    next: int = 0
    free_tags: int = 0
    waiting: deque[int] = field(default_factory=deque)


@dataclass
class TenantRequestRun:
    """One workload's requests, filled in as the run goes; request ``r`` is the ``r``-th
    drawn, over all requesters."""

    index: int
    wl: TenantRequestsWorkload
    tenants: list[int]
    transport: Transport
    requesters: list[_Requester] = field(default_factory=list)
    # Per request: its requester (index into requesters), tenant, when it was issued and
    # completed (nan: not yet), and its target.
    owner: list[int] = field(default_factory=list)
    tenant: list[int] = field(default_factory=list)
    t_issue: list[float] = field(default_factory=list)
    t_complete: list[float] = field(default_factory=list)
    target: list[int] = field(default_factory=list)
    stop_ns: float = 0.0
    on_issue: Callable[[], None] | None = None
    """Called after each request is issued (a watchdog's ``arm``: work is outstanding)."""
    # The request each request message carries, and the events' shared callback lists.
    _request_of: dict[int, int] = field(default_factory=dict)
    _arrive_cbs: list[Callable[[Hop], None]] = field(default_factory=list)
    _respond_cbs: list[Callable[[Hop], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._arrive_cbs = callbacks_of(self._arrive)
        self._respond_cbs = callbacks_of(self._respond)

    def arm(self, sources: list[int], targets: list[int], seed: int, duration: float) -> None:
        """Draw every requester's requests (Poisson, from the streams of ``seed``) and arm
        one arrival chain per requester: one event pending per requester, not per request."""
        wl = self.wl
        name = wl.name or f"#{self.index}"
        self.stop_ns = wl.stop if wl.stop is not None else duration
        t = self.transport
        for k, src in enumerate(sources):
            rng = component_rng(seed, "tenant_requests", name, "requester", k)
            mean = self._interval(src)
            times = poisson_times(rng, wl.start, self.stop_ns, mean)
            others = [d for d in targets if d != src]
            dst = rng.integers(len(others), size=len(times)) if others else np.zeros(0, int)
            # Dealt in turn, from a different tenant at each requester, so that the split
            # is even at every requester and over the fabric.
            turn = [self.tenants[(k + j) % len(self.tenants)] for j in range(len(times))]
            self.requesters.append(
                _Requester(
                    src,
                    times.tolist(),
                    [others[j] for j in dst.tolist()],
                    turn,
                    free_tags=wl.tags,
                )
            )
        for k, req in enumerate(self.requesters):
            if req.times:
                t.env.schedule(Hop(self._arrive_cbs, k), delay=req.times[0] - t.env.now)
        last = max((r.times[-1] for r in self.requesters if r.times), default=0.0)
        t.expect_activity_until(last)
        t.on_delivery(KIND_TENANT_REQUEST, self._answer)

    def _interval(self, src: int) -> float:
        wl = self.wl
        if wl.interval is not None:
            return wl.interval
        assert wl.load is not None
        # ``load`` is the completions' share of the requester's link bandwidth.
        bandwidth = self.transport.fabric.injection_bytes_per_ns[self.transport.nodes[src]]
        return wl.response_bytes / (wl.load * bandwidth)

    # --- events -------------------------------------------------------------------

    def _arrive(self, ev: Hop) -> None:
        k = ev.msg
        req = self.requesters[k]
        now = self.transport.env._now
        r = len(self.owner)
        self.owner.append(k)
        self.tenant.append(req.tenants[req.next])
        self.t_issue.append(math.nan)
        self.t_complete.append(math.nan)
        target = req.targets[req.next]
        req.next += 1
        if req.next < len(req.times):
            self.transport.env.schedule(Hop(self._arrive_cbs, k), delay=req.times[req.next] - now)
        req.waiting.append(r)
        self.target.append(target)
        self._issue(req)

    def _issue(self, req: _Requester) -> None:
        while req.waiting and req.free_tags:
            r = req.waiting.popleft()
            req.free_tags -= 1
            t = self.transport
            self.t_issue[r] = t.env._now
            msg = t.inject(
                req.node,
                self.target[r],
                self.wl.request_bytes,
                self.tenant[r],
                KIND_TENANT_REQUEST,
                self.index,
            )
            self._request_of[msg] = r
            if self.on_issue is not None:
                self.on_issue()

    def _answer(self, msg: int) -> None:
        r = self._request_of.get(msg)
        if r is None:
            return
        turnaround = self.wl.turnaround
        if turnaround > 0:
            self.transport.env.schedule(Hop(self._respond_cbs, msg), delay=turnaround)
        else:
            self._respond_to(msg)

    def _respond(self, ev: Hop) -> None:
        self._respond_to(ev.msg)

    def _respond_to(self, request: int) -> None:
        t = self.transport
        r = self._request_of[request]
        t.inject(
            t.dst[request],
            t.src[request],
            self.wl.response_bytes,
            self.tenant[r],
            KIND_TENANT_RESPONSE,
            self.index,
            parent=request,
            on_deliver=partial(self._completed, r),
        )

    def _completed(self, r: int, _msg: int) -> None:
        self.t_complete[r] = self.transport.env._now
        req = self.requesters[self.owner[r]]
        req.free_tags += 1
        self._issue(req)

    # --- results ------------------------------------------------------------------

    def rows(self, end_ns: float, tenant_names: Sequence[str]) -> list[tuple[object, ...]]:
        """The ``tenants`` rows of this workload, for a run that ended at ``end_ns``."""
        timeout = self.wl.ack_timeout
        window_ns = max(self.stop_ns - self.wl.start, 1e-9)
        issue = np.asarray(self.t_issue, dtype=float)
        done = np.asarray(self.t_complete, dtype=float)
        tenant = np.asarray(self.tenant, dtype=np.int64)
        latency = done - issue
        completed = ~np.isnan(done)
        on_time = completed & (latency <= timeout)
        issued = ~np.isnan(issue)
        # Issued, uncompleted and older than the timeout when the run ended, or late.
        timed_out = (completed & ~on_time) | (issued & ~completed & (end_ns - issue > timeout))
        # Delivered throughput is over the time the completions took to come in: a fabric
        # that cannot keep up delivers the offered requests late, over a longer span.
        last = float(done[on_time].max()) if on_time.any() else self.stop_ns
        delivered_ns = max(last, self.stop_ns) - self.wl.start
        rows = []
        for ti in self.tenants:
            mine = tenant == ti
            offered = int(mine.sum())
            n_on_time = int((mine & on_time).sum())
            n_timeouts = int((mine & timed_out).sum())
            lat = latency[mine & completed]
            offered_gbps = offered * self.wl.response_bytes * 8 / window_ns
            delivered_gbps = n_on_time * self.wl.response_bytes * 8 / delivered_ns
            n_issued = int((mine & issued).sum())
            rows.append(
                (
                    self.index,
                    tenant_names[ti],
                    offered,
                    n_issued,
                    int((mine & completed).sum()),
                    n_on_time,
                    n_timeouts,
                    n_issued - n_on_time - n_timeouts,
                    100.0 * n_timeouts / n_issued if n_issued else math.nan,
                    offered_gbps,
                    delivered_gbps,
                    100.0 * (1.0 - delivered_gbps / offered_gbps) if offered else math.nan,
                    float(lat.mean()) if len(lat) else math.nan,
                    float(np.percentile(lat, 99)) if len(lat) else math.nan,
                )
            )
        return rows


# --- checks and start ----------------------------------------------------------------


def _gpus(
    where: Locator, fabric: Fabric, index: int, key: str, names: list[str] | None
) -> list[str]:
    if names is None:
        return list(fabric.gpus)
    for k, name in enumerate(names):
        require_gpu(where, fabric, ("workloads", index, key, k), name)
    return list(names)


def _check(
    where: Locator, fabric: Fabric, section: WorkloadSection[TenantRequestsWorkload], index: int
) -> tuple[list[str], list[str], list[int]]:
    wl = dict(section.workloads)[index]
    sources = _gpus(where, fabric, index, "sources", wl.sources)
    targets = _gpus(where, fabric, index, "targets", wl.targets)
    if not any(t != s for s in sources for t in targets):
        raise where.error(("workloads", index, "targets"), "no target other than the requester")
    # The scenario has checked the names; no list means every tenant (the default one, if
    # the scenario names none).
    names = wl.tenants or section.tenants
    return sources, targets, [section.tenant_index(name) for name in names]


def check_tenant_request_workloads(
    section: WorkloadSection[TenantRequestsWorkload], fabric: Fabric, where: Locator
) -> None:
    """Everything ``start_tenant_request_workloads`` would reject, without a transport."""
    for i, _ in section.workloads:
        _check(where, fabric, section, i)


def start_tenant_request_workloads(
    section: WorkloadSection[TenantRequestsWorkload],
    fabric: Fabric,
    transport: Transport,
    where: Locator,
) -> list[TenantRequestRun]:
    """Arm every ``kind: tenant_requests`` workload; the runs fill in as the run goes."""
    runs = []
    for i, wl in section.workloads:
        sources, targets, tenants = _check(where, fabric, section, i)
        run = TenantRequestRun(index=i, wl=wl, tenants=tenants, transport=transport)
        run.arm(
            [transport.node_id[s] for s in sources],
            [transport.node_id[t] for t in targets],
            section.seed,
            section.duration,
        )
        runs.append(run)
    return runs


def tenant_table(
    runs: Sequence[TenantRequestRun], end_ns: float, tenant_names: Sequence[str]
) -> pd.DataFrame:
    """The ``tenants`` table of a run that ended at ``end_ns``."""
    rows = [row for run in runs for row in run.rows(end_ns, tenant_names)]
    return pd.DataFrame(rows, columns=list(TENANT_COLUMNS))
