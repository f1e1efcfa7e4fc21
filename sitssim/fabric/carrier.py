"""What every transport shares, whatever moves the messages: their columns, injection,
delivery and the run.

A transport carries messages between the fabric's nodes; how is its own (packets over
ports and switches in ``sitssim.fabric.transport``, max-min fair fluid flows in
``sitssim.fabric.flow_transport``). What the workloads, the stages and the tables see is
the same for both, and lives here: a message is an integer id whose fields are column
lists; ``inject`` sends one now, a pre-drawn ``Schedule`` is walked by one chain of events,
and a delivery runs the message's ``on_deliver`` callback (closed loops), then every
listener of its kind.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar

import simpy

from sitssim.errors import InvariantViolation
from sitssim.fabric.messages import FC_CLASS_OF_KIND, MESSAGE_KINDS
from sitssim.fabric.ports import Hop, callbacks_of
from sitssim.fabric.routing import Router
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric

ENDPOINT_KINDS = frozenset({"gpu", "root_complex"})
"""Node kinds that send and receive messages; every other node forwards them (a switch)."""
# Progress reports per expected run, and the shortest run they are spread over.
PROGRESS_TICKS = 50
PROGRESS_MIN_NS = 1_000.0
# A full-collection threshold no run reaches: one count per middle-generation collection.
FULL_SCANS_NEVER = 2**30


@contextmanager
def _old_objects_left_alone() -> Iterator[None]:
    """Keep the garbage collector to young objects while the run goes on.

    A run allocates one short-lived event per hop, and every 700 allocations the
    collector looks at the young objects; that stays. What it also does, whenever the
    objects that survived have grown by a quarter, is scan every object there is: the
    fabric, its tables and the PHY results built before the run, and the records the run
    adds. On a 1024-GPU fabric those full scans were 6 of a 16 s run, and found nothing:
    none of that is garbage while the run lasts. So what exists before the run is frozen
    out of the scans, and full scans wait until the run is over; young cyclic garbage is
    still collected as it arises.
    """
    young, middle, old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young, middle, FULL_SCANS_NEVER)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)
        gc.unfreeze()


class Carrier:
    """The message columns, injection, delivery and run of a transport (module docstring).

    A subclass sends a message on its way in ``_launch`` and calls ``_deliver`` when it
    arrives; ``fidelity`` names what it models (the scenario's ``fidelity``).
    """

    fidelity: ClassVar[str]

    def __init__(
        self,
        env: simpy.Environment,
        fabric: Fabric,
        router: Router,
        nodes: list[str],
        schedule: Schedule,
        message_vcs: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """``message_vcs[tenant][class]``: the VC of a tenant's messages of a flow-control
        class (``sitssim.switch.vc_quota.message_vcs``); None: every message on VC 0."""
        self.env = env
        self.fabric = fabric
        self.router = router
        self.nodes = nodes
        self.node_id = {n: i for i, n in enumerate(nodes)}
        if nodes != router.tables.names:
            raise ValueError("nodes must be numbered as the route tables number them (sorted)")

        self.src: list[int] = []
        self.dst: list[int] = []
        self.size: list[int] = []
        self.tenant: list[int] = []
        self.kind: list[int] = []
        self.workload: list[int] = []
        self.parent: list[int] = []
        self.t_inject: list[float] = []
        self.t_deliver: list[float] = []
        self.t_left: list[float] = []
        """When each message's serialisation started on the port it last left."""
        self.t_tail: list[float] = []
        """When each message's tail cleared the last cut-through node it reached (ports)."""
        self.vc: list[int] = []
        """Each message's virtual channel, end to end."""
        self._message_vcs = message_vcs
        self.stopped: object = None
        """What stopped the run before it went idle (a watchdog's ``StopSimulation`` value),
        or None: it ran until no event was left."""

        self._on_deliver: dict[int, Callable[[int], None]] = {}
        self._listeners: list[list[Callable[[int], None]]] = [[] for _ in MESSAGE_KINDS]

        self._sched_t = schedule.t_ns.tolist()
        self._sched_cols = [
            c.tolist()
            for c in (
                schedule.src,
                schedule.dst,
                schedule.size,
                schedule.tenant,
                schedule.kind,
                schedule.workload,
            )
        ]
        self._inject_cbs = callbacks_of(self._inject_due)
        self._tick_cbs = callbacks_of(self._tick)
        self._next = 0
        self._undelivered = 0
        self.injection_end_ns = self._sched_t[-1] if self._sched_t else 0.0
        self._horizon_ns = 0.0

    @property
    def cut_through(self) -> dict[str, int]:
        """The nodes that forward by virtual cut-through, each with how much of a message
        it needs before forwarding it (the zero-load oracle's input)."""
        raise NotImplementedError

    def route_ids(self) -> list[int]:
        """Each message's route id (``router.routes``)."""
        raise NotImplementedError

    # --- injection and delivery ------------------------------------------------

    def inject(
        self,
        src: int,
        dst: int,
        size: int,
        tenant: int,
        kind: int,
        workload: int,
        parent: int = -1,
        on_deliver: Callable[[int], None] | None = None,
        replica: bool = False,
    ) -> int:
        """Send a message now; ``on_deliver(msg)`` is called on its delivery (closed loops).
        ``replica``: a switch's engine makes it (``Node.inject_replica``)."""
        msg = len(self.src)
        if on_deliver is not None:
            self._on_deliver[msg] = on_deliver
        self.src.append(src)
        self.dst.append(dst)
        self.size.append(size)
        self.tenant.append(tenant)
        self.kind.append(kind)
        self.workload.append(workload)
        self.parent.append(parent)
        self.t_inject.append(self.env._now)
        self.t_deliver.append(math.nan)
        self.t_left.append(math.nan)
        self.t_tail.append(0.0)
        vc = 0 if self._message_vcs is None else self._message_vcs[tenant][FC_CLASS_OF_KIND[kind]]
        self.vc.append(vc)
        self._undelivered += 1
        self._launch(msg, vc, replica)
        return msg

    def _launch(self, msg: int, vc: int, replica: bool) -> None:
        """Send message ``msg`` (its columns written) on its way from its source."""
        raise NotImplementedError

    def _inject_due(self, ev: Hop) -> None:
        """Inject every scheduled message due at the time of entry ``ev.msg``, then re-arm."""
        t = self._sched_t
        src, dst, size, tenant, kind, workload = self._sched_cols
        due = t[ev.msg]
        i = self._next
        n = len(t)
        while i < n and t[i] <= due:
            self.inject(src[i], dst[i], size[i], tenant[i], kind[i], workload[i])
            i += 1
        self._next = i
        if i < n:
            self.env.schedule(Hop(self._inject_cbs, i), delay=t[i] - self.env._now)

    def start(self) -> None:
        if self._sched_t:
            self.env.schedule(Hop(self._inject_cbs, 0), delay=self._sched_t[0])

    def on_delivery(self, kind: int, listener: Callable[[int], None]) -> None:
        """Call ``listener(msg)`` on the delivery of every message of ``kind``."""
        self._listeners[kind].append(listener)

    def _deliver(self, msg: int) -> None:
        if not math.isnan(self.t_deliver[msg]):
            raise InvariantViolation(f"message {msg} delivered twice")
        self.t_deliver[msg] = self.env._now
        self._undelivered -= 1
        if self._on_deliver:
            notify = self._on_deliver.pop(msg, None)
            if notify is not None:
                notify(msg)
        listeners = self._listeners[self.kind[msg]]
        if listeners:
            for listener in listeners:
                listener(msg)

    # --- running ---------------------------------------------------------------

    def expect_activity_until(self, t_ns: float) -> None:
        """A closed-loop workload's estimate of its end, so progress has a scale."""
        self._horizon_ns = max(self._horizon_ns, t_ns)

    def run(self, progress: Callable[[float, float], None] | None = None) -> float:
        """Run until no event is left, or until something stops the run (a watchdog raising
        ``simpy.core.StopSimulation``, whose value is kept as ``stopped``); return the final
        simulated time (ns). A run that went idle with messages undelivered is an
        invariant violation; a stopped one is not, since what stopped it said why."""
        self.start()
        env = self.env
        if progress is not None:
            self._progress = progress
            self._progress_total = max(self.injection_end_ns, self._horizon_ns, PROGRESS_MIN_NS)
            env.schedule(Hop(self._tick_cbs, 0), delay=self._progress_total / PROGRESS_TICKS)
        with _old_objects_left_alone():
            self.stopped = env.run()
        if self.stopped is None and self._busy():
            raise InvariantViolation(
                f"the fabric went idle with {self._undelivered} messages undelivered"
            )
        return env.now

    def _tick(self, _ev: Hop) -> None:
        """Report progress; re-arm only while other events remain, so the run can end.

        A run that outlives its expected end (a closed loop may give no estimate at all)
        doubles it: ticks stay a fixed fraction of the run so far, never a flood.
        """
        now = self.env._now
        if now >= self._progress_total:
            self._progress_total = 2.0 * now
        self._progress(now, self._progress_total)
        if self.env.peek() != math.inf:
            self.env.schedule(Hop(self._tick_cbs, 0), delay=self._progress_total / PROGRESS_TICKS)

    @property
    def delivered(self) -> int:
        """Messages delivered so far."""
        return len(self.src) - self._undelivered

    @property
    def undelivered(self) -> int:
        """Messages injected and not yet delivered."""
        return self._undelivered

    def _busy(self) -> bool:
        return bool(self._next < len(self._sched_t) or self._undelivered)
