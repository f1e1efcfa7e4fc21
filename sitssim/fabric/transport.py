"""The L3 transport: the engine that moves messages between the fabric's nodes, on SimPy.

Theory of operation
-------------------
The fabric is built as objects (``sitssim.fabric.nodes``, ``sitssim.fabric.ports``):
one node per fabric node (endpoints, and the chosen switch model) and one output
port per channel. A message is an integer id; its fields live in column lists here,
so the hot path touches no per-message object. A message is injected at its source
endpoint, whose routing function picks its first port; each port serialises it and
schedules one event, its arrival at the far node, whose ``arrive`` delivers it or
hands it to its next port. Which port is next is the routing function's choice
(``route(node, msg, in_port)``, ``sitssim.fabric.routing``).

Specialisation is by class, chosen here when the fabric is built: a port whose
channel's flit errors are modelled is a ``FlitPort``, one whose far end advertises
credits a ``CreditedPort`` (both: their union); every other port is a plain
``OutputPort``.

When a message is delivered, its ``on_deliver`` callback runs (closed loops), then
every listener of its kind (``on_delivery``: a probe responder answers requests).

Injections come from a pre-drawn, time-sorted ``Schedule`` walked by one chain of
events.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Protocol

import simpy

from sitssim.errors import InvariantViolation
from sitssim.fabric.messages import FC_CLASS_OF_KIND, MESSAGE_KINDS
from sitssim.fabric.nodes import (
    AnsweringEndpoint,
    Endpoint,
    Node,
    OutputQueuedSwitch,
    RoutingFunction,
)
from sitssim.fabric.ports import (
    CreditedPort,
    FlitPort,
    FromCutThrough,
    Hop,
    OutputPort,
    ReleasesUpstream,
    TowardCutThrough,
    callbacks_of,
)
from sitssim.fabric.routing import Router, TableRouting
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric
from sitssim.link.credit_link import Cost, CreditLink
from sitssim.link.flit_link import FlitLink

# Progress reports per expected run, and the shortest run they are spread over.
PROGRESS_TICKS = 50
PROGRESS_MIN_NS = 1_000.0
ENDPOINT_KINDS = frozenset({"gpu", "root_complex"})
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


class RankedRouting(RoutingFunction, Protocol):
    """A routing function that names each message's path by its rank among the pair's
    tied paths (``rank[msg]``), once connected to the ports (``connect``)."""

    rank: list[int]

    def connect(self, ports: Sequence[OutputPort]) -> None: ...


class CreditedFlitPort(CreditedPort, FlitPort):
    """A credited port whose channel's flit errors are modelled too."""


@cache
def port_class(
    flit: bool,
    credited: bool,
    toward_cut_through: bool = False,
    from_cut_through: bool = False,
    fed_by_credits: bool = False,
) -> type[OutputPort]:
    """The port class of a channel with (or without) a flit model and credits, whose far
    (near) node forwards by virtual cut-through or not, and whose near node is fed by a
    credited channel or not."""
    if credited:
        base: type[OutputPort] = CreditedFlitPort if flit else CreditedPort
    else:
        base = FlitPort if flit else OutputPort
    mixins = (TowardCutThrough,) * toward_cut_through + (FromCutThrough,) * from_cut_through
    # A credited port releases its upstream buffer itself.
    mixins += (ReleasesUpstream,) * (fed_by_credits and not credited)
    if not mixins:
        return base
    return type(f"{''.join(m.__name__ for m in mixins)}{base.__name__}", (*mixins, base), {})


class Transport:
    """Messages over the fabric's nodes and ports (see the module docstring).

    ``switch_model`` is the model of every switch (built as the class its ``for_fabric``
    chooses for this fabric); ``ports[c]`` is channel ``c``'s output port,
    ``node_objects[i]`` node ``i`` (``nodes[i]`` its name).
    """

    def __init__(
        self,
        env: simpy.Environment,
        fabric: Fabric,
        router: Router,
        nodes: list[str],
        schedule: Schedule,
        flit_links: list[FlitLink | None] | None = None,
        credit_links: list[CreditLink | None] | None = None,
        switch_model: type[Node] = OutputQueuedSwitch,
        message_vcs: Sequence[Sequence[int]] | None = None,
        answered_kinds: frozenset[int] = frozenset(),
        answer_slots: int = 1,
    ) -> None:
        """``message_vcs[tenant][class]``: the VC of a tenant's messages of a flow-control
        class (``sitssim.switch.vc_quota.message_vcs``); None: every message on VC 0.
        ``answered_kinds``: the message kinds an endpoint accepts only while its answer
        queue (``answer_slots`` places) has room, each place kept until the request's
        answer is committed (``AnsweringEndpoint``); without any the endpoints are plain."""
        self.env = env
        self.fabric = fabric
        self.router = router
        self.nodes = nodes
        self.node_id = {n: i for i, n in enumerate(nodes)}

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
        self._answered_kinds = answered_kinds
        self._answer_slots = answer_slots
        self._credit_of: list[Cost] = []
        self.stopped: object = None
        """What stopped the run before it went idle (a watchdog's ``StopSimulation`` value),
        or None: it ran until no event was left."""

        self.ports: list[OutputPort] = []
        if nodes != router.tables.names:
            raise ValueError("nodes must be numbered as the route tables number them (sorted)")
        self.routing: RankedRouting = TableRouting(router, self.src, self.dst)
        graph = fabric.graph
        switch_model = switch_model.for_fabric(
            one_vc=message_vcs is None,
            credited_outputs=credit_links is not None
            and any(
                credit_links[ch.id] is not None
                for ch in fabric.channels
                if graph.nodes[ch.src]["kind"] not in ENDPOINT_KINDS
            ),
        )
        self.node_objects = [self._node(i, name, switch_model) for i, name in enumerate(nodes)]
        self._build_ports(flit_links, credit_links)
        self.routing.connect(self.ports)
        # Every credited channel is built from one credit profile, so a message costs the
        # same credits on each: worked out once, at injection.
        self._credit_model = next((c for c in credit_links or () if c is not None), None)
        # One cost tuple per kind and size, shared by every such message: a tuple per
        # message would be garbage-collector work for nothing.
        self._costs: dict[tuple[int, int, int], Cost] = {}
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

    # --- building --------------------------------------------------------------

    def _node(self, index: int, name: str, switch_model: type[Node]) -> Node:
        kind = self.fabric.graph.nodes[name]["kind"]
        latency = self.fabric.node_latency_ns[name]
        args = (index, name, latency, self.routing, self.dst, self._deliver, self.env)
        if kind not in ENDPOINT_KINDS:
            return switch_model(*args, vc=self.vc)
        if self._answered_kinds:
            return AnsweringEndpoint(
                *args,
                vc=self.vc,
                kind=self.kind,
                parent=self.parent,
                answered=self._answered_kinds,
                slots=self._answer_slots,
            )
        return Endpoint(*args, vc=self.vc)

    def _build_ports(
        self,
        flit_links: list[FlitLink | None] | None,
        credit_links: list[CreditLink | None] | None,
    ) -> None:
        nodes = self.node_objects
        fed = {
            ch.dst
            for ch in self.fabric.channels
            if credit_links is not None and credit_links[ch.id] is not None
        }
        for ch in self.fabric.channels:
            flit = flit_links[ch.id] if flit_links is not None else None
            credit = credit_links[ch.id] if credit_links is not None else None
            extra: dict[str, object] = {}
            if flit is not None:
                extra["link"] = flit
            if credit is not None:
                extra["credit"] = credit
                extra["costs"] = self._credit_of
            near, far = nodes[self.node_id[ch.src]], nodes[self.node_id[ch.dst]]
            toward, away = far.cut_through_bytes > 0, near.cut_through_bytes > 0
            if toward or away:
                extra["t_tail"] = self.t_tail
            if toward:
                extra["dst"] = self.dst
                extra["head_bytes"] = far.cut_through_bytes
            cls = port_class(flit is not None, credit is not None, toward, away, ch.src in fed)
            self.ports.append(
                cls(
                    ch.id,
                    ch.bytes_per_ns,
                    ch.propagation_ns,
                    far,
                    self.env,
                    self.size,
                    self.t_left,
                    **extra,
                )
            )
        index = self.fabric.channel_index
        for ch, port in zip(self.fabric.channels, self.ports, strict=True):
            if isinstance(port, FlitPort):
                port.reverse = self.ports[index[(ch.dst, ch.src)]]

    def route_ids(self) -> list[int]:
        """Each message's route id (``router.routes``), from the path rank it was given."""
        return self.router.route_ids(self.src, self.dst, self.routing.rank)

    def route_by(self, routing: RankedRouting) -> None:
        """Route every message by ``routing`` (weighted ECMP, ``sitssim.switch.ecmp``)
        instead of the tables' ranked paths; called before any message is injected.

        ``routing.rank`` is each message's rank among its pair's tied paths, the path it
        took, so that ``route_ids`` names the path the message crossed: the router must list
        every tied path of a pair, as a spraying one does, and no pair's routes may have
        been made pinned before.
        """
        if self.src or self.router.routes:
            raise InvariantViolation(
                "the routing function is chosen before any message is routed or route made"
            )
        self.router.spray = True
        routing.connect(self.ports)
        self.routing = routing
        for node in self.node_objects:
            node.routing = routing

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
        if self._credit_model is not None:
            cost = self._costs.get((kind, size, vc))
            if cost is None:
                cost = self._credit_model.cost(FC_CLASS_OF_KIND[kind], size, vc)
                self._costs[(kind, size, vc)] = cost
            self._credit_of.append(cost)
        self._undelivered += 1
        if replica:
            self.node_objects[src].inject_replica(msg)
        else:
            self.node_objects[src].inject(msg)
        return msg

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
