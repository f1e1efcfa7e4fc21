"""``kind: collective`` workloads: their calls back to back, run bare or as NCCL runs them.

Each workload is a sequence of calls (``CollectiveWorkload.plan``), each started ``gap``
after the last one ended. A bare workload starts ``collectives.start_collective``; one that
runs as NCCL does asks ``ccl_choice.CallChooser`` what NCCL would run for the call's size and
runs it as ``ccl_ring.CclRing``. Each call leaves a record, and the records make the
``collectives`` table (one row per call, with the algorithm, protocol and channels it ran
with) and the report's summary of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sitssim.config.collective_config import CollectiveWorkload, HostLaunch
from sitssim.config.switch_capabilities import SwitchCapabilities
from sitssim.workloads.ccl_calls import NcclCalls
from sitssim.workloads.ccl_choice import not_an_nccl_fabric, nvls_unavailable
from sitssim.workloads.ccl_nvls import CclNvls
from sitssim.workloads.ccl_ring import CclRing
from sitssim.workloads.collectives import (
    CollectiveHandle,
    bus_factor,
    ring_all_reduce_lower_bound_ns,
    start_collective,
)
from sitssim.workloads.custom_allreduce import custom_run
from sitssim.workloads.gpu_names import require_gpu
from sitssim.workloads.host_launch import enqueued_ns, issue_started_ns
from sitssim.workloads.section import WorkloadSection

if TYPE_CHECKING:
    from sitssim.errors import Locator
    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport


@dataclass(frozen=True)
class CollectiveSection(WorkloadSection[CollectiveWorkload]):
    """The collective workloads, and what the fabric's switches can do (NVLS or not)."""

    switches: SwitchCapabilities = field(default_factory=SwitchCapabilities)


@dataclass
class _Record:
    workload: int
    name: str
    handle: CollectiveHandle
    repetition: int
    lower_bound_ns: float


class _Sequence:
    """Runs one workload's collectives back to back; each starts ``gap`` after the last ended."""

    def __init__(
        self,
        index: int,
        wl: CollectiveWorkload,
        gpus: list[str],
        tenant: int,
        fabric: Fabric,
        transport: Transport,
        records: list[_Record],
        switches: SwitchCapabilities,
    ) -> None:
        self.index = index
        self.wl = wl
        self.gpus = gpus
        self.tenant = tenant
        self.fabric = fabric
        self.transport = transport
        self.records = records
        self.plan = wl.plan()
        self.next = 0
        self.nccl = (
            NcclCalls(wl, fabric, transport, gpus, switches, tenant, index)
            if wl.runs_as_nccl
            else None
        )

    def arm(self, delay: float) -> None:
        self.transport.env.timeout(delay).callbacks.append(lambda _ev: self._launch())

    def _launch(self) -> None:
        if self.wl.host is not None:
            self._launch_loop(self.wl.host)
            return
        size = self.plan[self.next]
        repetition = self.next % self.wl.repetitions
        self.next += 1
        if self.wl.custom is not None:
            handle = self._custom(size)
        elif self.nccl is None:
            handle = self._bare(size)
        else:
            handle = self.nccl.run(size, self._finished).start()
        self._record(handle, repetition)

    def _launch_loop(self, host: HostLaunch) -> None:
        """One size's repetitions as nccl-tests times them (``host_launch``): every call
        enqueued at once, GPU ``r`` starting call ``k`` when the host has enqueued it there
        and the GPU has finished call ``k - 1``."""
        nccl = self.nccl
        assert nccl is not None
        size = self.plan[self.next]
        reps = self.wl.repetitions
        self.next += reps
        n = len(self.gpus)
        loop_start = self.transport.env.now
        runs = [nccl.run(size, self._finished if k == reps - 1 else None) for k in range(reps)]
        for k, run in enumerate(runs):
            handle = run.start(hold=True)
            handle.start_ns = loop_start + issue_started_ns(host, n, k)
            self._record(handle, k)
            if k + 1 < reps:
                run.on_rank_done = partial(self._release_next, runs[k + 1], host, loop_start, k + 1)
        for rank in range(n):
            runs[0].release_at(rank, loop_start + enqueued_ns(host, n, 0, rank))

    def _release_next(
        self, run: CclRing | CclNvls, host: HostLaunch, loop_start: float, call: int, rank: int
    ) -> None:
        """``rank`` finished call ``call - 1``: it starts ``call`` once that is enqueued too."""
        run.release_at(rank, loop_start + enqueued_ns(host, len(self.gpus), call, rank))

    def _custom(self, size: int) -> CollectiveHandle:
        """A serving engine's custom all-reduce: the kernel vLLM would run for ``size``."""
        wl = self.wl
        assert wl.custom is not None
        run = custom_run(
            self.transport,
            self.gpus,
            size,
            wl.custom,
            self.tenant,
            self.index,
            self._finished,
            wl.max_message_bytes,
        )
        # The config refuses sizes past the custom kernel's buffer.
        assert run is not None
        return run.start()

    def _bare(self, size: int) -> CollectiveHandle:
        wl = self.wl
        return start_collective(
            wl.operation,
            self.transport,
            self.gpus,
            size,
            algorithm=wl.algorithm,
            tenant=self.tenant,
            workload=self.index,
            on_done=self._finished,
            max_message_bytes=wl.max_message_bytes,
            reduce_bytes_per_ns=wl.reduction_bandwidth,
            min_messages=wl.min_messages,
        )

    def _record(self, handle: CollectiveHandle, repetition: int) -> None:
        bound = math.nan
        if self.wl.operation == "all_reduce" and handle.algorithm == "ring":
            bound = ring_all_reduce_lower_bound_ns(self.fabric, self.gpus, handle.size)
        name = self.wl.name or f"#{self.index}"
        self.records.append(_Record(self.index, name, handle, repetition, bound))

    def _finished(self, _end_ns: float) -> None:
        if self.next < len(self.plan):
            self.arm(self.wl.gap)


def start_collective_workloads(
    section: CollectiveSection,
    fabric: Fabric,
    transport: Transport,
    where: Locator,
) -> list[_Record]:
    """Arm every ``kind: collective`` workload; the returned records fill in as the run goes."""
    records: list[_Record] = []
    for i, wl in section.workloads:
        gpus = _checked(where, fabric, i, wl, section.switches)
        tenant = section.tenant_index(wl.tenant)
        sequence = _Sequence(i, wl, gpus, tenant, fabric, transport, records, section.switches)
        sequence.arm(wl.start)
    return records


def check_collective_gpus(
    where: Locator, fabric: Fabric, index: int, wl: CollectiveWorkload
) -> list[str]:
    """The workload's GPUs, checked against the built fabric (``InputError`` if one is wrong)."""
    at = where.within("workloads", index, "gpus")
    if wl.gpus is None:
        if len(fabric.gpus) < 2:
            raise at.error((), "a collective needs at least two GPUs; the fabric has one")
        return list(fabric.gpus)
    for k, g in enumerate(wl.gpus):
        require_gpu(at, fabric, (k,), g)
    return list(wl.gpus)


def check_collective_workloads(section: CollectiveSection, fabric: Fabric, where: Locator) -> None:
    """Everything ``start_collective_workloads`` would reject, without a transport."""
    for i, wl in section.workloads:
        _checked(where, fabric, i, wl, section.switches)


def _checked(
    where: Locator,
    fabric: Fabric,
    index: int,
    wl: CollectiveWorkload,
    switches: SwitchCapabilities,
) -> list[str]:
    """The workload's GPUs, once it is known to run on this fabric (``InputError`` if not)."""
    gpus = check_collective_gpus(where, fabric, index, wl)
    refusal = not_an_nccl_fabric(fabric) if wl.runs_as_nccl else ""
    if refusal:
        at = where.within("workloads", index, "protocol" if wl.protocol else "algorithm")
        raise at.error((), f"{refusal}: use a bare algorithm (no 'protocol', not 'auto')")
    if wl.algorithm == "nvls":
        why = nvls_unavailable(wl, len(gpus), switches)
        if why:
            raise where.within("workloads", index, "algorithm").error((), why)
    return gpus


COLLECTIVE_COLUMNS = (
    "id",
    "workload",
    "name",
    "operation",
    "algorithm",
    "protocol",
    "channels",
    "bytes",
    "n_ranks",
    "repetition",
    "t_start_ns",
    "t_end_ns",
    "duration_ns",
    "algbw_GBps",
    "busbw_GBps",
    "messages",
    "chunk_sends",
    "lower_bound_ns",
    "result_complete",
)


BARE_PROTOCOL = "none"
"""The protocol column of a bare call, which has no channels either (0)."""


def collectives_table(records: list[_Record]) -> pd.DataFrame:
    """One row per collective, in start order; bandwidths as nccl-tests defines them (GB/s)."""
    rows = []
    for k, rec in enumerate(records):
        h = rec.handle
        duration = h.duration_ns
        algbw = h.size / duration if duration > 0 else math.nan
        rows.append(
            (
                k,
                rec.workload,
                rec.name,
                h.operation,
                h.algorithm,
                h.protocol or BARE_PROTOCOL,
                h.channels if h.protocol else 0,
                h.size,
                h.n_ranks,
                rec.repetition,
                h.start_ns,
                h.end_ns,
                duration,
                algbw,
                algbw * bus_factor(h.operation, h.n_ranks),
                len(h.messages),
                h.chunk_sends,
                rec.lower_bound_ns,
                h.done and h.result_complete(),
            )
        )
    table = pd.DataFrame.from_records(rows, columns=list(COLLECTIVE_COLUMNS))
    return table.astype(
        {
            "id": np.int64,
            "workload": np.int64,
            "channels": np.int64,
            "bytes": np.int64,
            "n_ranks": np.int64,
            "repetition": np.int64,
            "messages": np.int64,
            "chunk_sends": np.int64,
            "t_start_ns": float,
            "t_end_ns": float,
            "duration_ns": float,
            "algbw_GBps": float,
            "busbw_GBps": float,
            "lower_bound_ns": float,
            "result_complete": bool,
        }
    )


def collective_metrics(table: pd.DataFrame) -> dict[str, object]:
    """Report summary: how many ran, how fast the largest ones went, how close to the bound."""
    if table.empty:
        return {"count": 0}
    largest = table[table["bytes"] == table["bytes"].max()]
    bounded = table.dropna(subset=["lower_bound_ns"])
    ratio = (bounded["duration_ns"] / bounded["lower_bound_ns"]).replace(np.inf, np.nan)
    return {
        "count": len(table),
        "incomplete": int((~table["result_complete"]).sum()),
        "smallest_duration_ns": float(table["duration_ns"].min()),
        "largest_bytes": int(largest["bytes"].iloc[0]),
        "busbw_at_largest_GBps": float(largest["busbw_GBps"].mean()),
        "max_busbw_GBps": float(table["busbw_GBps"].max()),
        "ring_over_lower_bound_at_largest": (
            float((largest["duration_ns"] / largest["lower_bound_ns"]).mean())
            if largest["lower_bound_ns"].notna().all()
            else None
        ),
        "ring_over_lower_bound_max": float(ratio.max()) if ratio.notna().any() else None,
    }
