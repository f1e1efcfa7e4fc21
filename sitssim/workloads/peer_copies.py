"""``kind: p2p`` workloads: copies between GPUs, timed as p2pBandwidthLatencyTest times them.

Theory of operation
-------------------
CUDA's p2pBandwidthLatencyTest measures each ordered pair of GPUs in turn. Its latency
test blocks the stream behind a spinning kernel, enqueues its copies (a 16-byte copy each,
100 of them), releases the stream and reads the GPU events around them: the time per copy
is what the GPU spends on copies already queued, without the host's launch cost. Its
bandwidth test does the same with large copies, and with copies both ways at once for the
bidirectional figure (``docs/ccl_measurement_leads.md`` A2).

Here a pair's copies are one stream per direction, in order: a copy starts once the one
before it on the stream has landed, pays its engine's start cost (``copy_cost``: a copy
engine fetching its descriptor and setting the copy up, or a kernel's launch), and then
its bytes cross the fabric as the engine's write packets (``ccl.write_packets``: 256 data
bytes behind a 16-byte header from a copy engine, 128 from an SM), in messages of at most
``max_message_bytes``. It has landed when its last message is delivered. The time per copy
is the span from the first copy's start to the last one's landing, over the copies; the
bandwidth is the bytes copied (both ways, for ``both``) over that span. Pairs and sizes
follow one another (each of the workload's ``runs`` over every pair), ``gap`` apart, so no
two pairs share the fabric.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sitssim.ccl.write_packets import CE_WRITES, SM_WRITES, WritePackets
from sitssim.config.p2p_config import CopyRun, P2pWorkload
from sitssim.fabric.messages import KIND_PEER_COPY
from sitssim.workloads.collectives import chunk_sizes, messages_per_send
from sitssim.workloads.gpu_names import require_gpu
from sitssim.workloads.section import WorkloadSection

if TYPE_CHECKING:
    from sitssim.errors import Locator
    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport

ENGINE_WRITES: dict[str, WritePackets] = {"copy_engine": CE_WRITES, "sm": SM_WRITES}


@dataclass
class PairRecord:
    """One pair, size and direction: its copies' span, filled in as they land."""

    workload: int
    name: str
    src: str
    dst: str
    direction: str
    engine: str
    bytes: int
    copies: int
    t_start_ns: float
    t_end_ns: float = float("nan")
    messages: int = 0

    @property
    def time_per_copy_ns(self) -> float:
        return (self.t_end_ns - self.t_start_ns) / self.copies

    @property
    def bandwidth_GBps(self) -> float:
        streams = 2 if self.direction == "both" else 1
        span = self.t_end_ns - self.t_start_ns
        return streams * self.copies * self.bytes / span if span > 0 else float("nan")


class _Stream:
    """One direction's copies, in stream order; ``done`` is called when the last has landed."""

    def __init__(
        self,
        transport: Transport,
        src: int,
        dst: int,
        wl: P2pWorkload,
        index: int,
        tenant: int,
        run: CopyRun,
        done: Callable[[float], None],
    ) -> None:
        self.transport = transport
        self.src, self.dst = src, dst
        self.wl, self.index, self.tenant = wl, index, tenant
        self.wire = ENGINE_WRITES[wl.engine].wire_bytes(run.bytes)
        self.left = run.copies
        self.done = done
        self.messages = 0

    def start(self) -> None:
        """Start the next copy: its engine's start cost, then its writes."""
        env = self.transport.env
        env.timeout(self.wl.copy_cost).callbacks.append(lambda _ev: self._write())

    def _write(self) -> None:
        count = messages_per_send(self.wire, self.wl.max_message_bytes)
        pending = [count]

        def landed(_msg: int) -> None:
            pending[0] -= 1
            if pending[0] == 0:
                self._copied()

        for nbytes in chunk_sizes(self.wire, count):
            self.transport.inject(
                self.src,
                self.dst,
                nbytes,
                self.tenant,
                KIND_PEER_COPY,
                self.index,
                on_deliver=landed,
            )
        self.messages += count

    def _copied(self) -> None:
        self.left -= 1
        if self.left:
            self.start()
        else:
            self.done(self.transport.env.now)


class _PairSequence:
    """One workload's pairs and sizes, one after the other."""

    def __init__(
        self,
        index: int,
        wl: P2pWorkload,
        pairs: list[tuple[str, str]],
        tenant: int,
        transport: Transport,
        records: list[PairRecord],
    ) -> None:
        self.index, self.wl, self.tenant = index, wl, tenant
        self.transport = transport
        self.records = records
        self.plan = [(run, pair) for run in wl.runs for pair in pairs]
        self.next = 0

    def arm(self, delay: float) -> None:
        self.transport.env.timeout(delay).callbacks.append(lambda _ev: self._launch())

    def _launch(self) -> None:
        run, (src, dst) = self.plan[self.next]
        self.next += 1
        wl, t = self.wl, self.transport
        record = PairRecord(
            self.index,
            wl.name or f"#{self.index}",
            src,
            dst,
            run.direction,
            wl.engine,
            run.bytes,
            run.copies,
            t.env.now,
        )
        self.records.append(record)
        ends = [(t.node_id[src], t.node_id[dst])]
        if run.direction == "both":
            ends.append((t.node_id[dst], t.node_id[src]))
        left = [len(ends)]
        streams: list[_Stream] = []

        def stream_done(now: float) -> None:
            left[0] -= 1
            if left[0] == 0:
                record.t_end_ns = now
                record.messages = sum(s.messages for s in streams)
                if self.next < len(self.plan):
                    self.arm(wl.gap)

        for a, b in ends:
            streams.append(_Stream(t, a, b, wl, self.index, self.tenant, run, stream_done))
        for stream in streams:
            stream.start()


def workload_pairs(wl: P2pWorkload, fabric: Fabric) -> list[tuple[str, str]]:
    """The ordered pairs a workload measures: its ``pairs``, or every pair of its GPUs."""
    if wl.pairs is not None:
        return [tuple(p) for p in wl.pairs]
    gpus = wl.gpus if wl.gpus is not None else fabric.gpus
    return list(itertools.permutations(gpus, 2))


def check_p2p_workloads(
    section: WorkloadSection[P2pWorkload], fabric: Fabric, where: Locator
) -> None:
    """Everything ``start_p2p_workloads`` would refuse, without a transport."""
    for i, wl in section.workloads:
        _checked_pairs(where, fabric, i, wl)


def _checked_pairs(
    where: Locator, fabric: Fabric, index: int, wl: P2pWorkload
) -> list[tuple[str, str]]:
    at = where.within("workloads", index)
    if wl.pairs is not None:
        for k, pair in enumerate(wl.pairs):
            for end, gpu in enumerate(pair):
                require_gpu(at, fabric, ("pairs", k, end), gpu)
    elif wl.gpus is not None:
        for k, gpu in enumerate(wl.gpus):
            require_gpu(at, fabric, ("gpus", k), gpu)
    elif len(fabric.gpus) < 2:
        raise at.error(("kind",), "a copy needs at least two GPUs; the fabric has one")
    return workload_pairs(wl, fabric)


def start_p2p_workloads(
    section: WorkloadSection[P2pWorkload], fabric: Fabric, transport: Transport, where: Locator
) -> list[PairRecord]:
    """Arm every ``kind: p2p`` workload; the records fill in as the run goes."""
    records: list[PairRecord] = []
    for i, wl in section.workloads:
        pairs = _checked_pairs(where, fabric, i, wl)
        sequence = _PairSequence(i, wl, pairs, section.tenant_index(wl.tenant), transport, records)
        sequence.arm(wl.start)
    return records


P2P_COLUMNS = (
    "workload",
    "name",
    "src",
    "dst",
    "direction",
    "engine",
    "bytes",
    "copies",
    "t_start_ns",
    "t_end_ns",
    "time_per_copy_ns",
    "bandwidth_GBps",
    "messages",
    "complete",
)


def p2p_table(records: list[PairRecord]) -> pd.DataFrame:
    """One row per pair, size and direction, in the order they ran."""
    rows = [
        (
            r.workload,
            r.name,
            r.src,
            r.dst,
            r.direction,
            r.engine,
            r.bytes,
            r.copies,
            r.t_start_ns,
            r.t_end_ns,
            r.time_per_copy_ns,
            r.bandwidth_GBps,
            r.messages,
            not np.isnan(r.t_end_ns),
        )
        for r in records
    ]
    table = pd.DataFrame.from_records(rows, columns=list(P2P_COLUMNS))
    return table.astype(
        {
            "workload": np.int64,
            "bytes": np.int64,
            "copies": np.int64,
            "t_start_ns": float,
            "t_end_ns": float,
            "time_per_copy_ns": float,
            "bandwidth_GBps": float,
            "messages": np.int64,
            "complete": bool,
        }
    )


def p2p_metrics(table: pd.DataFrame) -> dict[str, object]:
    """Report summary: per direction, the smallest copies' time and the largest's bandwidth."""
    done = table[table["complete"]]
    out: dict[str, object] = {
        "pairs": len(table),
        "incomplete": int((~table["complete"]).sum()),
    }
    for direction, part in done.groupby("direction", sort=True):
        small = part[part["bytes"] == part["bytes"].min()]
        large = part[part["bytes"] == part["bytes"].max()]
        out[direction] = {
            "smallest_bytes": int(small["bytes"].iloc[0]),
            "time_per_copy_ns_mean": float(small["time_per_copy_ns"].mean()),
            "largest_bytes": int(large["bytes"].iloc[0]),
            "bandwidth_GBps_mean": float(large["bandwidth_GBps"].mean()),
        }
    return out
