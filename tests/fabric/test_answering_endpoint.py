"""The answering endpoint (``sitssim.fabric.nodes.AnsweringEndpoint``) under credits.

Two GPUs on one credited link, each direction one header credit per (VC, class), so one
request fills the NP pool into the target and one completion the Cpl pool back. The
target accepts a request of an answered kind only while a place of its answer queue is
free; a request that finds none keeps its place, and so its credits, in the buffer it
arrived in until an answer is committed to its port (at once, or after waiting there for
credit). A kind not answered passes as it always did, and without answered kinds the
transport builds plain endpoints.
"""

from __future__ import annotations

import math

import pytest
import simpy

from sitssim.fabric.messages import (
    FC_CLASS_OF_KIND,
    KIND_TENANT_REQUEST,
    KIND_TENANT_RESPONSE,
    KIND_TXN_COMPLETION,
    KIND_TXN_READ,
)
from sitssim.fabric.nodes import AnsweringEndpoint, AnswerSlot, Endpoint, OutputQueuedSwitch
from sitssim.fabric.ports import CreditedPort
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import build_fabric
from sitssim.fabric.transport import Transport
from sitssim.link.credit_link import CreditLink, slot
from sitssim.scenario import scenario_from_data
from sitssim.stages.base import empty_schedule

RETURN_NS = 100.0
ANSWER_AT = 500.0


def pair(answered: frozenset[int] = frozenset({KIND_TENANT_REQUEST}), slots: int = 1) -> Transport:
    """GPUs ``a`` and ``b`` on one link (and switch ``sw`` on a second link of ``a``'s, to
    see what the switch becomes), every channel with one header credit per pool."""
    scenario = scenario_from_data(
        {
            "name": "pair",
            "duration": "10us",
            "topology": {
                "kind": "graph",
                "nodes": [
                    {"id": "a", "kind": "gpu"},
                    {"id": "b", "kind": "gpu"},
                    {"id": "sw", "kind": "switch"},
                ],
                "edges": [{"a": "a", "b": "b"}, {"a": "a", "b": "sw"}],
            },
            "links": {"default": {"rate": "64GT/s", "lanes": 16, "propagation": "5ns"}},
        }
    )
    fabric = build_fabric(scenario)
    return Transport(
        simpy.Environment(),
        fabric,
        Router(fabric),
        sorted(fabric.graph),
        empty_schedule(),
        credit_links=[CreditLink(c.id, 1, 64, RETURN_NS, 256) for c in fabric.channels],
        answered_kinds=answered,
        answer_slots=slots,
    )


def port(t: Transport, src: str, dst: str) -> CreditedPort:
    p = t.ports[t.fabric.channel_index[(src, dst)]]
    assert isinstance(p, CreditedPort)
    return p


def np_pool(p: CreditedPort, by: float | None = None) -> tuple[int, int]:
    """(header credits at the sender, headers held uncommitted in the far buffer) of the NP
    pool of VC 0, the UpdateFCs due by ``by`` (default: now) applied. Returns are applied
    lazily, with no event of their own, so a finished run may still have some on their
    way: ``by=math.inf`` is every credit that will come back."""
    s = slot(0, FC_CLASS_OF_KIND[KIND_TENANT_REQUEST])
    p.credit.sync(p._env.now if by is None else by)
    return p.credit.avail_hdr[s], p.credit.held_hdr[s]


def request(t: Transport, kind: int = KIND_TENANT_REQUEST) -> int:
    return t.inject(t.node_id["a"], t.node_id["b"], 32, 0, kind, 0)


def answer(t: Transport, req: int) -> int:
    return t.inject(t.node_id["b"], t.node_id["a"], 256, 0, KIND_TENANT_RESPONSE, 0, parent=req)


def test_a_request_without_a_place_keeps_its_credits_until_an_answer_is_committed() -> None:
    t = pair()
    into_b = port(t, "a", "b")
    first, second = request(t), request(t)
    t.env.run(until=ANSWER_AT)
    # The first took b's one place and left the buffer at once; the second waits there.
    assert not math.isnan(t.t_deliver[first])
    assert math.isnan(t.t_deliver[second])
    assert np_pool(into_b) == (0, 1)
    b = t.node_objects[t.node_id["b"]]
    assert isinstance(b, AnsweringEndpoint)
    assert [(m, p.channel) for m, p in b.waiting()] == [(second, into_b.channel)]
    reply = answer(t, first)
    # Committed at once (credit back to a is free), so its place frees now, and the
    # waiting request is accepted at this same instant.
    assert t.t_left[reply] == ANSWER_AT
    t.env.run(until=ANSWER_AT + RETURN_NS / 2)
    assert t.t_deliver[second] == ANSWER_AT
    assert b.waiting() == []
    # Its UpdateFC is on its way, one return delay after it left the buffer.
    assert np_pool(into_b) == (0, 0)
    t.env.run(until=ANSWER_AT + RETURN_NS + 1)
    assert np_pool(into_b) == (1, 0)


def test_an_answer_waiting_for_credit_keeps_the_place_and_the_request_waits_on() -> None:
    t = pair()
    into_b, into_a = port(t, "a", "b"), port(t, "b", "a")
    first, second = request(t), request(t)
    t.env.run(until=ANSWER_AT)
    # A completion of another kind takes the one Cpl credit into a just before the answer.
    blocker = t.inject(t.node_id["b"], t.node_id["a"], 256, 0, KIND_TXN_COMPLETION, 0)
    reply = answer(t, first)
    waiting = into_a.waiting()
    assert [m for m, _ in waiting] == [reply]
    assert isinstance(waiting[0][1], AnswerSlot)
    t.env.run(until=ANSWER_AT + RETURN_NS / 2)
    # The blocker is in, its credit not yet back: the answer still waits, so does the
    # second request, and the NP credit it holds has not come back either.
    assert not math.isnan(t.t_deliver[blocker])
    assert math.isnan(t.t_left[reply])
    assert math.isnan(t.t_deliver[second])
    assert np_pool(into_b) == (0, 1)
    t.env.run()
    # The blocker's UpdateFC commits the answer, whose place takes the second request.
    credit_back = t.t_deliver[blocker] + RETURN_NS
    assert t.t_left[reply] == pytest.approx(credit_back)
    assert t.t_deliver[second] == pytest.approx(t.t_left[reply])
    assert np_pool(into_b, by=math.inf) == (1, 0)
    # Every message is in: the second request was accepted (its answer is the workload's).
    assert t.undelivered == 0


def test_a_kind_not_answered_passes_on_arrival_even_with_every_place_taken() -> None:
    t = pair()
    into_b = port(t, "a", "b")
    request(t)
    t.env.run(until=ANSWER_AT)
    # b's one place is taken by the unanswered request; a read of another kind is not held.
    read = request(t, KIND_TXN_READ)
    t.env.run(until=ANSWER_AT + RETURN_NS / 2)
    assert not math.isnan(t.t_deliver[read])
    assert np_pool(into_b) == (0, 0)
    t.env.run()
    assert np_pool(into_b, by=math.inf) == (1, 0)
    assert t.undelivered == 0


def test_an_answer_queue_of_several_places_accepts_as_many_requests() -> None:
    t = pair(slots=2)
    first, second, third = request(t), request(t), request(t)
    t.env.run(until=ANSWER_AT)
    # With one NP credit into b, each request waits for the one before to leave the
    # buffer: two are accepted, the third is kept.
    assert not math.isnan(t.t_deliver[first]) and not math.isnan(t.t_deliver[second])
    assert math.isnan(t.t_deliver[third])


def test_without_answered_kinds_the_endpoints_are_plain_ones() -> None:
    t = pair(answered=frozenset())
    kinds = {type(n) for n in t.node_objects if n.name != "sw"}
    assert kinds == {Endpoint}
    assert type(t.node_objects[t.node_id["sw"]]) is OutputQueuedSwitch
    # So a request is delivered on arrival, whatever is outstanding.
    msgs = [request(t) for _ in range(3)]
    t.env.run()
    assert all(not math.isnan(t.t_deliver[m]) for m in msgs)
    assert np_pool(port(t, "a", "b"), by=math.inf) == (1, 0)


def test_with_answered_kinds_only_the_endpoints_answer() -> None:
    t = pair()
    assert all(isinstance(t.node_objects[t.node_id[g]], AnsweringEndpoint) for g in ("a", "b"))
    assert type(t.node_objects[t.node_id["sw"]]) is OutputQueuedSwitch


def test_an_answer_queue_has_at_least_one_place() -> None:
    with pytest.raises(ValueError, match="at least one place"):
        pair(slots=0)
