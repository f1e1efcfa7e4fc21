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
* an :class:`OutputQueuedSwitch` is that too: an ideal output-queued switch with
  infinite speedup, so its arbitration latency is its only cost and head-of-line
  blocking cannot happen. Switch models with buffers and allocators override
  ``arrive``.

A node model and a routing function combine freely. A switch model is chosen when
the fabric is built (``sitssim.switch.registry``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Protocol

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


class Endpoint(Node):
    """A GPU or a root complex: delivers what is addressed to it, forwards the rest."""

    __slots__ = ()


class OutputQueuedSwitch(Node):
    """An ideal output-queued switch (module docstring): its arbitration latency, then the
    chosen output's queue."""

    __slots__ = ()
