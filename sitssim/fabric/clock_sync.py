"""Clock synchronisation over the links, and the root's fences that measure skew.

Theory of operation
-------------------
**Who follows whom.** The root (the root complex, or ``gpu0`` in a fabric without one)
is the time reference. Every other device synchronises *hop by hop* to its parent in a
breadth-first tree from the root (neighbours in name order), boundary-clock style, as
PCIe Precision Time Measurement does with switches as time sources: a switch serves
time to its children from its own synchronised clock. We chose hop by hop over end to
end because each exchange then crosses one link, whose only queue (the sender's egress
port) hardware timestamping excludes, so load does not bias the estimate; arbitration
inside the receiving device does (see below).

**The exchange** (PTP-like, two-step), every ``sync_interval`` for every tree edge, as
real messages through the transport:

1. the parent sends *Sync* (16 B); t1 = the parent's synchronised clock when the message
   leaves its egress port (after queueing, as a hardware timestamp is taken);
2. the child stamps its arrival, t2, on its own timestamp clock, and answers with
   *Delay_Req* (16 B), stamped t3 when it leaves its egress port;
3. the parent stamps the Delay_Req's arrival, t4, and returns it in *Delay_Resp* (24 B:
   a 4-DW message header and the 8-byte time value);
4. on Delay_Resp's arrival the child computes ``offset = ((t2 − t1) − (t4 − t3)) / 2`` and
   ``delay = ((t2 − t1) + (t4 − t3)) / 2`` and from then on reads its synchronised clock
   as its timestamp clock minus that offset (:class:`SyncedClock`).

Arrival stamps are taken where the message is delivered, i.e. after the receiving
device's arbitration latency: a one-way delay is serialisation + flight + the receiver's
arbitration, so the two directions differ when the two ends arbitrate differently, and
the estimate is off by half the difference (PTP's asymmetry error). Along a tree path
these errors telescope: a GPU's residual offset from the root is about half the root's
arbitration minus the GPU's, plus the stamps' uncertainty and the drift between
exchanges. The servo is offset-only: with ±300 ppm oscillators and a 2 µs interval the
drift between exchanges is ~1 ns, below the timestamp uncertainty, so estimating a rate
would add noise without removing error. The synchronised clock may step (back or
forward) at an update; only the free-running timestamp clock stamps ordered sets.

With ``sync: false`` no exchange takes place: each synchronised clock is the device's
free-running clock, whose power-up offset and drift are never corrected.

**Fences.** Every ``fence_interval`` from ``fence_start`` the root sends a 16-byte fence
message to every GPU (a root GPU receives its own at once). Each GPU records the arrival
on its own synchronised clock (with the stamp uncertainty) and the true residual offset
of that clock from the root's. ``fence_start`` defaults to one sync interval per tree
level plus one, after which every device has synchronised to an already synchronised
parent.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
import pandas as pd

from sitssim.config.clock_params import (
    MAX_PPM,
    ClockConfig,
    ClockStepBack,
    LinearDrift,
    OrderedSetWithoutStamp,
)
from sitssim.fabric.clocks import NS_PER_MS, DeviceClock, Stamper, build_clocks
from sitssim.fabric.messages import KIND_CLOCK_SYNC, KIND_FENCE
from sitssim.link.ordered_sets import UnstampedSets, ordered_sets_table
from sitssim.units import format_time_ns

if TYPE_CHECKING:
    import simpy

    from sitssim.errors import Locator
    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport

NO_WORKLOAD = -1
SYNC_BYTES = 16
DELAY_REQ_BYTES = 16
DELAY_RESP_BYTES = 24
FENCE_BYTES = 16


# --- the sans-I/O core ---------------------------------------------------------


def offset_and_delay(t1: float, t2: float, t3: float, t4: float) -> tuple[float, float]:
    """PTP's estimate from one two-way exchange: (child − parent offset, one-way delay).

    Exact when the two one-way delays are equal and the clocks do not drift during
    the exchange; otherwise off by half the delay asymmetry.
    """
    down, up = t2 - t1, t4 - t3
    return (down - up) / 2.0, (down + up) / 2.0


class SyncedClock:
    """A device's synchronised time: its timestamp clock minus the latest offset estimate.

    Updates are kept so the synchronised time of any past instant can be read (a
    hardware egress stamp is taken when a message leaves, which the driver learns later).
    """

    __slots__ = ("_at", "_offset", "hardware")

    def __init__(self, hardware: DeviceClock) -> None:
        self.hardware = hardware
        self._at: list[float] = []
        self._offset: list[float] = []

    def correct(self, t_ns: float, offset_ns: float) -> None:
        """From ``t_ns`` on, the device believes its clock is ``offset_ns`` ahead."""
        if self._at and t_ns < self._at[-1]:
            raise ValueError("corrections must come in time order")
        self._at.append(t_ns)
        self._offset.append(offset_ns)

    def offset_at(self, t_ns: float) -> float:
        i = bisect.bisect_right(self._at, t_ns)
        return self._offset[i - 1] if i else 0.0

    def read(self, t_ns: float) -> float:
        return self.hardware.read(t_ns) - self.offset_at(t_ns)


def sync_tree(fabric: Fabric) -> tuple[str, dict[str, str], dict[str, int]]:
    """The time root, each other device's parent, and each device's depth in the tree."""
    root = fabric.root if fabric.root is not None else fabric.gpus[0]
    parent: dict[str, str] = {}
    depth = {root: 0}
    for a, b in nx.bfs_edges(fabric.graph, root, sort_neighbors=sorted):
        parent[b] = a
        depth[b] = depth[a] + 1
    return root, parent, depth


ClockFault = ClockStepBack | OrderedSetWithoutStamp


@dataclass(frozen=True)
class ClockSection:
    """What the clocks read: the ``clocks:`` block, the clock faults (by index in the
    scenario's ``faults:``), the seed the clocks' streams split from and the duration the
    exchanges and fences stop at."""

    config: ClockConfig
    faults: tuple[tuple[int, ClockFault], ...]
    seed: int
    duration: float


# --- references the schema cannot check ----------------------------------------


def check_clock_references(section: ClockSection, fabric: Fabric, where: Locator) -> None:
    """Raise ``InputError`` for a clock fault naming an unknown device or link, or a time
    outside the run, or a linear drift that takes a clock beyond the ppm limit."""
    config = section.config
    if config.enabled and isinstance(config.drift, LinearDrift):
        reached = config.ppm + abs(config.drift.ppm_per_ms) * section.duration / NS_PER_MS
        if reached > MAX_PPM:
            raise where.error(
                ("clocks", "drift", "ppm_per_ms"),
                f"the frequency offset would reach {reached:g} ppm by the end of the run "
                f"(at most {MAX_PPM:g})",
            )
    for i, fault in section.faults:
        if not config.enabled:
            raise where.error(
                ("faults", i, "kind"),
                f"fault {fault.kind!r} needs a 'clocks:' section (no clock is modelled)",
            )
        if fault.device not in fabric.graph:
            raise where.error(
                ("faults", i, "device"),
                f"unknown device {fault.device!r}; devices: {', '.join(sorted(fabric.graph))}",
            )
        if isinstance(fault, OrderedSetWithoutStamp) and (
            (fault.device, fault.peer) not in fabric.channel_index
        ):
            raise where.error(
                ("faults", i, "peer"),
                f"{fault.peer!r} is not linked to {fault.device!r}; its link peers: "
                f"{', '.join(sorted(fabric.graph[fault.device]))}",
            )
        if fault.at is not None and fault.at >= section.duration:
            raise where.error(
                ("faults", i, "at"),
                "'at' must come before the end of the run "
                f"(duration {format_time_ns(section.duration)})",
            )


# --- the driver ----------------------------------------------------------------


@dataclass
class _Records:
    sync: dict[str, list] = field(
        default_factory=lambda: {
            k: []
            for k in (
                "gpu",
                "t_ns",
                "offset_ns",
                "estimated_offset_ns",
                "residual_ns",
                "path_delay_ns",
            )
        }
    )
    fences: dict[str, list] = field(
        default_factory=lambda: {
            k: []
            for k in (
                "fence",
                "gpu",
                "t_issue_ns",
                "t_arrive_true_ns",
                "t_arrive_local_ns",
                "residual_ns",
            )
        }
    )


class ClockStage:
    """Device clocks, the sync exchanges and the fences of one run, driven by its transport."""

    def __init__(self, section: ClockSection, fabric: Fabric, transport: Transport) -> None:
        config = section.config
        self.config = config
        self.section = section
        self.fabric = fabric
        self.transport = transport
        self.root, self.parent, self.depth = sync_tree(fabric)
        steps = [f for _, f in section.faults if isinstance(f, ClockStepBack)]
        devices = sorted(fabric.graph)
        self.hardware = build_clocks(config, devices, section.seed, section.duration, steps)
        self.clocks = {d: SyncedClock(self.hardware[d]) for d in devices}
        self.stampers = {d: Stamper(section.seed, d, config.phy_uncertainty) for d in devices}
        self.gpus = set(fabric.gpus)
        self.edges = sorted(self.parent.items(), key=lambda e: (self.depth[e[0]], e[0]))
        tree_depth = max(self.depth[g] for g in fabric.gpus)
        self.fence_start = (
            config.fence_start
            if config.fence_start is not None
            else ((tree_depth + 1) * config.sync_interval if config.sync else 0.0)
        )
        self.fences_issued = 0
        self._records = _Records()

    # --- scheduling ---------------------------------------------------------------

    def start(self) -> None:
        env = self.transport.env
        self._every(env, 0.0, self.config.sync_interval, self._sync_round)
        self._every(env, self.fence_start, self.config.fence_interval, self._fence)

    def _every(
        self, env: simpy.Environment, first: float, interval: float, action: Callable[[], None]
    ) -> None:
        """Call ``action`` at ``first``, ``first + interval``, ... while before the duration."""
        end = self.section.duration

        def fire(_ev: simpy.Event) -> None:
            action()
            if env.now + interval < end:
                env.timeout(interval).callbacks.append(fire)

        if first < end:
            env.timeout(first).callbacks.append(fire)

    def _inject(self, src: str, dst: str, size: int, kind: int, cb: Callable[[int], None]) -> int:
        t = self.transport
        return t.inject(t.node_id[src], t.node_id[dst], size, 0, kind, NO_WORKLOAD, on_deliver=cb)

    # --- the exchange -------------------------------------------------------------

    def _sync_round(self) -> None:
        if not self.config.sync:
            now = self.transport.env.now
            for gpu in sorted(self.gpus - {self.root}):
                self._record_sync(gpu, now, float("nan"))
            return
        for child, parent in self.edges:
            self._inject(
                parent, child, SYNC_BYTES, KIND_CLOCK_SYNC, partial(self._on_sync, parent, child)
            )

    def _on_sync(self, parent: str, child: str, msg: int) -> None:
        # A sync message crosses one link (the tree joins neighbours), so the port it last
        # left is its sender's: ``t_left`` is when its serialisation started there.
        t1 = self.stampers[parent].stamp(self.clocks[parent].read(self.transport.t_left[msg]))
        t2 = self.stampers[child].stamp(self.hardware[child].read(self.transport.env.now))
        self._inject(
            child,
            parent,
            DELAY_REQ_BYTES,
            KIND_CLOCK_SYNC,
            partial(self._on_delay_req, parent, child, t1, t2),
        )

    def _on_delay_req(self, parent: str, child: str, t1: float, t2: float, msg: int) -> None:
        t3 = self.stampers[child].stamp(self.hardware[child].read(self.transport.t_left[msg]))
        t4 = self.stampers[parent].stamp(self.clocks[parent].read(self.transport.env.now))
        self._inject(
            parent,
            child,
            DELAY_RESP_BYTES,
            KIND_CLOCK_SYNC,
            partial(self._on_delay_resp, child, t1, t2, t3, t4),
        )

    def _on_delay_resp(
        self, child: str, t1: float, t2: float, t3: float, t4: float, _msg: int
    ) -> None:
        offset, delay = offset_and_delay(t1, t2, t3, t4)
        now = self.transport.env.now
        self.clocks[child].correct(now, offset)
        if child in self.gpus:
            self._record_sync(child, now, delay)

    def _record_sync(self, gpu: str, now: float, delay: float) -> None:
        rec = self._records.sync
        root_time = self.clocks[self.root].read(now)
        offset = self.hardware[gpu].read(now) - root_time
        estimate = self.clocks[gpu].offset_at(now)
        rec["gpu"].append(gpu)
        rec["t_ns"].append(now)
        rec["offset_ns"].append(offset)
        rec["estimated_offset_ns"].append(estimate)
        rec["residual_ns"].append(offset - estimate)
        rec["path_delay_ns"].append(delay)

    # --- fences -------------------------------------------------------------------

    def _fence(self) -> None:
        fence = self.fences_issued
        self.fences_issued += 1
        now = self.transport.env.now
        for gpu in self.fabric.gpus:
            if gpu == self.root:
                self._arrive(fence, gpu, now, -1)
            else:
                self._inject(
                    self.root, gpu, FENCE_BYTES, KIND_FENCE, partial(self._arrive, fence, gpu, now)
                )

    def _arrive(self, fence: int, gpu: str, t_issue: float, _msg: int) -> None:
        now = self.transport.env.now
        local = self.clocks[gpu].read(now)
        rec = self._records.fences
        rec["fence"].append(fence)
        rec["gpu"].append(gpu)
        rec["t_issue_ns"].append(t_issue)
        rec["t_arrive_true_ns"].append(now)
        rec["t_arrive_local_ns"].append(self.stampers[gpu].stamp(local))
        rec["residual_ns"].append(local - self.clocks[self.root].read(now))

    # --- results ------------------------------------------------------------------

    def tables(self, end_ns: float) -> dict[str, pd.DataFrame]:
        """``ordered_sets``, ``clock_sync``, ``fences`` and per-device ``clocks``."""
        unstamped: dict[tuple[str, str], list[UnstampedSets]] = {}
        for _, f in self.section.faults:
            if isinstance(f, OrderedSetWithoutStamp):
                unstamped.setdefault((f.device, f.peer), []).append(UnstampedSets(f.at, f.every))
        ordered = ordered_sets_table(
            self.fabric.channels,
            self.hardware,
            self.config.ordered_set_flits,
            self.config.phy_uncertainty,
            end_ns,
            self.section.seed,
            unstamped,
        )
        sync = pd.DataFrame(self._records.sync).sort_values(["t_ns", "gpu"], kind="stable")
        fences = pd.DataFrame(self._records.fences).sort_values(["fence", "gpu"], kind="stable")
        fences.insert(0, "arrival_id", np.arange(len(fences), dtype=np.int64))
        devices = sorted(self.hardware)
        clocks = pd.DataFrame(
            {
                "device": devices,
                "kind": [self.fabric.node_kind(d) for d in devices],
                "parent": [self.parent.get(d) for d in devices],
                "depth": [self.depth[d] for d in devices],
                "ppm": [self.hardware[d].ppm0 for d in devices],
                "initial_offset_ns": [self.hardware[d].offset0 for d in devices],
            }
        )
        return {
            "ordered_sets": ordered,
            "clock_sync": sync.reset_index(drop=True),
            "fences": fences,
            "clocks": clocks,
        }
