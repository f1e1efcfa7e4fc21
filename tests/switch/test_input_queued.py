"""The input-queued switch model (``sitssim.switch.input_queued``).

A star fabric: N sender GPUs, one switch, N receiver GPUs, equal links. The switch must
deliver every message once, keep each buffer within its bound, keep each input's messages
to one output in order, and show head-of-line blocking: FIFO inputs saturate near Karol,
Hluchyj and Morgan's 0.750 / 0.655 / 0.618 (N = 2, 4, 8), VOQs with iSLIP near 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
import simpy

from sitssim.errors import InvariantViolation
from sitssim.fabric.messages import KIND_DATA
from sitssim.fabric.nodes import Node, OutputQueuedSwitch
from sitssim.fabric.ports import CreditedPort, Hop, callbacks_of
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import Channel, Fabric, build_fabric
from sitssim.fabric.transport import Transport
from sitssim.link.credit_link import CreditLink
from sitssim.scenario import SwitchParams, scenario_from_data
from sitssim.stages.base import empty_schedule
from sitssim.switch.arbiter import ISlipAllocator, RoundRobinAllocator
from sitssim.switch.input_queued import (
    AFTER_ARRIVALS,
    InputQueuedSwitch,
    OneVcFifoSwitch,
    input_queued_model,
)
from sitssim.switch.registry import SWITCH_MODELS

CELL = 256
# Karol, Hluchyj and Morgan (1987), Table I: FIFO saturation throughput by N.
KAROL = {2: 0.750, 4: 0.655, 8: 0.618}


CreditsOf = Callable[[Channel], "CreditLink | None"]


def every_channel(c: Channel) -> CreditLink:
    return CreditLink(c.id, 4, 64, 100.0, CELL)


def star(
    n: int, *, credits: bool | CreditsOf = False, general: bool = False, **switch: Any
) -> Transport:
    """N senders s<i> and N receivers r<j> around one input-queued switch ``sw``; with
    ``credits``, every channel's far end advertises finite credits (``every_channel``), or
    those ``credits(channel)`` gives; ``general``: the switch is built as the general class
    even where the transport would choose a specialised one (``Node.for_fabric``)."""
    nodes = [{"id": f"s{i}", "kind": "gpu"} for i in range(n)]
    nodes += [{"id": f"r{i}", "kind": "gpu"} for i in range(n)]
    nodes.append({"id": "sw", "kind": "switch"})
    edges = [{"a": f"s{i}", "b": "sw"} for i in range(n)]
    edges += [{"a": "sw", "b": f"r{i}"} for i in range(n)]
    return transport_of(nodes, edges, credits, switch, general=general)


def as_built(model: type[Node]) -> type[Node]:
    """``model``, built as it is whatever the fabric (``Node.for_fabric``)."""
    return type(
        f"General{model.__name__}",
        (model,),
        {"__slots__": (), "for_fabric": classmethod(lambda cls, **_: cls)},
    )


def transport_of(
    nodes: list[dict[str, str]],
    edges: list[dict[str, str]],
    credits: bool | CreditsOf,
    switch: dict[str, Any],
    message_vcs: tuple[tuple[int, ...], ...] | None = None,
    lanes: int = 16,
    general: bool = False,
) -> Transport:
    """``lanes``: of the links of edges marked ``"link": "narrow"``."""
    scenario = scenario_from_data(
        {
            "name": "star",
            "duration": "1ms",
            "topology": {"kind": "graph", "nodes": nodes, "edges": edges},
            "links": {
                "default": {"rate": "64GT/s", "lanes": 16, "propagation": "5ns"},
                "narrow": {"rate": "64GT/s", "lanes": lanes, "propagation": "5ns"},
            },
            "switch": {"model": "input_queued", **switch},
        }
    )
    fabric = build_fabric(scenario)
    model = SWITCH_MODELS[scenario.switch.model](scenario.switch)
    if general:
        model = as_built(model)
    credit_links: list[CreditLink | None] | None = None
    if credits:
        of = every_channel if credits is True else credits
        credit_links = [of(c) for c in fabric.channels]
    return transport_on(fabric, model, credit_links=credit_links, message_vcs=message_vcs)


def transport_on(fabric: Fabric, model: type[Node], **options: Any) -> Transport:
    """An idle transport over ``fabric`` with ``model`` switches and nothing scheduled."""
    return Transport(
        simpy.Environment(),
        fabric,
        Router(fabric),
        sorted(fabric.graph),
        empty_schedule(),
        switch_model=model,
        **options,
    )


def backlog(t: Transport, n: int, cells: int, seed: int) -> None:
    """Every sender injects ``cells`` cells at t = 0, each to a uniform random receiver."""
    dests = np.random.default_rng(seed).integers(n, size=(n, cells))
    for i in range(n):
        src = t.node_id[f"s{i}"]
        for d in dests[i].tolist():
            t.inject(src, t.node_id[f"r{d}"], CELL, 0, KIND_DATA, 0)


def switch_of(t: Transport) -> InputQueuedSwitch:
    node = t.node_objects[t.node_id["sw"]]
    assert isinstance(node, InputQueuedSwitch)
    return node


def cell_time(t: Transport) -> float:
    fabric = t.fabric
    return CELL / fabric.channels[fabric.channel_index[("sw", "r0")]].bytes_per_ns


def saturation(t: Transport, n: int) -> tuple[float, int]:
    """Cells delivered per receiver per cell time while every input is backlogged, after a
    10 % warm-up; and the fewest cells any input delivered in that window.

    The window ends when the first input has sent its last cell: up to then every input
    has a cell waiting (the senders inject at line rate, faster than the switch drains).
    """
    src = np.array(t.src)
    done = np.array(t.t_deliver)
    first = float(done.min())
    end = min(float(done[src == t.node_id[f"s{i}"]].max()) for i in range(n))
    warm = first + 0.1 * (end - first)
    inside = (done > warm) & (done <= end)
    per_input = min(int(inside[src == t.node_id[f"s{i}"]].sum()) for i in range(n))
    return float(inside.sum()) / (n * (end - warm) / cell_time(t)), per_input


# --- conservation, bounds, order -------------------------------------------------------


@pytest.mark.parametrize(
    "switch",
    [
        {},
        {"voq": True},
        {"voq": True, "allocator": "islip"},
        {"voq": True, "allocator": "islip", "iterations": 3},
    ],
)
def test_every_message_is_delivered_once_in_order_within_the_buffer_bound(
    switch: dict[str, Any],
) -> None:
    n, cells, bound = 4, 400, 400
    t = star(n, input_buffer=bound, **switch)
    backlog(t, n, cells, seed=3)
    t.run()
    done = np.array(t.t_deliver)
    assert not np.isnan(done).any()
    assert len(done) == n * cells
    sw = switch_of(t)
    assert len(sw.in_ports) == n and len(sw.out_ports) == n
    assert max(sw.peak) <= bound
    # Queues did build up: the bound was tested, not idle.
    assert max(sw.peak) > 10
    # One input's cells to one output leave in arrival order, one cell time apart at least.
    c = cell_time(t)
    for s in set(t.src):
        for d in set(t.dst):
            mine = [m for m in range(len(done)) if t.src[m] == s and t.dst[m] == d]
            gaps = np.diff(done[mine])
            assert (gaps >= c * (1 - 1e-9)).all()


def test_each_output_carries_one_cell_at_a_time() -> None:
    n = 4
    t = star(n, voq=True, allocator="islip", input_buffer=1000)
    backlog(t, n, 300, seed=5)
    t.run()
    c = cell_time(t)
    done = np.array(t.t_deliver)
    dst = np.array(t.dst)
    for d in set(t.dst):
        times = np.sort(done[dst == d])
        assert (np.diff(times) >= c * (1 - 1e-9)).all()


def test_an_arrival_into_a_full_buffer_is_an_invariant_violation() -> None:
    # Without credits nothing holds the senders back: FIFO inputs drain slower than line rate.
    t = star(4, input_buffer=8)
    backlog(t, 4, 200, seed=1)
    with pytest.raises(InvariantViolation, match="buffer already holds 8 of 8"):
        t.run()


# --- credits towards the next node -------------------------------------------------------


def returned_in_full(t: Transport) -> None:
    """Every credit taken came back, per (VC, class), once the run is over."""
    for port in t.ports:
        if not isinstance(port, CreditedPort):
            continue
        credit = port.credit
        credit.sync(math.inf)
        assert credit.avail_hdr == [credit.adv_hdr] * len(credit.avail_hdr)
        assert credit.avail_data == [credit.adv_data] * len(credit.avail_data)
        assert credit.held_hdr == [0] * len(credit.held_hdr)


@pytest.mark.parametrize("switch", [{}, {"voq": True, "allocator": "islip"}])
def test_with_credits_everywhere_the_input_buffer_holds_no_more_than_its_credits(
    switch: dict[str, Any],
) -> None:
    n, cells = 4, 200
    t = star(n, credits=True, input_buffer=64, **switch)
    backlog(t, n, cells, seed=4)
    t.run()
    done = np.array(t.t_deliver)
    assert len(done) == n * cells and not np.isnan(done).any()
    sw = switch_of(t)
    # Four header credits per input: the senders can never have more cells there.
    assert 1 < max(sw.peak) <= 4
    returned_in_full(t)


def test_a_head_short_of_credit_goes_as_soon_as_the_credit_is_back() -> None:
    # Two header credits on the switch->receiver channel, plenty on the sender's: the
    # output carries two cells per credit round trip, each pair starting the moment the
    # first pair's UpdateFCs are back, never later (the switch waits for the return it
    # knows of, not for some other event).
    def downstream_only(c: Channel) -> CreditLink:
        hdr = 2 if c.src == "sw" else 1000
        return CreditLink(c.id, hdr, 64_000, 100.0, CELL)

    t = star(1, credits=downstream_only)
    backlog(t, 1, 40, seed=0)
    t.run()
    done = np.sort(np.array(t.t_deliver))
    channel = t.fabric.channels[t.fabric.channel_index[("sw", "r0")]]
    # A cell's credit is back 100 ns after it reached r0; the cell two behind it then
    # crosses, serialises and flies: no sooner, and (the switch being woken by the return)
    # no later.
    expected = 100.0 + cell_time(t) + channel.propagation_ns
    assert np.diff(done[::2]) == pytest.approx([expected] * (len(done[::2]) - 1), abs=1e-6)
    # Stalls were recorded at the starved output, as an output-queued port records them.
    port = t.ports[channel.id]
    assert isinstance(port, CreditedPort) and len(port.credit.stalls) >= 10
    returned_in_full(t)


def test_a_switch_starved_of_credit_by_the_next_switch_is_woken_when_it_drains() -> None:
    # s0 -> sw1 -> sw2 -> r0, the last channel credited one header at a time: sw2's input
    # fills with sw1's four, and sw1 learns of a credit back only when sw2 lets one of its
    # held cells cross (the port tells the switch that feeds it). Without that, sw1 would
    # wait for ever and cells would be left undelivered.
    nodes = [{"id": i, "kind": "gpu"} for i in ("s0", "r0")]
    nodes += [{"id": i, "kind": "switch"} for i in ("sw1", "sw2")]
    edges = [{"a": "s0", "b": "sw1"}, {"a": "sw1", "b": "sw2"}, {"a": "sw2", "b": "r0"}]

    def slow_tail(c: Channel) -> CreditLink:
        return CreditLink(c.id, 1 if c.src == "sw2" else 4, 64_000, 100.0, CELL)

    t = transport_of(nodes, edges, slow_tail, {})
    cells = 30
    for _ in range(cells):
        t.inject(t.node_id["s0"], t.node_id["r0"], CELL, 0, KIND_DATA, 0)
    t.run()
    done = np.array(t.t_deliver)
    assert len(done) == cells and not np.isnan(done).any()
    sw2 = t.node_objects[t.node_id["sw2"]]
    assert isinstance(sw2, InputQueuedSwitch) and 3 <= max(sw2.peak) <= 4
    # One cell per credit round trip at the tail: the tail's pace, not the head's.
    assert np.diff(np.sort(done)).min() >= 100.0
    returned_in_full(t)


# --- virtual channels ------------------------------------------------------------------

# Tenant 0 on VC 0, tenant 1 on VC 1, every class alike.
TWO_VCS = ((0, 0, 0), (1, 1, 1))


def one_path(vcs: int, hdr: int, message_vcs: tuple[tuple[int, ...], ...] | None) -> Transport:
    """s0 -> sw -> r0, the switch's output credited ``hdr`` headers per (VC, class)."""
    nodes = [{"id": i, "kind": "gpu"} for i in ("s0", "r0")] + [{"id": "sw", "kind": "switch"}]
    edges = [{"a": "s0", "b": "sw"}, {"a": "sw", "b": "r0"}]

    def credits(c: Channel) -> CreditLink:
        return CreditLink(c.id, hdr if c.src == "sw" else 1000, 64_000, 100.0, CELL, vcs=vcs)

    return transport_of(nodes, edges, credits, {"input_buffer": 64}, message_vcs)


def inject_tenants(t: Transport, tenants: list[int]) -> None:
    for tenant in tenants:
        t.inject(t.node_id["s0"], t.node_id["r0"], CELL, tenant, KIND_DATA, 0)


def test_a_vc_short_of_credit_holds_back_no_other_vc() -> None:
    # One header credit per (VC, class) at the switch's output, 100 ns to come back. On one
    # VC the output carries one cell per credit round trip; with the two tenants on VCs of
    # their own, each VC has its own credit and the output carries two.
    tenants = [k % 2 for k in range(40)]
    shared = one_path(1, 1, None)
    inject_tenants(shared, tenants)
    shared.run()
    apart = one_path(2, 1, TWO_VCS)
    inject_tenants(apart, tenants)
    apart.run()
    assert set(apart.vc) == {0, 1} and set(shared.vc) == {0}
    one = np.sort(np.array(shared.t_deliver))
    two = np.sort(np.array(apart.t_deliver))
    loop = 100.0 + cell_time(shared) + 5.0
    assert np.diff(one) == pytest.approx([loop] * (len(one) - 1), abs=1e-6)
    # Two cells per round trip: each cell two behind the other, one round trip later.
    assert np.diff(two[::2]) == pytest.approx([loop] * (len(two[::2]) - 1), abs=1e-6)
    assert two[-1] < 0.55 * one[-1]
    returned_in_full(apart)


def test_each_vc_has_its_own_buffer_bound() -> None:
    # Eight header credits per (VC, class) towards the switch and input_buffer 8: two VCs
    # may hold eight cells each at one input, never more in either.
    nodes = [{"id": i, "kind": "gpu"} for i in ("s0", "r0")] + [{"id": "sw", "kind": "switch"}]
    edges = [{"a": "s0", "b": "sw"}, {"a": "sw", "b": "r0"}]

    def credits(c: Channel) -> CreditLink:
        hdr = 8 if c.dst == "sw" else 1
        return CreditLink(c.id, hdr, 64_000, 100.0, CELL, vcs=2)

    t = transport_of(nodes, edges, credits, {"input_buffer": 8}, TWO_VCS)
    inject_tenants(t, [k % 2 for k in range(60)])
    t.run()
    # Both VCs filled at once (a bound shared by the input would have been overrun, an
    # InvariantViolation), each to its credits less the cell crossing as the next came in.
    sw = switch_of(t)
    assert sw.peak[0] in (7, 8)
    assert np.isfinite(t.t_deliver).all()
    returned_in_full(t)


def test_vcs_at_one_input_take_turns_at_a_shared_output() -> None:
    # Tenant 0's cells all come first, then tenant 1's, into an output of half the input's
    # rate: both VCs fill at the input, and the output, granted to the input once per
    # (output) cell time, serves its VCs in turn.
    nodes = [{"id": i, "kind": "gpu"} for i in ("s0", "r0")] + [{"id": "sw", "kind": "switch"}]
    edges = [{"a": "s0", "b": "sw"}, {"a": "sw", "b": "r0", "link": "narrow"}]
    t = transport_of(nodes, edges, False, {"input_buffer": 64}, TWO_VCS, lanes=8)
    inject_tenants(t, [0] * 20 + [1] * 20)
    t.run()
    order = [t.tenant[m] for m in np.argsort(np.array(t.t_deliver), kind="stable")]
    # Until tenant 1's first cell is in, tenant 0's go alone; then the VCs alternate for
    # as long as both hold cells, and tenant 1's last ones go alone.
    both = order[order.index(1) - 1 : len(order) - order[::-1].index(0)]
    assert len(both) >= 18
    assert all(a != b for a, b in pairwise(both))


def test_the_same_run_twice_gives_the_same_times() -> None:
    runs = []
    for _ in range(2):
        t = star(4, voq=True, allocator="islip", input_buffer=1000)
        backlog(t, 4, 200, seed=9)
        t.run()
        runs.append(list(t.t_deliver))
    assert runs[0] == runs[1]


def into_switch(c: Channel) -> CreditLink | None:
    """Credits on the senders' channels only: the switch's inputs advertise, its outputs
    do not."""
    return every_channel(c) if c.dst == "sw" else None


def mixed_traffic(t: Transport, n: int, seed: int) -> None:
    """A backlog at t = 0 (arrivals together), Poisson injections after it (mostly alone
    at their instant) and some of the switch's own messages (its management input)."""
    backlog(t, n, 40, seed)
    rng = np.random.default_rng(seed)
    senders = [t.node_id[f"s{i}"] for i in range(n)] + [t.node_id["sw"]] * 2
    gaps = rng.exponential(0.7 * cell_time(t) / n, size=600)
    picks = rng.integers(len(senders), size=600).tolist()
    dests = rng.integers(n, size=600).tolist()

    def inject() -> Iterator[simpy.Event]:
        for gap, k, d in zip(gaps.tolist(), picks, dests, strict=True):
            yield t.env.timeout(gap)
            t.inject(senders[k], t.node_id[f"r{d}"], CELL, 0, KIND_DATA, 0)

    t.env.process(inject())


@pytest.mark.parametrize("allocator", ["round_robin", "islip"])
@pytest.mark.parametrize("credits", [False, into_switch], ids=["uncredited", "credited-inputs"])
def test_the_one_vc_fifo_class_crosses_as_the_general_class_and_its_general_matching(
    allocator: str, credits: bool | CreditsOf
) -> None:
    """FIFO inputs of one VC each ask for one output: the class the transport chooses for
    them (``OneVcFifoSwitch``), the general class granting output by output from the
    askers it keeps (``Allocator.grant_askers``) and the general class through the
    allocator's general matching over every input's request must give the same crossings,
    at the same times, in the same order, and the same records."""
    runs = []
    for variant in ("chosen", "general", "general matching"):
        t = star(8, credits=credits, general=variant != "chosen", allocator=allocator)
        sw = switch_of(t)
        assert isinstance(sw, OneVcFifoSwitch) == (variant == "chosen")
        # The general class takes the general path once an input asks for two outputs.
        sw._several = variant == "general matching"
        mixed_traffic(t, 8, seed=4)
        t.run()
        runs.append(
            (list(sw.log), t.t_deliver, sw.requests, sw.allocations, sw.refused, list(sw.peak))
        )
    assert len(runs[0][0]) == 5 * (8 * 40 + 600)
    assert max(runs[0][5]) > 4  # the backlog queued up
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize(
    ("fabric", "chosen"),
    [
        ({}, True),
        ({"credits": into_switch}, True),
        ({"credits": True}, False),
        ({"voq": True}, False),
    ],
    ids=["uncredited", "credited-inputs", "credited-outputs", "voq"],
)
def test_the_transport_builds_fifo_switches_of_one_vc_as_the_specialised_class(
    fabric: dict[str, Any], chosen: bool
) -> None:
    sw = switch_of(star(2, input_buffer=7, **fabric))
    assert isinstance(sw, OneVcFifoSwitch) == chosen
    assert sw.input_buffer == 7
    nodes = [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}, {"id": "sw", "kind": "switch"}]
    edges = [{"a": "a", "b": "sw"}, {"a": "sw", "b": "b"}]
    # Messages on VCs of their own: the general class.
    two_vcs = transport_of(nodes, edges, False, {}, message_vcs=((0, 1, 0),))
    assert not isinstance(two_vcs.node_objects[two_vcs.node_id["sw"]], OneVcFifoSwitch)


# --- the switch's contract with its ports, with stand-in ports -------------------------


class InPort:
    channel = 7

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def hold(self, msg: int) -> None:
        self.calls.append(("hold", msg))

    def release(self, msg: int, t_leave: float, now: float) -> None:
        self.calls.append(("release", msg, t_leave, now))

    def pass_through(self, msg: int, t_leave: float, now: float) -> None:
        self.calls.append(("pass_through", msg, t_leave, now))


class OutPort:
    """Takes one message per ``busy`` ns, as a serialiser would."""

    def __init__(self, env: simpy.Environment, busy: float) -> None:
        self.env = env
        self.busy = busy
        self.free_at = 0.0
        self.last_start = 0.0
        self.sent: list[tuple[int, object, float]] = []

    def send(self, msg: int, in_port: object) -> None:
        now = self.env.now
        assert self.free_at <= now
        self.last_start = now
        self.free_at = now + self.busy
        self.sent.append((msg, in_port, now))


class Routing:
    def __init__(self, out: OutPort) -> None:
        self.out = out
        self.asked: list[int] = []

    def route(self, node: object, msg: int, in_port: object) -> OutPort:
        self.asked.append(msg)
        return self.out

    def candidates(self, node: object, msg: int) -> tuple[OutPort, ...]:
        return (self.out,)


def arrive_now(
    env: simpy.Environment, sw: Node, arrivals: list[tuple[int, Any]], delay: float = 0.0
) -> None:
    """Each ``(msg, port)`` reaches ``sw`` in ``delay`` ns by an event of its own, as a
    port's arrivals do, on a queue with nothing due before; step them all (and nothing
    after)."""
    for msg, port in arrivals:
        env.schedule(
            Hop(callbacks_of(lambda ev, port=port: sw.arrive(ev.msg, port)), msg), delay=delay
        )
    for _ in arrivals:
        env.step()


def test_a_message_is_held_routed_once_and_released_as_it_crosses() -> None:
    env = simpy.Environment()
    out = OutPort(env, busy=10.0)
    routing = Routing(out)
    in_a, in_b = InPort(), InPort()
    model = input_queued_model(SwitchParams(model="input_queued", input_buffer=4))
    # Messages 0..2 are for node 9, message 3 for the switch itself (node 3).
    delivered: list[int] = []
    sw = model(3, "sw", 40.0, routing, [9, 9, 9, 3], delivered.append, env)  # type: ignore[arg-type]
    arrive_now(env, sw, [(0, in_a), (1, in_b), (2, in_a)])
    assert in_a.calls == [("hold", 0), ("hold", 2)] and in_b.calls == [("hold", 1)]
    assert out.sent == []  # allocation waits until every arrival of this instant is in
    env.run()
    # One output, three messages: one per busy period, the round-robin way between inputs.
    assert [(m, t) for m, _, t in out.sent] == [(0, 0.0), (1, 10.0), (2, 20.0)]
    # The switch accounts the input buffer itself, so the output is not told the input.
    assert all(came is None for _, came, _ in out.sent)
    assert in_a.calls[2:] == [("release", 0, 0.0, 0.0), ("release", 2, 20.0, 20.0)]
    assert in_b.calls[1:] == [("release", 1, 10.0, 10.0)]
    assert routing.asked == [0, 1, 2]
    arrive_now(env, sw, [(3, in_b)])
    assert delivered == [3]
    assert in_b.calls[-1] == ("pass_through", 3, env.now, env.now)
    assert routing.asked == [0, 1, 2]


@pytest.mark.parametrize("model", [InputQueuedSwitch, OneVcFifoSwitch])
def test_an_arrival_alone_at_its_instant_crosses_in_its_own_event(
    model: type[InputQueuedSwitch],
) -> None:
    env = simpy.Environment()
    out = OutPort(env, busy=10.0)
    in_a, in_b = InPort(), InPort()
    sw = model(3, "sw", 40.0, Routing(out), [9, 9, 9], lambda _m: None, env)  # type: ignore[arg-type]
    arrive_now(env, sw, [(0, in_a)])
    # Nothing else was due at 0: the matching is made at once, with no wake-up left over.
    assert [(m, t) for m, _, t in out.sent] == [(0, 0.0)]
    assert sw.allocations == 1 and env.peek() == math.inf
    # Two at one instant (3 ns, the output busy until 10): matched together when it frees.
    arrive_now(env, sw, [(1, in_b), (2, in_a)], delay=3.0)
    assert len(out.sent) == 1 and env.peek() == 10.0
    env.run()
    assert [t for _, _, t in out.sent] == [0.0, 10.0, 20.0]
    assert sw.allocations == 3


@pytest.mark.parametrize(
    ("model", "at_once"), [(OneVcFifoSwitch, True), (InputQueuedSwitch, False)]
)
def test_only_a_switch_without_credited_outputs_allocates_ahead_of_others_due_now(
    model: type[InputQueuedSwitch], at_once: bool
) -> None:
    """Another node's allocation due at the instant of an arrival (an ``AFTER_ARRIVALS``
    event) cannot change a switch whose outputs have no credits, so the specialised class
    matches at once; the general class, whose outputs may wait for credits that allocation
    releases, matches after it, in a wake-up of its own."""
    env = simpy.Environment()
    out = OutPort(env, busy=10.0)
    sw = model(3, "sw", 40.0, Routing(out), [9], lambda _m: None, env)  # type: ignore[arg-type]
    others: list[bool] = []
    env.schedule(
        Hop(callbacks_of(lambda _ev: others.append(bool(out.sent))), 0), priority=AFTER_ARRIVALS
    )
    arrive_now(env, sw, [(0, InPort())])
    assert bool(out.sent) == at_once
    env.run()
    assert others == [at_once]
    assert [(m, t) for m, _, t in out.sent] == [(0, 0.0)] and sw.allocations == 1


def test_fifo_switches_of_one_vc_cross_as_the_general_class_in_a_fabric_of_several() -> None:
    """In a fat tree, arrivals often come when other switches' allocations are due at the
    same instant: the specialised class, matching at once there, makes the general class's
    crossings in fewer events."""
    runs = []
    for general in (False, True):
        scenario = scenario_from_data(
            {
                "name": "iq_fat_tree",
                "duration": "1ms",
                "topology": {"kind": "fat_tree", "gpus": 8, "levels": 2, "radix": 4, "spines": 2},
                "switch": {"model": "input_queued"},
            }
        )
        fabric = build_fabric(scenario)
        model = SWITCH_MODELS["input_queued"](scenario.switch)
        t = transport_on(fabric, as_built(model) if general else model)
        gpus = [t.node_id[g] for g in fabric.gpus]
        dests = np.random.default_rng(5).integers(len(gpus), size=(len(gpus), 60)).tolist()
        for src, row in zip(gpus, dests, strict=True):
            for d in row:
                if gpus[d] != src:
                    t.inject(src, gpus[d], CELL, 0, KIND_DATA, 0)
        t.run()
        switches = [n for n in t.node_objects if isinstance(n, InputQueuedSwitch)]
        assert all(isinstance(n, OneVcFifoSwitch) != general for n in switches)
        crossings = [(list(n.log), n.allocations, n.requests) for n in switches]
        runs.append((t.t_deliver, crossings, next(t.env._eid)))
    assert runs[0][:2] == runs[1][:2]
    assert runs[0][2] < runs[1][2]


@pytest.mark.parametrize("switch", [{}, {"voq": True, "allocator": "islip"}])
def test_one_matching_per_cell_time_not_one_wake_up_per_message(switch: dict[str, Any]) -> None:
    woken = 0
    params = SwitchParams(model="input_queued", input_buffer=5000, **switch)

    class Counting(input_queued_model(params)):  # type: ignore[misc]
        __slots__ = ()

        def _allocate(self) -> None:
            nonlocal woken
            woken += 1
            super()._allocate()

    n, cells = 4, 500
    t = star(n)
    fabric = t.fabric
    t = transport_on(fabric, Counting)
    backlog(t, n, cells, seed=2)
    end = t.run()
    # An allocation happens when an output it wants frees up: at most once per output per
    # cell time of the busy switch (plus the first arrival). With FIFO inputs the outputs
    # free up together, so once per cell time, far fewer than one per message; with VOQs
    # they free up at staggered times, each waking the switch.
    cell_times = math.ceil(end / cell_time(t))
    if switch:
        assert woken <= n * cell_times + 1
    else:
        assert woken <= cell_times + 1
        assert woken < n * cells / 2


# --- the registry and the parameters -----------------------------------------------------


def test_the_registry_builds_each_model_from_the_switch_section() -> None:
    assert SWITCH_MODELS["output_queued"](SwitchParams()) is OutputQueuedSwitch
    params = SwitchParams(
        model="input_queued", voq=True, allocator="islip", iterations=2, input_buffer=64
    )
    cls = SWITCH_MODELS["input_queued"](params)
    assert issubclass(cls, InputQueuedSwitch)
    assert (cls.voq, cls.allocator, cls.iterations, cls.input_buffer) == (True, "islip", 2, 64)
    t = star(2, voq=True, allocator="islip", iterations=2)
    t.inject(t.node_id["s0"], t.node_id["r1"], CELL, 0, KIND_DATA, 0)
    t.inject(t.node_id["s1"], t.node_id["r0"], CELL, 0, KIND_DATA, 0)
    t.run()
    alloc = switch_of(t)._allocator
    assert isinstance(alloc, ISlipAllocator) and alloc.iterations == 2
    t = star(2)
    t.inject(t.node_id["s0"], t.node_id["r1"], CELL, 0, KIND_DATA, 0)
    t.run()
    assert isinstance(switch_of(t)._allocator, RoundRobinAllocator)
    assert SwitchParams().model == "output_queued"


# --- head-of-line blocking ---------------------------------------------------------------


def test_fifo_inputs_block_at_the_head_and_voqs_with_islip_do_not() -> None:
    n, cells = 4, 3000
    fifo = star(n, input_buffer=cells)
    backlog(fifo, n, cells, seed=11)
    fifo.run()
    voq = star(n, voq=True, allocator="islip", input_buffer=cells)
    backlog(voq, n, cells, seed=11)
    voq.run()
    fifo_rate, _ = saturation(fifo, n)
    voq_rate, _ = saturation(voq, n)
    assert fifo_rate < 0.70
    assert voq_rate > 0.95


@pytest.mark.slow
@pytest.mark.parametrize("n", sorted(KAROL))
def test_fifo_saturation_throughput_is_karols(n: int) -> None:
    # 23,000 cells per input leave at least 20,000 per input in the window. Over 17 seeds
    # (6 for N = 8) the measurement had a standard deviation of 0.0009 to 0.0015 and came
    # within 0.0031 of Karol's value, so 0.01 is several deviations wide and still fails
    # a model a few per cent off (no HOL blocking gives 1; a lost matching per cell time,
    # less).
    cells = 23_000
    t = star(n, input_buffer=cells)
    backlog(t, n, cells, seed=0)
    t.run()
    rate, per_input = saturation(t, n)
    assert per_input >= 20_000
    assert rate == pytest.approx(KAROL[n], abs=0.01)


def test_a_fat_tree_of_input_queued_switches_with_credits_runs_to_its_verdicts() -> None:
    """End to end: credited outputs are driven, so such a scenario is a run like any other,
    each message delivered, its credit stalls tabulated."""
    from sitssim.simulation import simulate

    data = {
        "name": "iq_credits",
        "duration": "2us",
        "topology": {"kind": "fat_tree", "gpus": 8, "levels": 2, "radix": 4, "spines": 2},
        "switch": {"model": "input_queued", "voq": True, "allocator": "islip"},
        "link_layer": {"credits": {"header_credits": 4, "data_credits": 256}},
        "workloads": [
            {"kind": "synthetic", "pattern": "uniform_random", "message_bytes": "1KiB", "load": 0.9}
        ],
    }
    result = simulate(scenario_from_data(data))
    messages = result.tables["messages"]
    assert len(messages) > 100
    assert messages["t_deliver_ns"].notna().all()
    # Switch outputs (not only the GPUs' own) waited for credit, and each wait ended.
    stalls = result.tables["credits"]
    at_switches = stalls[stalls["link"].str.startswith("sw")]
    assert len(at_switches) > 0 and at_switches["end_ns"].notna().all()


def test_tenants_travel_on_the_vcs_their_quota_gives_them_end_to_end() -> None:
    """A quota table puts tenant a on VCs 0-2 (one per class) and b on VC 3: each message
    carries its VC, the credits are pooled per (VC, class), and a's and b's stalls are
    their own VCs'."""
    from sitssim.simulation import simulate

    data = {
        "name": "iq_tenants",
        "duration": "2us",
        "tenants": [{"name": "a"}, {"name": "b"}],
        "topology": {"kind": "fat_tree", "gpus": 8, "levels": 2, "radix": 4, "spines": 2},
        "switch": {
            "model": "input_queued",
            "vc_quota": {"table": {"a": [16, 16, 16], "b": [0, 0, 0, 16]}},
        },
        "link_layer": {"credits": {"header_credits": 2, "data_credits": 256}},
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "uniform_random",
                "message_bytes": "1KiB",
                "load": 0.6,
                "tenant": tenant,
            }
            for tenant in ("a", "b")
        ],
    }
    result = simulate(scenario_from_data(data))
    messages = result.tables["messages"]
    assert messages["t_deliver_ns"].notna().all()
    assert set(messages.loc[messages["tenant"] == "a", "vc"]) == {0}  # data is posted: VC 0
    assert set(messages.loc[messages["tenant"] == "b", "vc"]) == {3}
    stalls = result.tables["credits"]
    assert {0, 3} <= set(stalls["vc"]) <= {0, 3}


@pytest.mark.parametrize("general", [False, True])
@pytest.mark.parametrize("voq", [False, True])
def test_a_multicasts_copies_leave_on_all_outputs_at_once_not_through_one_input(
    voq: bool, general: bool
) -> None:
    # Four copies of one message, made by the switch's engine, to four receivers: each
    # output sends its copy at once. Through the management input they queue one behind
    # the other (that input is matched to one output at a time).
    def delivered(replica: bool) -> np.ndarray:
        t = star(4, voq=voq, general=general, input_buffer=16)
        sw = t.node_id["sw"]
        for j in range(4):
            t.inject(sw, t.node_id[f"r{j}"], 4 * CELL, 0, KIND_DATA, 0, replica=replica)
        t.run()
        return np.array(t.t_deliver)

    copies, queued = delivered(True), delivered(False)
    assert np.ptp(copies) == pytest.approx(0.0, abs=1e-9)
    assert np.ptp(queued) > 2.9 * 4 * cell_time(star(4))
