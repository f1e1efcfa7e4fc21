"""Fabric nodes: where a port's messages arrive, and what happens to them there.

Theory of operation
-------------------
Every node of the fabric is one object with one entry point,
``arrive(msg, in_port)``, called when a message has crossed ``in_port`` (one of the
node's incoming channels) and the node's fixed latency has passed: a port charges
its far node's ``latency_ns`` on the arrival event itself, so a fixed latency costs
no event of its own. What a node does then is its model. The base behaviour is
store-and-forward with nothing in between: a message addressed to the node is
delivered, any other one goes at once to the output port its routing function
chooses (``route(node, msg, in_port)``, ``sitssim.fabric.routing``). Any node may
inject (a switch sends and receives its own clock-sync traffic).

* an :class:`Endpoint` (GPU, root complex) is exactly that (a root complex routes
  peer-to-peer traffic between its ports);
* an :class:`AnsweringEndpoint` accepts a request only when it can queue its answer: a
  request of a kind it answers takes a place of its bounded answer queue, kept until the
  answer (a message injected here with the request as its ``parent``) is committed to its
  first port; with every place taken, a request waits in the buffer behind the port it
  came over, keeping that buffer's credits. This is the endpoint of message-dependent
  deadlock (``sitssim.switch.deadlock``): with bounded buffers, requests wait for answers
  to leave, and answers may wait behind requests;
* an :class:`OutputQueuedSwitch` is that too: an ideal output-queued switch with
  infinite speedup, so its arbitration latency is its only cost and head-of-line
  blocking cannot happen. Switch models with buffers and allocators override
  ``arrive``.

A node model and a routing function combine freely. A switch model is chosen when
the fabric is built (``sitssim.switch.registry``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from heapq import heappush
from typing import TYPE_CHECKING, ClassVar, Protocol

from simpy.events import NORMAL

from sitssim.fabric.ports import Hop, callbacks_of

if TYPE_CHECKING:
    import simpy

    from sitssim.fabric.ports import OutputPort


class RoutingFunction(Protocol):
    """Per-hop routing: which output port of ``node`` a message takes next."""

    def route(self, node: Node, msg: int, in_port: OutputPort | None) -> OutputPort:
        """The port ``msg``, arrived over ``in_port`` (None: injected at ``node``), leaves
        ``node`` by."""
        ...

    def candidates(self, node: Node, msg: int) -> tuple[OutputPort, ...]:
        """Every output of ``node`` on a shortest path to ``msg``'s destination."""
        ...


class Node:
    """One node of the fabric (module docstring).

    ``dst`` is the engine's per-message destination column, ``vc`` its virtual-channel column
    (None: one VC, a node built outside a transport), ``deliver(msg)`` its delivery,
    and ``env`` its SimPy environment (read as ``env._now``, the attribute behind the
    ``now`` property, which is a Python call).
    """

    __slots__ = ("_deliver", "_dst", "_env", "_vc", "index", "latency_ns", "name", "routing")

    cut_through_bytes: ClassVar[int] = 0
    """How much of a message must have arrived before the node may forward it by virtual
    cut-through (``sitssim.fabric.ports``); 0: store-and-forward, the whole message."""

    def __init__(
        self,
        index: int,
        name: str,
        latency_ns: float,
        routing: RoutingFunction,
        dst: list[int],
        deliver: Callable[[int], None],
        env: simpy.Environment,
        *,
        vc: list[int] | None = None,
    ) -> None:
        self.index = index
        self.name = name
        self.latency_ns = latency_ns
        self.routing = routing
        self._dst = dst
        self._deliver = deliver
        self._env = env
        self._vc = vc

    @classmethod
    def for_fabric(cls, *, one_vc: bool, credited_outputs: bool) -> type[Node]:
        """The class to build this model's nodes with on a fabric whose messages all travel
        on VC 0 (``one_vc``) and where some channel leaving a switch has credits or none
        does (``credited_outputs``): a model may choose a class specialised for that
        fabric; by default, itself."""
        return cls

    def arrive(self, msg: int, in_port: OutputPort) -> None:
        """``msg`` has crossed ``in_port`` into this node."""
        if self._dst[msg] == self.index:
            self.take(msg, in_port)
        else:
            self.routing.route(self, msg, in_port).send(msg, in_port)

    def take(self, msg: int, in_port: OutputPort) -> None:
        """Deliver ``msg``, addressed to this node, on its arrival over ``in_port``: it
        leaves the buffer behind ``in_port`` at once."""
        now = self._env._now
        in_port.pass_through(msg, now, now)
        self._deliver(msg)

    def inject(self, msg: int) -> None:
        """Send ``msg``, whose source is this node, now."""
        self.routing.route(self, msg, None).send(msg, None)

    def inject_replica(self, msg: int) -> None:
        """Send ``msg``, a copy this switch's own engine makes (multicast, a reduced sum),
        now; a node that sends straight onto its output ports needs no more than ``inject``."""
        self.inject(msg)


class Endpoint(Node):
    """A GPU or a root complex: delivers what is addressed to it, forwards the rest."""

    __slots__ = ()


class AnswerSlot:
    """One place of an :class:`AnsweringEndpoint`'s answer queue, standing in for the port
    an answer came over: when the answer's first port commits it (``pass_through`` at
    once, or ``release`` after waiting in that port's queue for credit), the place is free
    again. An answer comes from no buffer upstream, so ``hold`` has nothing to do."""

    __slots__ = ("endpoint",)

    def __init__(self, endpoint: AnsweringEndpoint) -> None:
        self.endpoint = endpoint

    def hold(self, msg: int) -> None:
        """The answer waits in its port's queue, keeping its place."""

    def pass_through(self, msg: int, t_leave: float, now: float) -> None:
        self.endpoint.answer_left()

    def release(self, msg: int, t_leave: float, now: float) -> None:
        self.endpoint.answer_left()


class AnsweringEndpoint(Endpoint):
    """An endpoint that accepts a request of the ``answered`` kinds only while a place of
    its answer queue (``slots`` places) is free (module docstring). ``kind`` and ``parent``
    are the engine's columns.

    Accepting a request takes a place and delivers it: it leaves the buffer it arrived in
    at once. The place is the request's until its answer (a message injected here with
    the request as ``parent``) is committed to its first port, however long the answer
    takes to be made (the workload's turnaround) or waits for credit there. A request that
    finds every place taken waits, uncommitted, in the buffer behind the port it came over
    (keeping that buffer's credits), and is accepted, oldest first, when a place frees: by
    an event at that instant, so that a port committing an answer is never re-entered by
    the answers of the requests it frees.
    """

    __slots__ = (
        "_accept_cbs",
        "_accepting",
        "_answered",
        "_free",
        "_kind",
        "_open",
        "_parent",
        "_slot",
        "_waiting",
        "slots",
    )

    def __init__(
        self,
        *args: object,
        kind: list[int],
        parent: list[int],
        answered: frozenset[int],
        slots: int,
        **kwargs: object,
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if slots < 1:
            raise ValueError(f"an answer queue has at least one place, not {slots}")
        self._kind = kind
        self._parent = parent
        self._answered = answered
        self.slots = slots
        self._free = slots
        self._slot = AnswerSlot(self)
        # Requests accepted and not yet answered; requests waiting for a place, with the
        # port each came over.
        self._open: set[int] = set()
        self._waiting: deque[tuple[int, OutputPort]] = deque()
        self._accept_cbs = callbacks_of(self._accept)
        self._accepting = False

    def take(self, msg: int, in_port: OutputPort) -> None:
        if self._kind[msg] not in self._answered:
            super().take(msg, in_port)
        elif self._free and not self._waiting:
            self._free -= 1
            self._open.add(msg)
            super().take(msg, in_port)
        else:
            in_port.hold(msg)
            self._waiting.append((msg, in_port))

    def inject(self, msg: int) -> None:
        port = self.routing.route(self, msg, None)
        parent = self._parent[msg]
        if parent in self._open:
            self._open.discard(parent)
            port.send(msg, self._slot)  # type: ignore[arg-type]
        else:
            port.send(msg, None)

    def answer_left(self) -> None:
        """An answer was committed to its port: its place is free for a waiting request."""
        self._free += 1
        if self._waiting and not self._accepting:
            self._accepting = True
            env = self._env
            heappush(env._queue, (env._now, NORMAL, next(env._eid), Hop(self._accept_cbs, 0)))

    def _accept(self, _ev: Hop) -> None:
        self._accepting = False
        now = self._env._now
        while self._free and self._waiting:
            msg, in_port = self._waiting.popleft()
            self._free -= 1
            self._open.add(msg)
            in_port.release(msg, now, now)
            self._deliver(msg)

    def waiting(self) -> list[tuple[int, OutputPort]]:
        """The requests waiting now for a place, oldest first, with the port each came over."""
        return list(self._waiting)


class OutputQueuedSwitch(Node):
    """An ideal output-queued switch (module docstring): its arbitration latency, then the
    chosen output's queue."""

    __slots__ = ()
