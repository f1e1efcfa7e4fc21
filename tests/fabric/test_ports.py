"""Output ports: the class chosen per channel, the link-cost seam, and the ordering table.

A port is specialised by class when the fabric is built: a plain channel must get the plain
serialiser (no hook on its hot path), a channel with a flit model a ``FlitPort``, a credited
fabric ``CreditedPort``s. The link-cost seam is driven here by a stand-in ``FlitLink`` whose
bursts cost what the test says, so the port's own arithmetic is what is checked.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product
from typing import Any

import pytest
import simpy

from sitssim.fabric.messages import KIND_DATA
from sitssim.fabric.ordering import ORDERING_TABLE, Pass
from sitssim.fabric.ports import PASSABLE, PASSES_ALL, CreditedPort, FlitPort, OutputPort
from sitssim.fabric.routing import Router
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.fabric.transport import CreditedFlitPort, Transport
from sitssim.link.credit_link import FC_CLASSES, N_CLASSES, CreditLink
from sitssim.link.credits import FcClass
from sitssim.scenario import scenario_from_data
from sitssim.stages.base import empty_schedule

SIZE = 4096


class StubFlitLink:
    """A ``FlitLink`` stand-in: each burst costs the next (extra busy, extra delivery) given,
    and may send the link to Recovery for an interval."""

    def __init__(
        self, costs: list[tuple[float, float]], recovery: tuple[float, float] | None = None
    ) -> None:
        self.costs = costs
        self.recovery = recovery
        self.recoveries: list[tuple[float, float]] = []
        self.starts: list[float] = []

    def burst(self, n_bytes: int, start_ns: float) -> tuple[float, float]:
        self.starts.append(start_ns)
        if self.recovery is not None and not self.recoveries:
            self.recoveries.append(self.recovery)
        return self.costs.pop(0) if self.costs else (0.0, 0.0)


def one_link(one_link_data: Callable[..., dict[str, Any]]) -> Fabric:
    return build_fabric(scenario_from_data(one_link_data([])))


def transport(fabric: Fabric, **kwargs: Any) -> Transport:
    nodes = sorted(fabric.graph)
    schedule: Schedule = empty_schedule()
    return Transport(simpy.Environment(), fabric, Router(fabric), nodes, schedule, **kwargs)


def test_each_channel_gets_the_port_class_of_what_it_models(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    fabric = one_link(one_link_data)
    ab = fabric.channel_index[("a", "b")]
    ba = fabric.channel_index[("b", "a")]
    plain = transport(fabric)
    assert [type(p) for p in plain.ports] == [OutputPort, OutputPort]
    flits: list[Any] = [None, None]
    flits[ab] = StubFlitLink([])
    lossy = transport(fabric, flit_links=flits)
    assert type(lossy.ports[ab]) is FlitPort
    assert type(lossy.ports[ba]) is OutputPort
    credits = [CreditLink(c.id, 4, 64, 100.0, 256) for c in fabric.channels]
    credited = transport(fabric, flit_links=flits, credit_links=credits)
    assert type(credited.ports[ab]) is CreditedFlitPort
    assert type(credited.ports[ba]) is CreditedPort


def test_a_replayed_burst_holds_the_port_and_arrives_later_but_left_at_its_start(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    fabric = one_link(one_link_data)
    ab = fabric.channel_index[("a", "b")]
    link = StubFlitLink([(5.0, 7.0)])
    flits: list[Any] = [None, None]
    flits[ab] = link
    t = transport(fabric, flit_links=flits)
    port = t.ports[ab]
    first = t.inject(0, 1, SIZE, 0, KIND_DATA, 0)
    second = t.inject(0, 1, SIZE, 0, KIND_DATA, 0)
    t.run()
    service = SIZE * port.inv_bw
    assert t.t_deliver[first] == pytest.approx(service + 7.0 + port.fwd_delay)
    # The replay held the port 5 ns longer: the second burst starts after it.
    assert link.starts == [0.0, pytest.approx(service + 5.0)]
    assert t.t_left[first] == 0.0
    assert t.t_left[second] == pytest.approx(service + 5.0)
    assert port.busy_ns == pytest.approx(2 * service + 5.0)
    # Departure is recorded, not worked back from the arrival: that would be 7 ns late.
    arrival_minus_wire = t.t_deliver[first] - service - port.fwd_delay
    assert arrival_minus_wire - t.t_left[first] == pytest.approx(7.0)


def test_a_recovery_takes_the_reverse_direction_down(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    fabric = one_link(one_link_data)
    ab = fabric.channel_index[("a", "b")]
    ba = fabric.channel_index[("b", "a")]
    flits: list[Any] = [None, None]
    flits[ab] = StubFlitLink([], recovery=(10.0, 500.0))
    t = transport(fabric, flit_links=flits)
    t.inject(0, 1, SIZE, 0, KIND_DATA, 0)
    t.run()
    assert t.ports[ba].outages == [(10.0, 500.0)]
    assert t.env.now < 500.0
    back = t.inject(1, 0, SIZE, 0, KIND_DATA, 0)
    t.run()
    assert t.t_left[back] == 500.0


def test_a_busy_port_that_will_lack_credit_stalls_from_the_moment_it_is_free(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    # One header credit, 100 ns to come back: each message after the first waits, on an
    # idle port, from the end of the one before until that one's credit is back. That wait
    # is a stall even though the port was still busy when it learned it would have to.
    fabric = one_link(one_link_data)
    ab = fabric.channel_index[("a", "b")]
    credits = [CreditLink(c.id, 1, 256, 100.0, SIZE) for c in fabric.channels]
    t = transport(fabric, credit_links=credits)
    msgs = [t.inject(0, 1, SIZE, 0, KIND_DATA, 0) for _ in range(3)]
    t.run()
    port = t.ports[ab]
    service = SIZE * port.inv_bw
    stalls = credits[ab].stalls
    assert len(stalls) == 2
    for k, (_, start, end, hdr, _) in enumerate(stalls):
        # Message k + 1 was ready when message k had been serialised ...
        assert start == pytest.approx(t.t_left[msgs[k]] + service)
        # ... and went when message k's credit was back: its arrival plus the return.
        assert end == pytest.approx(t.t_deliver[msgs[k]] + 100.0)
        assert end == pytest.approx(t.t_left[msgs[k + 1]])
        assert hdr == 1


@pytest.mark.parametrize(("later", "earlier"), list(product(range(N_CLASSES), repeat=2)))
def test_the_passing_table_is_the_ordering_table_without_relaxations(
    later: int, earlier: int
) -> None:
    base, _ = ORDERING_TABLE[(FC_CLASSES[later], FC_CLASSES[earlier])]
    assert PASSES_ALL[later][1 << earlier] is (base is not Pass.NO)


def test_nothing_passes_a_posted_request_and_something_passes_every_other_class() -> None:
    posted = FC_CLASSES.index(FcClass.P)
    for cls in range(N_CLASSES):
        assert PASSABLE[1 << cls] is (cls != posted)
        # A class ahead that nothing passes blocks whatever else is ahead with it.
        assert not PASSES_ALL[cls][(1 << posted) | (1 << cls)]
