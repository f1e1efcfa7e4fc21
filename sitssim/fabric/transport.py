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

What every transport shares (the message columns, injection from a pre-drawn
``Schedule``, delivery callbacks and listeners, the run) is ``sitssim.fabric.carrier``'s;
what is this module's is how a message moves: over ports and nodes, hop by hop.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Protocol

import numpy as np
import simpy

from sitssim.errors import InvariantViolation
from sitssim.fabric.carrier import ENDPOINT_KINDS, Carrier
from sitssim.fabric.messages import FC_CLASS_OF_KIND
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
    OutputPort,
    ReleasesUpstream,
    TowardCutThrough,
)
from sitssim.fabric.routing import Router, TableRouting
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric
from sitssim.link.credit_link import Cost, CreditLink
from sitssim.link.flit_link import FlitLink


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


class Transport(Carrier):
    """Messages over the fabric's nodes and ports (see the module docstring).

    ``switch_model`` is the model of every switch (built as the class its ``for_fabric``
    chooses for this fabric); ``ports[c]`` is channel ``c``'s output port,
    ``node_objects[i]`` node ``i`` (``nodes[i]`` its name).
    """

    fidelity = "packet"
    port_class = staticmethod(port_class)
    """Each channel's port class (the module function): looked up on the transport, once per
    port when the fabric is built, so that a subclass can compose onto every port (a test's
    instrument that watches a run) at no cost to a run that does not."""

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
        super().__init__(env, fabric, router, nodes, schedule, message_vcs)
        self._answered_kinds = answered_kinds
        self._answer_slots = answer_slots
        self._credit_of: list[Cost] = []
        self.ports: list[OutputPort] = []
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
            cls = self.port_class(flit is not None, credit is not None, toward, away, ch.src in fed)
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

    def route_ids(self) -> np.ndarray:
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

    @property
    def cut_through(self) -> dict[str, int]:
        return {n.name: n.cut_through_bytes for n in self.node_objects if n.cut_through_bytes}

    def _launch(self, msg: int, vc: int, replica: bool) -> None:
        if self._credit_model is not None:
            kind = self.kind[msg]
            size = self.size[msg]
            cost = self._costs.get((kind, size, vc))
            if cost is None:
                cost = self._credit_model.cost(FC_CLASS_OF_KIND[kind], size, vc)
                self._costs[(kind, size, vc)] = cost
            self._credit_of.append(cost)
        if replica:
            self.node_objects[self.src[msg]].inject_replica(msg)
        else:
            self.node_objects[self.src[msg]].inject(msg)
