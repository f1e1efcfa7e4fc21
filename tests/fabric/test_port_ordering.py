"""PCIe ordering at a credited port: what may pass a message that has no credit.

A port whose head has no credit lets a later message go only where the ordering table
allows it (no relaxed-ordering or ID-based-ordering attributes at fabric ports): posted
requests pass non-posted ones and completions, those two pass each other, and nothing
passes a posted request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from sitssim.fabric.messages import KIND_TXN_COMPLETION, KIND_TXN_READ, KIND_TXN_WRITE
from sitssim.fabric.ports import CreditedPort
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import scenario_from_data
from sitssim.stages.credits import build_credit_stage
from sitssim.stages.schedule import scenario_schedule

WRITE, READ, COMPLETION = KIND_TXN_WRITE, KIND_TXN_READ, KIND_TXN_COMPLETION
# A credit that comes back long after a message's flight, so waiting for one shows.
SLOW_RETURN = "2us"


def one_credit_link(
    one_link_data: Callable[..., dict[str, Any]], header_credits: int, update_delay: str
) -> Transport:
    """An idle transport over ``a -> b`` whose far end advertises ``header_credits`` a class."""
    data = one_link_data([])
    data["link_layer"] = {
        "credits": {"header_credits": header_credits, "update_delay": update_delay}
    }
    scenario = scenario_from_data(data)
    fabric = build_fabric(scenario)
    nodes = sorted(fabric.graph)
    schedule = scenario_schedule(scenario, fabric, {n: i for i, n in enumerate(nodes)})
    credits = build_credit_stage(scenario.link_layer.credits, fabric)
    return Transport(
        simpy.Environment(), fabric, Router(fabric), nodes, schedule, None, credits.links
    )


def send_all(transport: Transport, kinds: list[int], size: int = 64) -> list[float]:
    """Inject ``kinds`` from ``a`` to ``b`` at t = 0, in order; their delivery times."""
    msgs = [transport.inject(0, 1, size, 0, kind, 0) for kind in kinds]
    transport.run()
    return [transport.t_deliver[m] for m in msgs]


@pytest.fixture
def link(one_link_data: Callable[..., dict[str, Any]]) -> Callable[..., Transport]:
    def make(header_credits: int = 1, update_delay: str = SLOW_RETURN) -> Transport:
        return one_credit_link(one_link_data, header_credits, update_delay)

    return make


def test_a_posted_write_passes_a_read_that_waits_for_credit(
    link: Callable[..., Transport],
) -> None:
    read1, read2, write = send_all(link(), [READ, READ, WRITE])
    # The second read waits for the first one's credit to come back; the write does not.
    assert write < read2
    assert write - read1 < 1000.0 < read2 - read1


def test_a_strict_fifo_port_would_hold_the_write_behind_the_read(
    link: Callable[..., Transport], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutation witness: without the ordering table's passing, the test above fails."""
    monkeypatch.setattr(CreditedPort, "_passer", lambda self: -1)
    _, read2, write = send_all(link(), [READ, READ, WRITE])
    assert write > read2


def test_a_completion_passes_a_waiting_read(link: Callable[..., Transport]) -> None:
    _, read2, completion = send_all(link(), [READ, READ, COMPLETION])
    assert completion < read2


@pytest.mark.parametrize("later", [READ, COMPLETION, WRITE])
def test_nothing_passes_a_posted_write_that_waits_for_credit(
    link: Callable[..., Transport], later: int
) -> None:
    _, write2, after = send_all(link(), [WRITE, WRITE, later])
    assert after > write2


@given(
    kinds=st.lists(st.sampled_from([WRITE, READ, COMPLETION]), min_size=2, max_size=14),
    sizes=st.lists(st.sampled_from([64, 256, 4096]), min_size=14, max_size=14),
    header_credits=st.integers(1, 3),
)
def test_delivery_order_never_breaks_a_no_cell(
    one_link_data: Callable[..., dict[str, Any]],
    kinds: list[int],
    sizes: list[int],
    header_credits: int,
) -> None:
    """Whatever the mix, a message delivered before an earlier one never passed a write;
    and every stall is closed once the queues are empty (the transport's fast path relies
    on that: a port with nothing queued has no stall to end)."""
    transport = one_credit_link(one_link_data, header_credits, "300ns")
    msgs = [
        transport.inject(0, 1, size, 0, kind, 0) for kind, size in zip(kinds, sizes, strict=False)
    ]
    transport.run()
    delivered = [transport.t_deliver[m] for m in msgs]
    for j in range(len(msgs)):
        for i in range(j):
            if delivered[j] < delivered[i]:
                assert kinds[i] != WRITE, f"message {j} passed the earlier write {i}"
    for port in transport.ports:
        assert not port.queue
        assert port.credit.stall_start == [None] * len(port.credit.stall_start)
