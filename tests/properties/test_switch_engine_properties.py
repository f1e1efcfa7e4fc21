"""Property tests of the L4 switch engine: the switch models, their buffers, credits and
forwarding modes, run on small fabrics through a bare ``Transport`` (no PHY stage).

Hypothesis draws a fabric (a star of N senders and N receivers around one switch, two
switches in a chain with endpoints on both, or a 4-GPU two-level fat tree with two spines),
its links (8 or 16 lanes, short or long flight), the switch (output- or input-queued, FIFO
inputs or VOQs, round-robin or iSLIP with 1-3 iterations, forwarding store-and-forward or
cut-through with a drawn head), credits (none, finite header and data credits on every
channel, or on some only, with a drawn UpdateFC delay and max payload) and traffic
(posted, non-posted and completion messages of mixed sizes, below and above the
cut-through head, in bursts at t = 0, spread out, or both). After ``t.run()``:

- every message is delivered exactly once, having crossed each switch of its route once;
- a message overtakes an earlier one of its (src, dst) pair only where the model lets it:
  at a credited port that serves its queue by the PCIe ordering table, and never past a
  posted message (A2a, B2a, D2a); at every switch, one input's messages to one output
  leave in arrival order unless that output's own queue applies the table;
- no input buffer holds more than ``input_buffer`` messages, and no buffer behind a
  credited channel more than its credits per (VC, class) slot allow;
- credits are conserved per (VC, class) slot: each message crossing a credited channel is
  granted its credits there once, and after the run every credit is back with its sender;
- no message beats its zero-load latency (``fabric.oracles.zero_load_latency_ns``), in
  either forwarding mode, and a message alone meets it exactly;
- each port carries one message at a time: its serialisations do not overlap, each takes
  at least the message's size over the link's rate, and together they are the port's busy
  time.

``input_buffer`` is what the credits (or, on an uncredited input, the messages routed
through it) can put there, plus a drawn slack of 0-2, so a buffer can fill exactly.

``test_credits_come_back_whatever_port_comes_next`` keeps the case that found a leak: an
output-queued switch once returned a credited input's credits only through a credited
output (an uncredited port at a node fed by credits is now a ``ReleasesUpstream`` one).

The instruments only observe: a ``CreditLink`` subclass counts grants, held credits and
UpdateFCs on its own; the switch class is subclassed to log each arrival with this hop's
start (``t_left``) and tail (``t_tail``), read before the next hop overwrites them; the
credited ports' ``pass_through``/``release`` are shadowed to log each departure.

Shares measured over the ci profile's examples (``pytest --hypothesis-show-statistics``)
are given in each test's docstring, so each property is seen exercised on both sides;
where a side depends on a choice (switch model, credits, forwarding) the test is
parametrised over it rather than left to the generator.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from properties.budget import examples

from sitssim.errors import InvariantViolation
from sitssim.fabric.messages import (
    FC_CLASS_OF_KIND,
    KIND_DATA,
    KIND_PROBE_COMPLETION,
    KIND_PROBE_REQUEST,
)
from sitssim.fabric.nodes import Node
from sitssim.fabric.oracles import zero_load_latency_ns
from sitssim.fabric.ordering import ORDERING_TABLE, Pass
from sitssim.fabric.ports import CreditedPort, OutputPort, TowardCutThrough
from sitssim.fabric.routing import Router
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import build_fabric
from sitssim.fabric.transport import Transport
from sitssim.link.credit_link import FC_CLASSES, N_CLASSES, Cost, CreditLink
from sitssim.link.credits import DATA_CREDIT_BYTES
from sitssim.scenario import SwitchParams, scenario_from_data
from sitssim.switch.input_queued import InputQueuedSwitch
from sitssim.switch.registry import switch_model

KINDS = (KIND_DATA, KIND_PROBE_REQUEST, KIND_PROBE_COMPLETION)
MODELS = ("output_queued", "input_queued")
FORWARDING = ("store_and_forward", "cut_through")
CREDIT_MODES = ("every channel", "some channels")
LINKS = {
    "x16_short": {"rate": "64GT/s", "lanes": 16, "propagation": "5ns"},
    "x16_long": {"rate": "64GT/s", "lanes": 16, "propagation": "20ns"},
    "x8_short": {"rate": "64GT/s", "lanes": 8, "propagation": "5ns"},
    "x8_long": {"rate": "64GT/s", "lanes": 8, "propagation": "20ns"},
}
# Times are compared after SimPy's own sums (``now + (t - now)``), exact to a few ulps.
EPS_NS = 1e-6
RTOL = 1e-9


# --- what is drawn ---------------------------------------------------------------------


@dataclass
class Case:
    """One drawn run: the scenario data, credits per channel name, the traffic."""

    data: dict[str, Any]
    credits: dict[str, tuple[int, int]]
    max_payload: int
    update_delay_ns: float
    slack: int
    # (t_ns, src, dst, size, kind), sorted by time: message k is the k-th row.
    messages: list[tuple[float, str, str, int, int]]


def _graph(topology: str, n: int) -> tuple[list[dict[str, str]], list[tuple[str, str]]]:
    """Nodes and edges of a star (s<i>, r<i> around ``sw``) or a chain (``sw1 - sw2``, the
    even senders and odd receivers on sw1, the others on sw2, so traffic crosses the chain
    both ways and stays local too)."""
    nodes = [{"id": f"s{i}", "kind": "gpu"} for i in range(n)]
    nodes += [{"id": f"r{i}", "kind": "gpu"} for i in range(n)]
    if topology == "star":
        nodes.append({"id": "sw", "kind": "switch"})
        edges = [(f"s{i}", "sw") for i in range(n)] + [("sw", f"r{i}") for i in range(n)]
        return nodes, edges
    nodes += [{"id": "sw1", "kind": "switch"}, {"id": "sw2", "kind": "switch"}]
    edges = [("sw1", "sw2")]
    edges += [(f"s{i}", "sw1" if i % 2 == 0 else "sw2") for i in range(n)]
    edges += [("sw2" if j % 2 == 0 else "sw1", f"r{j}") for j in range(n)]
    return nodes, edges


sizes = st.one_of(
    # Either side of every head drawn below, and well beyond it.
    st.sampled_from([16, 63, 64, 65, 255, 256, 257, 1024, 1025, 4096]),
    st.integers(1, 4096),
)


@st.composite
def cases(
    draw: st.DrawFn,
    *,
    alone: bool = False,
    model: str | None = None,
    credit_mode: str | None = None,
    forwarding: str | None = None,
) -> Case:
    """A drawn run; ``model``, ``credit_mode`` and ``forwarding`` pin those choices, so a
    test can give each side of its property the same share of examples."""
    topology = draw(st.sampled_from(["star", "chain", "fat_tree"]))
    link_names = st.sampled_from(sorted(LINKS))
    data: dict[str, Any] = {"name": "switch_engine", "duration": "1us"}
    if topology == "fat_tree":
        data["topology"] = {
            "kind": "fat_tree",
            "gpus": 4,
            "levels": 2,
            "radix": 2,
            "spines": 2,
            "root_complex": False,
        }
        data["links"] = {"default": LINKS[draw(link_names)]}
        senders = receivers = [f"gpu{i}" for i in range(4)]
    else:
        n = draw(st.integers(1, 3))
        nodes, edges = _graph(topology, n)
        data["topology"] = {
            "kind": "graph",
            "nodes": nodes,
            "edges": [{"a": a, "b": b, "link": draw(link_names)} for a, b in edges],
        }
        data["links"] = {"default": LINKS["x16_short"], **LINKS}
        senders, receivers = [f"s{i}" for i in range(n)], [f"r{i}" for i in range(n)]
    data["switch"] = {
        "model": model or draw(st.sampled_from(MODELS)),
        "voq": draw(st.booleans()),
        "allocator": draw(st.sampled_from(["round_robin", "islip"])),
        "iterations": draw(st.integers(1, 3)),
        "forwarding": forwarding or draw(st.sampled_from(FORWARDING)),
        "cut_through_bytes": f"{draw(st.sampled_from([64, 256, 1024]))}B",
        "arbitration": f"{draw(st.sampled_from([10, 40]))}ns",
    }
    fabric = build_fabric(scenario_from_data(data))
    max_payload = draw(st.sampled_from([256, 1024]))
    # Data credits for one to three max-payload TLPs: fewer could never send one.
    tlp = max_payload // DATA_CREDIT_BYTES
    per_channel = st.tuples(st.integers(1, 4), st.integers(tlp, 3 * tlp))
    mode = credit_mode or draw(st.sampled_from(["none", *CREDIT_MODES]))
    credits: dict[str, tuple[int, int]] = {}
    if mode != "none":
        for c in fabric.channels:
            if mode == "every channel" or draw(st.booleans()):
                credits[c.name] = draw(per_channel)
    pattern = draw(st.sampled_from(["burst", "spread", "both"]))
    span = draw(st.sampled_from([200, 2000]))
    at_zero = st.just(0.0)
    spread = st.integers(0, span).map(float)
    times = {"burst": at_zero, "spread": spread, "both": st.one_of(at_zero, spread)}[pattern]
    # Incast (every message to one receiver) makes outputs and credits contended.
    if draw(st.booleans()):
        receivers = receivers[-1:]
    pairs = [(s, d) for s in senders for d in receivers if s != d]
    # Sampled rather than integers(): bursts long enough to fill buffers stay as likely as
    # short ones.
    count = 1 if alone else draw(st.sampled_from([1, 2, 3, 5, 8, 13, 21, 30]))
    messages = [
        (draw(times), *draw(st.sampled_from(pairs)), draw(sizes), draw(st.sampled_from(KINDS)))
        for _ in range(count)
    ]
    return Case(
        data=data,
        credits=credits,
        max_payload=max_payload,
        update_delay_ns=float(draw(st.sampled_from([0, 10, 100, 500]))),
        slack=draw(st.integers(0, 2)),
        messages=sorted(messages, key=lambda m: m[0]),
    )


# --- instruments -----------------------------------------------------------------------


class CountingCreditLink(CreditLink):
    """A ``CreditLink`` that counts, on its own, the grants per slot and what the buffer
    behind its channel holds: messages, header and data credits per slot, and their peaks.
    It observes; the accounting it checks is the base class's."""

    __slots__ = ("backs", "grants", "held_msgs", "peak_data", "peak_hdr", "peak_msgs", "tally")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        slots = self.vcs * N_CLASSES
        self.grants = [0] * slots
        # tally[slot] = [hdr, data] held now, by this instrument's own count.
        self.tally = [[0, 0] for _ in range(slots)]
        self.peak_hdr = [0] * slots
        self.peak_data = [0] * slots
        self.held_msgs = 0
        self.peak_msgs = 0
        # (t_leave, t_back) of every message leaving the buffer: its UpdateFC's schedule.
        self.backs: list[tuple[float, float]] = []

    def take(self, cost: Cost, ready: float, now: float) -> bool:
        granted = super().take(cost, ready, now)
        if granted:
            self.grants[cost[0]] += 1
        return granted

    def receive(self, cost: Cost) -> None:
        s, hdr, data = cost
        here = self.tally[s]
        here[0] += hdr
        here[1] += data
        self.peak_hdr[s] = max(self.peak_hdr[s], here[0])
        self.peak_data[s] = max(self.peak_data[s], here[1])
        self.held_msgs += 1
        self.peak_msgs = max(self.peak_msgs, self.held_msgs)
        super().receive(cost)

    def release(self, cost: Cost, t_leave: float, now: float) -> float:
        s, hdr, data = cost
        self.tally[s][0] -= hdr
        self.tally[s][1] -= data
        self.held_msgs -= 1
        return super().release(cost, t_leave, now)

    def pass_through(self, cost: Cost, t_leave: float, now: float) -> float:
        t_back = super().pass_through(cost, t_leave, now)
        self.backs.append((t_leave, t_back))
        return t_back


Departure = tuple[int, int, float, float]
"""(channel, msg, t_leave, now): a message committed at ``now`` to leave the buffer behind
a credited channel at ``t_leave``, as its port is told."""


def watch_departures(port: CreditedPort, log: list[Departure]) -> None:
    """Log every departure the nodes and ports report to ``port`` (an instance attribute
    shadows each method, so the engine's own calls are the ones seen)."""
    for name in ("pass_through", "release"):
        method = getattr(port, name)

        def watched(msg: int, t_leave: float, now: float, method: Any = method) -> None:
            log.append((port.channel, msg, t_leave, now))
            method(msg, t_leave, now)

        setattr(port, name, watched)


@dataclass
class Arrival:
    """A message reaching a switch over ``channel`` at ``t``, with the start of its
    serialisation there and, through a cut-through port, when its tail comes in."""

    msg: int
    channel: int
    t: float
    start: float
    tail: float | None


def recording(model: type[Node], log: list[Arrival]) -> type[Node]:
    """``model`` with every arrival logged (before the model sees it, when the engine's
    columns still hold this hop's start and tail)."""

    class Recording(model):  # type: ignore[valid-type,misc]
        __slots__ = ()

        def arrive(self, msg: int, in_port: OutputPort) -> None:
            tail = in_port.t_tail[msg] if isinstance(in_port, TowardCutThrough) else None
            log.append(Arrival(msg, in_port.channel, self._env._now, in_port.t_left[msg], tail))
            # super(): the transport may build the model as a class specialised for the
            # fabric, behind this one (``Node.for_fabric``).
            super().arrive(msg, in_port)

    Recording.__name__ = f"Recording{model.__name__}"
    return Recording


@dataclass
class Run:
    case: Case
    t: Transport
    params: SwitchParams
    arrivals: list[Arrival]
    delivered: list[int]
    links: list[CountingCreditLink | None]
    departures: list[Departure]
    routes: list[tuple[int, ...]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.case.messages)

    def fc(self, msg: int) -> int:
        return FC_CLASS_OF_KIND[self.t.kind[msg]]

    def starts(self) -> dict[tuple[int, int], float]:
        """(msg, channel) -> when the message's serialisation started on that channel."""
        out = {(a.msg, a.channel): a.start for a in self.arrivals}
        out.update({(m, self.routes[m][-1]): self.t.t_left[m] for m in range(self.n)})
        return out


def build(case: Case, input_buffer: int | None = None) -> Run:
    """The case's transport, instruments attached, run to the end; ``input_buffer``, if
    given, replaces the one worked out from the credits and the slack."""
    scenario = scenario_from_data(case.data)
    fabric = build_fabric(scenario)
    names = sorted(fabric.graph)
    ids = {name: i for i, name in enumerate(names)}
    links: list[CountingCreditLink | None] = []
    for c in fabric.channels:
        if c.name not in case.credits:
            links.append(None)
            continue
        hdr, data = case.credits[c.name]
        back = fabric.channels[fabric.channel_index[(c.dst, c.src)]]
        links.append(
            CountingCreditLink(
                c.id, hdr, data, back.propagation_ns + case.update_delay_ns, case.max_payload
            )
        )
    # The buffer each switch input needs: what its credits let in (one header credit per
    # message and slot), or, uncredited, every message routed over it.
    classes = len({FC_CLASS_OF_KIND[m[4]] for m in case.messages})
    through: Counter[int] = Counter()
    router = Router(fabric)
    for _, src, dst, _, _ in case.messages:
        through.update(router.route(src, dst).channels)
    need = 1
    for c in fabric.channels:
        if fabric.node_kind(c.dst) == "switch":
            link = links[c.id]
            need = max(need, through[c.id] if link is None else link.adv_hdr * classes)
    if input_buffer is None:
        input_buffer = need + case.slack
    params = SwitchParams(**{**case.data["switch"], "input_buffer": input_buffer})
    arrivals: list[Arrival] = []
    rows = case.messages
    schedule = Schedule(
        t_ns=np.array([m[0] for m in rows], dtype=float),
        src=np.array([ids[m[1]] for m in rows], dtype=np.int64),
        dst=np.array([ids[m[2]] for m in rows], dtype=np.int64),
        size=np.array([m[3] for m in rows], dtype=np.int64),
        tenant=np.zeros(len(rows), dtype=np.int64),
        kind=np.array([m[4] for m in rows], dtype=np.int64),
        workload=np.zeros(len(rows), dtype=np.int64),
    )
    t = Transport(
        simpy.Environment(),
        fabric,
        Router(fabric),
        names,
        schedule,
        credit_links=links if any(link is not None for link in links) else None,
        switch_model=recording(switch_model(params), arrivals),
    )
    delivered: list[int] = []
    for kind in KINDS:
        t.on_delivery(kind, delivered.append)
    departures: list[Departure] = []
    for port in t.ports:
        if isinstance(port, CreditedPort):
            watch_departures(port, departures)
    t.run()
    run = Run(case, t, params, arrivals, delivered, links, departures)
    run.routes = [t.router.routes[r].channels for r in t.route_ids()]
    return run


def zero_load(t: Transport) -> np.ndarray:
    cut = {n.name: n.cut_through_bytes for n in t.node_objects if n.cut_through_bytes}
    return zero_load_latency_ns(
        t.fabric,
        t.router.routes,
        np.asarray(t.route_ids(), dtype=np.int64),
        np.asarray(t.size),
        cut,
    )


def switches(run: Run) -> list[InputQueuedSwitch]:
    return [n for n in run.t.node_objects if isinstance(n, InputQueuedSwitch)]


def may_pass(later: int, earlier: int) -> bool:
    """The ordering table's cell, without RO or IDO attributes: only "No" holds back."""
    return ORDERING_TABLE[(FC_CLASSES[later], FC_CLASSES[earlier])][0] is not Pass.NO


def reorders(run: Run, channel: int) -> bool:
    """Whether the port of ``channel`` may serve its messages out of arrival order: a
    credited port keeps a queue ordered by the table, unless an input-queued switch feeds
    it from its own FIFOs, committing only what has credit (its queue stays empty)."""
    if run.links[channel] is None:
        return False
    near = run.t.fabric.channels[channel].src
    return run.params.model == "output_queued" or run.t.fabric.node_kind(near) != "switch"


# --- the properties --------------------------------------------------------------------


@settings(max_examples=examples(100))
@given(case=cases())
def test_every_message_is_delivered_once_having_crossed_each_switch_of_its_route_once(
    case: Case,
) -> None:
    """Conservation: no message is lost or delivered twice, none skips or repeats a hop.
    Measured (ci profile): credits stalled somewhere in 29 of the 100 runs."""
    run = build(case)
    assert Counter(run.delivered) == Counter(range(run.n))
    assert all(math.isfinite(x) for x in run.t.t_deliver)
    hops: dict[int, list[int]] = defaultdict(list)
    for a in run.arrivals:
        hops[a.msg].append(a.channel)
    for msg, route in enumerate(run.routes):
        # Each channel of the route but the last leads into a switch, once.
        assert hops.get(msg, []) == list(route[:-1]), msg
    stalled = any(link is not None and link.stalls for link in run.links)
    event("credits stalled" if stalled else "no credit stall")


@settings(max_examples=examples(100))
@given(case=cases())
def test_messages_keep_their_order_where_the_model_promises_it(case: Case) -> None:
    """FIFO per (src, dst): a later message arrives first only if a port on its route
    applies the ordering table and the table lets its class pass the earlier one's (never
    past a posted message). At each switch, one input's messages to one output leave in
    arrival order, unless that output's own queue applies the table.
    Measured: a message was overtaken (as the table allows) in 35 of the 100 runs."""
    run = build(case)
    position = {m: k for k, m in enumerate(run.delivered)}
    t = run.t
    overtaken = False
    for m2 in range(run.n):
        for m1 in range(m2):
            if (t.src[m1], t.dst[m1]) != (t.src[m2], t.dst[m2]):
                continue
            if position[m2] < position[m1]:
                overtaken = True
                assert any(reorders(run, c) for c in run.routes[m2]), (m1, m2)
                assert may_pass(run.fc(m2), run.fc(m1)), (m1, m2)
    event("a message was overtaken" if overtaken else "every pair in order")
    # At each switch: messages in over one channel and out over another, in arrival order.
    start_on = run.starts()
    flows: dict[tuple[int, int], list[int]] = defaultdict(list)
    for a in run.arrivals:
        route = run.routes[a.msg]
        out = route[route.index(a.channel) + 1]
        flows[(a.channel, out)].append(a.msg)
    for (_, out), msgs in flows.items():
        leave = [start_on[(m, out)] for m in msgs]
        if not reorders(run, out):
            assert leave == sorted(leave), (out, msgs)


@pytest.mark.parametrize("credit_mode", CREDIT_MODES)
@pytest.mark.parametrize("model", MODELS)
@settings(max_examples=examples(30))
@given(data=st.data())
def test_no_buffer_holds_more_than_its_size_or_its_credits(
    model: str, credit_mode: str, data: st.DataObject
) -> None:
    """Input buffers stay within ``input_buffer`` (``peak``); a buffer behind a credited
    channel holds at most its header and data credits per (VC, class) slot; an input-
    queued switch's count of a credited input is the credits' own count of it; and the
    bound is tight: a buffer of exactly the peak changes no time, one less overflows.
    Measured, 30 runs each: a credited buffer filled to its header credits in 53 % / 33 %
    of runs (output-queued, credits on every / some channels) and 70 % / 13 %
    (input-queued); an input-queued buffer held several messages, so the smaller buffer
    was tried and overflowed, in 53 % / 26 %."""
    case = data.draw(cases(model=model, credit_mode=credit_mode), label="case")
    run = build(case)
    bound = run.params.input_buffer
    for sw in switches(run):
        assert max(sw.peak, default=0) <= bound
        for i, port in enumerate(sw.in_ports):
            if isinstance(port, CreditedPort):
                link = run.links[port.channel]
                assert link is not None
                # One VC (no message_vcs): the input's one buffer is all the link holds.
                assert sw.peak[i] == link.peak_msgs
    full = False
    for link in run.links:
        if link is None:
            continue
        assert max(link.peak_hdr) <= link.adv_hdr
        assert max(link.peak_data) <= link.adv_data
        full |= max(link.peak_hdr) == link.adv_hdr
    event("a credited buffer filled" if full else "no credited buffer filled")
    if run.params.model == "input_queued":
        # The bound is enforced and only a bound: a buffer of exactly the peak changes
        # nothing; one message less, and an arrival finds a full buffer.
        peak = max(max(sw.peak, default=0) for sw in switches(run))
        assert build(case, input_buffer=peak).t.t_deliver == run.t.t_deliver
        if peak > 1:
            with pytest.raises(InvariantViolation, match=f"already holds {peak - 1} of"):
                build(case, input_buffer=peak - 1)
        event("input-queued: a buffer held several" if peak > 1 else "input-queued: one at most")


@pytest.mark.parametrize("credit_mode", CREDIT_MODES)
@pytest.mark.parametrize("model", MODELS)
@settings(max_examples=examples(30))
@given(data=st.data())
def test_credits_are_conserved_per_vc_and_class(
    model: str, credit_mode: str, data: st.DataObject
) -> None:
    """Each message crossing a credited channel is granted its credits there exactly once,
    in its own (VC, class) slot; once the fabric is idle every credit is back with its
    sender and the far buffer holds none (no ``InvariantViolation`` on the way). Each
    message leaves each credited buffer once, when it starts on its next channel (or is
    delivered), and its UpdateFC is back one return flight later.
    Measured, 30 runs each: some port stalled for credit in 42 % / 42 % of runs
    (output-queued, credits on every / some channels) and 70 % / 65 % (input-queued)."""
    case = data.draw(cases(model=model, credit_mode=credit_mode), label="case")
    run = build(case)
    crossed: Counter[tuple[int, int]] = Counter()
    for msg, route in enumerate(run.routes):
        for c in route:
            crossed[(c, run.fc(msg))] += 1
    # Each message leaves the buffer behind each credited channel of its route once, when
    # it starts on its next channel (or is delivered), and never before it is committed.
    left = {(c, m): (t_leave, now) for c, m, t_leave, now in run.departures}
    assert len(left) == len(run.departures)
    credited = {(c, m) for m, route in enumerate(run.routes) for c in route if run.links[c]}
    assert set(left) == credited
    starts = run.starts()
    for (c, m), (t_leave, now) in left.items():
        route = run.routes[m]
        k = route.index(c)
        departure = run.t.t_deliver[m] if k == len(route) - 1 else starts[(m, route[k + 1])]
        assert abs(t_leave - departure) <= EPS_NS and t_leave >= now, (c, m)
    stalled = False
    for link in run.links:
        if link is None:
            continue
        # Every message is on VC 0, so slot = class index.
        assert link.grants == [crossed[(link.channel, s)] for s in range(len(link.grants))]
        # Its UpdateFC reaches the sender one return flight after it left, no sooner.
        assert len(link.backs) == sum(link.grants)
        assert all(abs(back - leave - link.return_ns) <= EPS_NS for leave, back in link.backs)
        link.sync(math.inf)
        assert link.avail_hdr == [link.adv_hdr] * len(link.avail_hdr)
        assert link.avail_data == [link.adv_data] * len(link.avail_data)
        assert link.held_hdr == [0] * len(link.held_hdr)
        assert link.held_data == [0] * len(link.held_data)
        assert link.tally == [[0, 0]] * len(link.tally) and link.held_msgs == 0
        stalled |= bool(link.stalls)
    event("credits stalled" if stalled else "no credit stall")


@pytest.mark.parametrize("forwarding", FORWARDING)
@settings(max_examples=examples(60))
@given(data=st.data())
def test_no_message_beats_its_zero_load_latency(forwarding: str, data: st.DataObject) -> None:
    """Latency >= zero-load latency, for both forwarding modes and switch models.
    Measured, 60 runs each: some message was held up beyond its bound in 62 % of the
    store-and-forward and 70 % of the cut-through runs (in the others every message met
    it, streaming through), and every run had some message exactly at its bound."""
    run = build(data.draw(cases(forwarding=forwarding), label="case"))
    t = run.t
    latency = np.asarray(t.t_deliver) - np.asarray(t.t_inject)
    bound = zero_load(t)
    assert (latency >= bound * (1 - RTOL)).all(), latency - bound
    held = bool((latency > bound + EPS_NS).any())
    met = bool((latency <= bound * (1 + RTOL)).any())
    at = "some held up" if held else "none held up"
    event(f"{at}, {'some' if met else 'none'} at the bound")


@settings(max_examples=examples(100))
@given(case=cases(alone=True))
def test_a_message_alone_meets_its_zero_load_latency(case: Case) -> None:
    """At zero load the bound is tight: one message alone takes exactly its zero-load
    latency (to 1e-9), whatever the model, credits or forwarding mode.
    Measured: of the 100 cases, 21 cut through (a message longer than the head), 35 had
    cut-through switches take a message of at most the head whole, 44 stored and
    forwarded."""
    run = build(case)
    t = run.t
    latency = t.t_deliver[0] - t.t_inject[0]
    bound = float(zero_load(t)[0])
    assert abs(latency - bound) <= bound * RTOL, (latency, bound)
    head = run.params.cut_through_bytes
    if run.params.forwarding == "cut_through":
        event("cut through" if t.size[0] > head else "whole (at most the head)")


@settings(max_examples=examples(100))
@given(case=cases())
def test_each_port_carries_one_message_at_a_time(case: Case) -> None:
    """On every port, sorted by start, each serialisation lasts at least size / rate and
    ends before the next starts; together they are the port's busy time and count.
    Starts are the engine's ``t_left`` at each hop; ends are the tail's arrival (the
    ``t_tail`` column through a cut-through port) less the flight and far latency.
    Measured: some port served messages back to back (a gap below 1 ns) in 79 of the 100
    runs, so the no-overlap check was at its edge."""
    run = build(case)
    t = run.t
    spans: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    for a in run.arrivals:
        port = t.ports[a.channel]
        tail = a.t if a.tail is None else a.tail
        spans[a.channel].append((a.start, tail - port.fwd_delay, a.msg))
    for m in range(run.n):
        c = run.routes[m][-1]
        spans[c].append((t.t_left[m], t.t_deliver[m] - t.ports[c].fwd_delay, m))
    back_to_back = False
    for c, served in spans.items():
        port = t.ports[c]
        served.sort()
        for start, end, m in served:
            assert end - start >= t.size[m] * port.inv_bw - EPS_NS, (c, m)
        for (_, end, m1), (start, _, m2) in itertools.pairwise(served):
            assert start >= end - EPS_NS, (c, m1, m2)
            back_to_back |= start - end < 1.0
        assert port.messages == len(served)
        busy = sum(end - start for start, end, _ in served)
        assert abs(port.busy_ns - busy) <= EPS_NS * len(served), c
    event("back to back on some port" if back_to_back else "never back to back")


def _leak_case() -> Case:
    """The shrunk failing example: s0 -> sw -> r0, an output-queued switch storing and
    forwarding, one header credit on s0 -> sw only, two 16 B posted messages at t = 0."""
    nodes, edges = _graph("star", 1)
    return Case(
        data={
            "name": "switch_engine",
            "duration": "1us",
            "topology": {
                "kind": "graph",
                "nodes": nodes,
                "edges": [{"a": a, "b": b, "link": "x16_short"} for a, b in edges],
            },
            "links": {"default": LINKS["x16_short"], **LINKS},
            "switch": {"model": "output_queued"},
        },
        credits={"s0>sw": (1, 16)},
        max_payload=256,
        update_delay_ns=0.0,
        slack=0,
        messages=[(0.0, "s0", "r0", 16, KIND_DATA), (0.0, "s0", "r0", 16, KIND_DATA)],
    )


@settings(max_examples=examples(20))
@example(case=_leak_case())
@given(case=cases(credit_mode="some channels"))
def test_credits_come_back_whatever_port_comes_next(case: Case) -> None:
    """Credits on some channels only, any of them: every message is delivered and every
    credit comes back, whether the port after a credited channel is credited or not."""
    run = build(case)
    assert Counter(run.delivered) == Counter(range(run.n))
    for link in run.links:
        if link is not None:
            link.sync(math.inf)
            assert link.avail_hdr == [link.adv_hdr] * len(link.avail_hdr)
