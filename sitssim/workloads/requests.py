"""Ordered memory transactions on the request path: ATS, PCIe ordering and a reorder buffer.

Theory of operation
-------------------
A ``kind: transactions`` workload is one requester (the root complex by
default) issuing memory writes (posted) and reads (non-posted) to target
GPUs. Per target, transactions become *ready* at Poisson times, in program
order at the requester's egress; each is a read with ``read_fraction``.

1. **Translation.** Every request's address goes through the requester's
   address-translation cache: a hit (probability ``atc_hit_ratio``) costs
   nothing, a miss costs ``atc_miss_latency`` (the translation request to the
   translation agent and back, modelled as a delay). An untranslated request
   cannot leave, and it holds back whatever the ordering rules forbid to pass it.
2. **Ordering.** ``sitssim.fabric.ordering.EgressQueue`` decides which pending
   requests may be issued, under the PCIe ordering table with each request's
   relaxed-ordering and ID-based-ordering bits; ``requester_ids`` functions
   share the egress (IDO only separates different IDs).
3. **Reorder buffer.** A read takes a tag of the requester's reorder buffer at
   issue; its completion comes back through the fabric after the completer's
   ``turnaround``, possibly overtaking earlier reads' completions from other
   GPUs, and is released in issue order. With every tag in use, no read is
   issued: the intervals in which a read was ready and allowed by ordering but
   had no tag are the ``rob_stalls`` table.

Requests and completions are ordinary transport messages (kinds ``txn_write``,
``txn_read`` and ``txn_completion``, which travel in the P, NP and Cpl flow-control
classes; ``workload`` = this workload's index). ``transaction_probe_rows`` adds every
completed read to the ``probes`` table as a round trip seen by the requester:
from ready to release, so ``fabric.tso_window`` covers translation, ordering
and reorder-buffer waits as well as the fabric's round trip.

The scenario schema (``TransactionWorkload``) is in
:mod:`sitssim.config.transaction_config`, so loading a scenario imports none of this.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sitssim.config.transaction_config import TransactionWorkload
from sitssim.fabric.messages import KIND_TXN_COMPLETION, KIND_TXN_READ, KIND_TXN_WRITE
from sitssim.fabric.ordering import EgressQueue, ReorderBuffer, Tlp
from sitssim.link.credits import FcClass
from sitssim.rng import component_rng
from sitssim.summaries import sample_summary
from sitssim.workloads.arrivals import poisson_times

if TYPE_CHECKING:
    from sitssim.errors import Locator
    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport
    from sitssim.workloads.section import WorkloadSection


@dataclass
class _Txn:
    tlp: Tlp
    target: int
    t_ready: float
    atc_hit: bool
    translated: bool = False
    request_msg: int = -1
    completion_msg: int = -1
    t_issue: float = math.nan
    t_complete: float = math.nan
    t_release: float = math.nan
    tag: int = -1


@dataclass
class TransactionRun:
    """One workload's requester, filled in as the run goes."""

    index: int
    wl: TransactionWorkload
    requester: str
    requester_node: int
    targets: list[str]
    target_nodes: list[int]
    tenant: int
    transport: Transport
    txns: list[_Txn] = field(default_factory=list)
    queue: EgressQueue = field(default_factory=EgressQueue)
    rob: ReorderBuffer | None = None
    stalls: list[tuple[float, float]] = field(default_factory=list)
    _stall_since: float | None = None
    _rob_full_seen: bool = False

    def arm(self, seed: int, duration: float) -> None:
        """Draw the requests (the workload stops at ``duration`` unless it says when) from
        the streams of ``seed`` and schedule them."""
        self.rob = ReorderBuffer(self.wl.rob_depth)
        wl = self.wl
        name = wl.name or f"#{self.index}"
        stop = wl.stop if wl.stop is not None else duration
        times, targets = [], []
        for k, _ in enumerate(self.targets):
            rng = component_rng(seed, "transactions", name, "target", k)
            t = poisson_times(rng, wl.start, stop, wl.interval)
            times.append(t)
            targets.append(np.full(len(t), k))
        t_ready = np.concatenate(times) if times else np.zeros(0)
        target = np.concatenate(targets).astype(np.int64) if targets else np.zeros(0, np.int64)
        order = np.argsort(t_ready, kind="stable")
        t_ready, target = t_ready[order], target[order]
        n = len(t_ready)
        attrs = component_rng(seed, "transactions", name, "attributes")
        read = attrs.random(n) < wl.read_fraction
        ro = attrs.random(n) < wl.relaxed_ordering
        ido = attrs.random(n) < wl.id_based_ordering
        rid = attrs.integers(0, wl.requester_ids, n)
        hit = component_rng(seed, "transactions", name, "atc").random(n) < wl.atc_hit_ratio
        miss_ns = wl.atc_miss_latency or 0.0
        env = self.transport.env
        for i in range(n):
            tlp = Tlp(
                txn_id=i,
                cls=FcClass.NP if read[i] else FcClass.P,
                requester_id=int(rid[i]),
                ro=bool(ro[i]),
                ido=bool(ido[i]),
            )
            txn = _Txn(tlp, int(target[i]), float(t_ready[i]), bool(hit[i]))
            self.txns.append(txn)
            env.timeout(txn.t_ready).callbacks.append(partial(self._ready, txn))
            env.timeout(txn.t_ready + (0.0 if txn.atc_hit else miss_ns)).callbacks.append(
                partial(self._translated, txn)
            )
        if n:
            self.transport.expect_activity_until(float(t_ready[-1]))

    # --- events -------------------------------------------------------------------

    def _ready(self, txn: _Txn, _ev: Any) -> None:
        self.queue.push(txn.tlp)
        self._issue()

    def _translated(self, txn: _Txn, _ev: Any) -> None:
        txn.translated = True
        self._issue()

    def _can_issue(self, tlp: Tlp) -> bool:
        txn = self.txns[tlp.txn_id]
        if not txn.translated:
            return False
        if tlp.cls is FcClass.NP:
            if self.rob.free == 0:
                self._rob_full_seen = True
                return False
            txn.tag = self.rob.allocate(tlp.txn_id)
        return True

    def _issue(self) -> None:
        now = self.transport.env.now
        self._rob_full_seen = False
        for tlp in self.queue.issue(self._can_issue):
            self._inject(self.txns[tlp.txn_id], now)
        if self._rob_full_seen and self._stall_since is None:
            self._stall_since = now
        elif not self._rob_full_seen and self._stall_since is not None:
            self.stalls.append((self._stall_since, now))
            self._stall_since = None

    def _inject(self, txn: _Txn, now: float) -> None:
        txn.t_issue = now
        read = txn.tlp.cls is FcClass.NP
        txn.request_msg = self.transport.inject(
            self.requester_node,
            self.target_nodes[txn.target],
            self.wl.request_bytes if read else self.wl.write_bytes,
            self.tenant,
            KIND_TXN_READ if read else KIND_TXN_WRITE,
            self.index,
            on_deliver=partial(self._request_delivered, txn),
        )

    def _request_delivered(self, txn: _Txn, _msg: int) -> None:
        env = self.transport.env
        if txn.tlp.cls is FcClass.P:
            txn.t_complete = env.now
            return
        if self.wl.turnaround > 0:
            env.timeout(self.wl.turnaround).callbacks.append(partial(self._send_completion, txn))
        else:
            self._send_completion(txn, None)

    def _send_completion(self, txn: _Txn, _ev: Any) -> None:
        txn.completion_msg = self.transport.inject(
            self.target_nodes[txn.target],
            self.requester_node,
            self.wl.completion_bytes,
            self.tenant,
            KIND_TXN_COMPLETION,
            self.index,
            parent=txn.request_msg,
            on_deliver=partial(self._completed, txn),
        )

    def _completed(self, txn: _Txn, _msg: int) -> None:
        now = self.transport.env.now
        txn.t_complete = now
        for txn_id in self.rob.complete(txn.tag):
            self.txns[txn_id].t_release = now
        self._issue()


def _check(
    where: Locator, fabric: Fabric, index: int, wl: TransactionWorkload
) -> tuple[str, list[str]]:
    loc = ("workloads", index)
    if wl.requester is None:
        requester = fabric.root if fabric.root is not None else fabric.gpus[0]
    else:
        requester = wl.requester
        if requester not in fabric.graph:
            raise where.error((*loc, "requester"), f"unknown node {requester!r}")
        if fabric.node_kind(requester) == "switch":
            raise where.error(
                (*loc, "requester"), f"{requester!r} is a switch; it issues no requests"
            )
    if wl.targets is None:
        targets = [g for g in fabric.gpus if g != requester]
        if not targets:
            raise where.error((*loc, "targets"), "no GPU other than the requester to target")
        return requester, targets
    for k, t in enumerate(wl.targets):
        if t not in fabric.graph:
            raise where.error(
                (*loc, "targets", k),
                f"unknown node {t!r}; GPUs are {fabric.gpus[0]}..{fabric.gpus[-1]}",
            )
        if fabric.node_kind(t) != "gpu":
            raise where.error((*loc, "targets", k), f"{t!r} is a {fabric.node_kind(t)}")
        if t == requester:
            raise where.error((*loc, "targets", k), "a requester cannot target itself")
    return requester, list(wl.targets)


def check_transaction_workloads(
    section: WorkloadSection[TransactionWorkload], fabric: Fabric, where: Locator
) -> None:
    """Everything ``start_transaction_workloads`` would reject, without a transport."""
    for i, wl in section.workloads:
        _check(where, fabric, i, wl)


def start_transaction_workloads(
    section: WorkloadSection[TransactionWorkload],
    fabric: Fabric,
    transport: Transport,
    where: Locator,
) -> list[TransactionRun]:
    """Arm every ``kind: transactions`` workload; the returned runs fill in as the run goes."""
    runs: list[TransactionRun] = []
    for i, wl in section.workloads:
        requester, targets = _check(where, fabric, i, wl)
        run = TransactionRun(
            index=i,
            wl=wl,
            requester=requester,
            requester_node=transport.node_id[requester],
            targets=targets,
            target_nodes=[transport.node_id[t] for t in targets],
            tenant=section.tenant_index(wl.tenant),
            transport=transport,
        )
        run.arm(section.seed, section.duration)
        runs.append(run)
    return runs


# --- tables ------------------------------------------------------------------------


def transaction_tables(runs: Sequence[TransactionRun]) -> dict[str, pd.DataFrame]:
    """``transactions`` (one row per request) and ``rob_stalls`` (intervals with no free tag)."""
    rows: dict[str, list] = {
        k: []
        for k in (
            "txn_id",
            "workload",
            "requester",
            "requester_id",
            "target",
            "class",
            "ro",
            "ido",
            "t_ready_ns",
            "t_issue_ns",
            "t_complete_ns",
            "t_release_ns",
            "rtt_ns",
            "atc_hit",
            "rob_wait_ns",
            "request_msg",
            "completion_msg",
        )
    }
    stalls: dict[str, list] = {k: [] for k in ("workload", "requester", "t_start_ns", "t_end_ns")}
    txn_id = 0
    for run in runs:
        for txn in run.txns:
            read = txn.tlp.cls is FcClass.NP
            rows["txn_id"].append(txn_id)
            rows["workload"].append(run.index)
            rows["requester"].append(run.requester)
            rows["requester_id"].append(txn.tlp.requester_id)
            rows["target"].append(run.targets[txn.target])
            rows["class"].append(txn.tlp.cls.value)
            rows["ro"].append(txn.tlp.ro)
            rows["ido"].append(txn.tlp.ido)
            rows["t_ready_ns"].append(txn.t_ready)
            rows["t_issue_ns"].append(txn.t_issue)
            rows["t_complete_ns"].append(txn.t_complete)
            rows["t_release_ns"].append(txn.t_release)
            rows["rtt_ns"].append(txn.t_complete - txn.t_issue if read else math.nan)
            rows["atc_hit"].append(txn.atc_hit)
            rows["rob_wait_ns"].append(txn.t_release - txn.t_complete if read else math.nan)
            rows["request_msg"].append(txn.request_msg)
            rows["completion_msg"].append(txn.completion_msg)
            txn_id += 1
        for start, end in run.stalls:
            stalls["workload"].append(run.index)
            stalls["requester"].append(run.requester)
            stalls["t_start_ns"].append(start)
            stalls["t_end_ns"].append(end)
    table = pd.DataFrame(rows)
    table["class"] = pd.Categorical(table["class"], categories=[c.value for c in FcClass])
    stall_table = pd.DataFrame(stalls)
    stall_table["duration_ns"] = stall_table["t_end_ns"] - stall_table["t_start_ns"]
    return {"transactions": table, "rob_stalls": stall_table}


def transaction_metrics(
    runs: Sequence[TransactionRun], tables: dict[str, pd.DataFrame], simulated_ns: float
) -> dict[str, object]:
    """Report summary per workload (by name, else ``workload<index>``): its requests, the
    time its reorder buffer had no free tag (and that time's share of the run), and its
    completed reads' round trips and waits in the buffer."""
    out: dict[str, object] = {}
    txns, stalls = tables["transactions"], tables["rob_stalls"]
    for run in runs:
        mine = txns[txns["workload"] == run.index]
        reads = mine[(mine["class"] == FcClass.NP.value) & mine["t_release_ns"].notna()]
        stall_ns = float(stalls.loc[stalls["workload"] == run.index, "duration_ns"].sum())
        out[run.wl.name or f"workload{run.index}"] = {
            "requests": len(mine),
            "reads_completed": len(reads),
            "rob_stall_ns": stall_ns,
            "rob_stall_fraction": stall_ns / simulated_ns if simulated_ns > 0 else 0.0,
            "read_rtt_ns": sample_summary(reads["rtt_ns"].to_numpy(), ("p50", "p99")),
            "rob_wait_ns": sample_summary(reads["rob_wait_ns"].to_numpy(), ("p50", "p99")),
        }
    return out


def transaction_probe_rows(transactions: pd.DataFrame, messages: pd.DataFrame) -> pd.DataFrame:
    """Issued reads as ``probes`` rows: the requester's round trip, from ready to release
    (NaN for a read not completed). A read a stopped run never issued (a watchdog ended it
    first) sent no request, so it has no row."""
    reads = transactions[
        (transactions["class"] == FcClass.NP.value) & (transactions["request_msg"] >= 0)
    ]
    requests = messages.set_index("msg_id").loc[reads["request_msg"].to_numpy()]
    return pd.DataFrame(
        {
            "probe_id": reads["request_msg"].to_numpy(),
            "src": requests["src"].to_numpy(),
            "dst": requests["dst"].to_numpy(),
            "hops": requests["hops"].to_numpy(),
            "t_issue_ns": reads["t_ready_ns"].to_numpy(),
            "rtt_ns": (reads["t_release_ns"] - reads["t_ready_ns"]).to_numpy(),
            "completion_id": reads["completion_msg"].to_numpy(),
        }
    )
