"""Deadlock for clause ``switch.vc_tenants``: the pre-run cycle check, the observed wait-for
cycle, and the no-progress watchdog that ends a stalled run.

Theory of operation
-------------------
**Buffers and what waits for what.** The resources a message holds while it waits are
buffers: the one behind channel ``c`` (one direction of a link, the engine's channel id)
for virtual channel ``vc``, written ``(c, vc)``. Credits are pooled per (VC, class) and an
input-queued switch keeps one bounded FIFO per (input, VC), so a head of any class blocks
every message behind it on that VC: the buffer is per (channel, VC), and the class matters
through the VC it is given and through what an endpoint does with it. A message on the
route ``c_0, c_1, ..., c_k`` holds ``(c_i, vc)`` while it waits for ``(c_i+1, vc)``: one
edge per step. At its destination it is consumed, so it waits for nothing, unless the
destination must answer it: an endpoint accepts a request only when it can queue the
response (SPEC.md, reading 9), so the request's last buffer waits for the response's
first buffer, on the response's own route and VC. That edge is what makes a deadlock
*message-dependent*: up/down routes in a tree form no cycle by themselves (each route
climbs, then descends), but a request descending into an endpoint can wait for a response
climbing out of it, whose route descends into buffers that another tenant's requests hold.

An endpoint's own output queue is no vertex: the engine's is unbounded. A bounded one
shared by the VCs, as an endpoint's credited port keeps them, would add an edge from each
VC's buffer there to the buffer the queue's head waits for.

**The pre-run check** (:func:`dependency_graph`, :func:`normal_cycle`) builds that graph
(networkx) from plain data, the flows a run will carry and the request-to-response pairs
among them, and looks for a cycle. A cycle is necessary for a deadlock, not sufficient:
whether the cycle's buffers ever fill together depends on their depth and the load. So
the check gives a warning naming the cycle (:func:`cycle_warning`), never a verdict; the
verdict rests on what the run shows.

**The observed cycle** (:func:`wait_for_cycle`) is that evidence: at an instant, every
blocked buffer and the buffer its head waits for (a full one). A cycle there is a
deadlock: no buffer of it can drain before another one of it does. Both cycles are given
in one normal form: the order networkx's ``find_cycle`` walks it, rotated to start at the
smallest buffer. The graph is built from sorted vertices and edges, so the cycle found
depends only on the graph, not on the order its flows were listed in.

**The watchdog** (:class:`NoProgressWatchdog`) is the run-time side. A run that
deadlocks with bounded buffers stops moving messages; with nothing else scheduled, SimPy's
queue then empties, but events that carry no progress (clock sync, progress reports,
workload timers) can keep a stalled run going for as long as they last. The watchdog reads
a progress counter (messages delivered plus hops made, say) every ``window_ns`` while work
is outstanding; when a whole window passes with work outstanding and the counter unmoved,
it records the instant and a snapshot (the observed wait-for graph), and ends the run:
``env.run()`` returns the :class:`Stall`. Detection is bounded: the last progress falls in
some window, the check at its end sees the counter move, and the next check fires, so the
watchdog fires at least one and less than two windows after the last progress.

Its checks are ``Hop`` events pushed onto SimPy's queue, as the engine's ports push
theirs, at :data:`WATCHDOG_PRIORITY`: after everything else due at the same instant, so a
check sees every message that moved then and a snapshot sees settled buffers. It ends the
run by raising ``simpy.core.StopSimulation`` from its check, the exception SimPy's own
``run(until=...)`` ends a run with: ``run`` returns the exception's value and no
exception escapes it. With nothing outstanding there is nothing to guard: the check goes
dormant instead of re-arming, so it never keeps a finished run alive, and never keeps
alive another self-re-arming event (a progress report that re-arms while other events
remain would see the watchdog's check, and the two would keep each other going forever).
The owner wakes it with :meth:`NoProgressWatchdog.arm` when work becomes outstanding (the
transport: on an injection that finds nothing in flight).

**The window.** It must be longer than the longest time a fabric that is not stalled can
go without the counter moving: the longest single hop (the largest message serialised on
the slowest channel, its flight, the far node's latency), plus the longest wait for a
credit to come back, plus the longest link outage (a retraining) a message can meet. A
shorter window fires on a slow fabric; a much longer one only delays a verdict. It is a
required argument, fixed by the owner from the scenario.

The graph side is sans-I/O; the watchdog needs SimPy and nothing above ``fabric``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from heapq import heappush
from itertools import pairwise
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

import networkx as nx
from simpy.core import StopSimulation
from simpy.events import NORMAL

from sitssim.fabric.ports import Hop, callbacks_of
from sitssim.link.credit_link import N_CLASSES

if TYPE_CHECKING:
    import simpy

CLAUSE = "switch.vc_tenants"

Buffer = tuple[int, int]
"""A buffer: the one behind a channel (the engine's channel id) for one VC, ``(channel, vc)``."""

WATCHDOG_PRIORITY = NORMAL + 2
"""The SimPy priority of a watchdog check: after the arrivals (``NORMAL``) and the
input-queued switch's allocations (``input_queued.AFTER_ARRIVALS``, ``NORMAL + 1``) due at
the same instant."""

S = TypeVar("S")


class Flow(NamedTuple):
    """Messages of one flow-control class on one route and VC: ``channels`` in route
    order, ``vc`` their VC, ``fc`` their class (an index into ``credit_link.FC_CLASSES``)."""

    channels: tuple[int, ...]
    vc: int
    fc: int


def _check_flow(i: int, flow: Flow) -> None:
    if not flow.channels:
        raise ValueError(f"flow {i} has no channel: a route crosses at least one link")
    if len(set(flow.channels)) != len(flow.channels):
        raise ValueError(f"flow {i} crosses a channel twice: {flow.channels}")
    if min(flow.channels) < 0 or flow.vc < 0:
        raise ValueError(f"flow {i} has a negative channel or VC: {flow}")
    if not 0 <= flow.fc < N_CLASSES:
        raise ValueError(f"flow {i} has class {flow.fc}, not one of 0..{N_CLASSES - 1}")


def dependency_graph(flows: Sequence[Flow], answers: Iterable[tuple[int, int]] = ()) -> nx.DiGraph:
    """The buffer dependency graph of ``flows`` (module docstring).

    ``answers`` pairs flows by index: ``(request, response)`` says an endpoint answers
    each message of flow ``request`` with one of flow ``response``, so the request's last
    buffer waits for the response's first. Vertices are ``Buffer``s. Each edge's
    ``answer`` attribute says whether an endpoint's answer made it (else only routes), and
    ``classes`` the classes of the messages that hold its first buffer while they wait for
    its second (for an answer, the request's).
    Vertices and edges are added in sorted order, so the graph, and the cycle
    :func:`normal_cycle` finds in it, depend only on the dependencies.
    """
    for i, flow in enumerate(flows):
        _check_flow(i, flow)
    nodes: set[Buffer] = set()
    steps: dict[tuple[Buffer, Buffer], set[int]] = {}
    answered: dict[tuple[Buffer, Buffer], set[int]] = {}
    for flow in flows:
        held = [(c, flow.vc) for c in flow.channels]
        nodes.update(held)
        for step in pairwise(held):
            steps.setdefault(step, set()).add(flow.fc)
    for request, response in answers:
        if not (0 <= request < len(flows) and 0 <= response < len(flows)):
            raise ValueError(f"answer {(request, response)} names a flow that is not listed")
        req, resp = flows[request], flows[response]
        edge = (req.channels[-1], req.vc), (resp.channels[0], resp.vc)
        answered.setdefault(edge, set()).add(req.fc)
    graph = nx.DiGraph()
    graph.add_nodes_from(sorted(nodes))
    for u, v in sorted(steps.keys() | answered.keys()):
        classes = steps.get((u, v), set()) | answered.get((u, v), set())
        graph.add_edge(u, v, answer=(u, v) in answered, classes=frozenset(classes))
    return graph


def normal_cycle(graph: nx.DiGraph) -> list[Buffer] | None:
    """One cycle of ``graph`` as its vertices in order, rotated to start at the smallest;
    None if it has none. Consecutive vertices, and the last with the first, are edges."""
    try:
        walked = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return None
    cycle: list[Buffer] = [u for u, _v in walked]
    first = cycle.index(min(cycle))
    return cycle[first:] + cycle[:first]


def dependency_cycle(
    flows: Sequence[Flow], answers: Iterable[tuple[int, int]] = ()
) -> list[Buffer] | None:
    """The pre-run check: a cycle of the dependency graph of ``flows`` and ``answers``
    (:func:`dependency_graph`) in normal form, or None if the graph is acyclic."""
    return normal_cycle(dependency_graph(flows, answers))


def wait_for_cycle(waits: Iterable[tuple[Buffer, Buffer]]) -> list[Buffer] | None:
    """The observed deadlock: a cycle of the wait-for graph given as ``(blocked buffer,
    buffer its head waits for)`` pairs at one instant (a buffer of virtual output queues
    may wait for several), in the same normal form as the pre-run cycle; None if none."""
    graph = nx.DiGraph()
    graph.add_edges_from(sorted(set(waits)))
    return normal_cycle(graph)


def cycle_text(
    cycle: Sequence[Buffer],
    channel_name: Callable[[int], str] = str,
    graph: nx.DiGraph | None = None,
) -> str:
    """``cycle`` as one line, closed (its first buffer again at the end), each buffer as
    ``<channel name> VC<vc>``; with its dependency ``graph``, an edge an endpoint's answer
    made is written ``=>``, a route step ``->``."""
    names = [f"{channel_name(c)} VC{vc}" for c, vc in cycle]
    text = names[0]
    for i, name in enumerate(names[1:] + names[:1]):
        u, v = cycle[i], cycle[(i + 1) % len(cycle)]
        answer = graph is not None and bool(graph.edges[u, v]["answer"])
        text += f" {'=>' if answer else '->'} {name}"
    return text


def cycle_warning(
    cycle: Sequence[Buffer], graph: nx.DiGraph, channel_name: Callable[[int], str] = str
) -> str:
    """The pre-run warning for ``cycle``, a cycle of the dependency ``graph``: one line
    naming the clause, what kind of deadlock the cycle allows, and the cycle itself."""
    closing = zip(cycle, [*cycle[1:], cycle[0]], strict=True)
    answers = sum(bool(graph.edges[u, v]["answer"]) for u, v in closing)
    kind = (
        f"message-dependent deadlock ({answers} endpoint answers in it: '=>', a request "
        "held until its response can be queued)"
        if answers
        else "routing deadlock"
    )
    return (
        f"warning: {CLAUSE}: the buffer dependency graph has a cycle of {len(cycle)} "
        f"buffers, so a {kind} is possible: {cycle_text(cycle, channel_name, graph)}"
    )


@dataclass(frozen=True)
class Stall(Generic[S]):
    """What the watchdog saw when it fired: at ``t_ns``, the counter had stood at
    ``progress`` since the check at ``quiet_since_ns`` (the last progress was after the
    check before that one), with ``outstanding`` units of work; ``snapshot`` is what the
    snapshot callback returned then (None without one)."""

    t_ns: float
    quiet_since_ns: float
    progress: int
    outstanding: int
    snapshot: S | None


class NoProgressWatchdog(Generic[S]):
    """Ends a run that makes no progress for a window while work is outstanding (module
    docstring).

    ``progress()``: a counter that moves whenever the fabric moves a message (delivered
    plus hops made, say); ``outstanding()``: work in flight (messages injected and not
    delivered); ``snapshot()``: called once, when it fires, for the evidence (the observed
    wait-for graph). ``window_ns``: see the module docstring; no default.

    Nothing is watched until :meth:`arm`; after firing, ``stall`` holds the :class:`Stall`
    that ``env.run()`` returned, and the watchdog stays disarmed.
    """

    __slots__ = (
        "_armed",
        "_check_cbs",
        "_env",
        "_outstanding",
        "_progress",
        "_seen",
        "_since",
        "_snapshot",
        "checks",
        "stall",
        "window_ns",
    )

    def __init__(
        self,
        env: simpy.Environment,
        window_ns: float,
        progress: Callable[[], int],
        outstanding: Callable[[], int],
        snapshot: Callable[[], S] | None = None,
    ) -> None:
        if not (math.isfinite(window_ns) and window_ns > 0):
            raise ValueError(f"the watchdog's window must be positive and finite, not {window_ns}")
        self.window_ns = window_ns
        self.stall: Stall[S] | None = None
        self.checks = 0
        """Checks made so far: what the watchdog cost the run, in events."""
        self._env = env
        self._progress = progress
        self._outstanding = outstanding
        self._snapshot = snapshot
        self._armed = False
        self._seen = 0
        self._since = 0.0
        self._check_cbs = callbacks_of(self._check)

    @property
    def armed(self) -> bool:
        """Whether a check is pending."""
        return self._armed

    def arm(self) -> None:
        """Watch from now: the first check is one window on. Cheap and idempotent, so the
        owner may call it whenever work may have become outstanding; a no-op while a check
        is pending or after the watchdog fired."""
        if self._armed or self.stall is not None:
            return
        self._armed = True
        self._seen = self._progress()
        self._since = self._env._now
        self._push_check()

    def _push_check(self) -> None:
        env = self._env
        at = env._now + self.window_ns
        heappush(env._queue, (at, WATCHDOG_PRIORITY, next(env._eid), Hop(self._check_cbs, 0)))

    def _check(self, _ev: Hop) -> None:
        self.checks += 1
        outstanding = self._outstanding()
        if not outstanding:
            # Nothing to guard, so no re-arm: the run may end; ``arm`` wakes the watchdog.
            self._armed = False
            return
        moved = self._progress()
        now = self._env._now
        if moved != self._seen:
            self._seen = moved
            self._since = now
            self._push_check()
            return
        self._armed = False
        snapshot = self._snapshot() if self._snapshot is not None else None
        self.stall = Stall(now, self._since, moved, outstanding, snapshot)
        raise StopSimulation(self.stall)
