"""The observed wait-for graph (``sitssim.switch.wait_for``) on a real stalled run.

``scenarios/violations/nine_tenants.yaml`` deadlocks; the tenant-requests stage's
watchdog ends the run and snapshots ``wait_for_edges``. The snapshot is spied on here, so
that the transport can be read as it stood at the stall (a stopped run moves no message
after its watchdog fired). The observed cycle the ``deadlocks`` table names must be a
cycle of that graph, and every buffer of it full: each message that waits for it lacks
its credits there, with no UpdateFC on its way back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sitssim.fabric.nodes import AnsweringEndpoint, AnswerSlot
from sitssim.fabric.ports import CreditedPort, OutputPort
from sitssim.fabric.transport import Transport
from sitssim.scenario import load_scenario
from sitssim.simulation import RunResult, simulate
from sitssim.stages import tenant_requests as stage
from sitssim.switch.deadlock import Buffer, Stall, wait_for_cycle
from sitssim.switch.input_queued import InputQueuedSwitch
from sitssim.switch.wait_for import wait_for_edges

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "violations" / "nine_tenants.yaml"
BUFFER = re.compile(r"^(?P<src>[^>\s]+)>(?P<dst>\S+) VC(?P<vc>\d+)$")


@dataclass
class Stalled:
    run: RunResult
    transport: Transport
    snapshot: list[tuple[Buffer, Buffer]]


@pytest.fixture(scope="module")
def stalled() -> Iterator[Stalled]:
    seen: list[tuple[Transport, list[tuple[Buffer, Buffer]]]] = []

    def spy(transport: Transport) -> list[tuple[Buffer, Buffer]]:
        edges = wait_for_edges(transport)
        seen.append((transport, edges))
        return edges

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stage, "wait_for_edges", spy)
        run = simulate(load_scenario(SCENARIO))
    assert len(seen) == 1, "the watchdog snapshots once, when it fires"
    (transport, snapshot) = seen[0]
    yield Stalled(run, transport, snapshot)


def observed_cycle(s: Stalled) -> list[Buffer]:
    """The observed cycle of the ``deadlocks`` table, read back from its text."""
    (row,) = s.run.tables["deadlocks"].query("kind == 'observed'").itertuples()
    names = row.cycle.split(" -> ")
    assert names[0] == names[-1], "the text closes the cycle"
    buffers = []
    for name in names[:-1]:
        m = BUFFER.match(name)
        assert m is not None, name
        channel = s.transport.fabric.channel_index[(m["src"], m["dst"])]
        buffers.append((channel, int(m["vc"])))
    assert len(buffers) == row.buffers
    return buffers


def closed(cycle: list[Buffer]) -> list[tuple[Buffer, Buffer]]:
    return list(zip(cycle, [*cycle[1:], cycle[0]], strict=True))


def waiters(t: Transport, buffer: Buffer) -> list[tuple[int, CreditedPort]]:
    """Every message that waits now for ``buffer``'s credits, with the port into it: input-
    queued switch heads blocked at that output, and messages queued at that port."""
    channel, vc = buffer
    out: list[tuple[int, CreditedPort]] = []
    for node in t.node_objects:
        if isinstance(node, InputQueuedSwitch):
            for _, _, msg, port in node.blocked_heads():
                if port.channel == channel and t.vc[msg] == vc:
                    out.append((msg, port))
    port = t.ports[channel]
    if isinstance(port, CreditedPort):
        out += [(msg, port) for msg, _ in port.waiting() if t.vc[msg] == vc]
    return out


def test_the_run_stopped_at_the_stall_the_table_records(stalled: Stalled) -> None:
    t = stalled.transport
    (row,) = stalled.run.tables["deadlocks"].query("kind == 'observed'").itertuples()
    assert isinstance(t.stopped, Stall)
    assert t.env.now == row.t_ns == t.stopped.t_ns
    assert t.undelivered == row.outstanding > 0
    # Nothing moved since the snapshot: the graph is as the watchdog saw it.
    assert wait_for_edges(t) == stalled.snapshot


def test_the_observed_cycle_is_the_cycle_of_the_snapshot(stalled: Stalled) -> None:
    cycle = observed_cycle(stalled)
    assert cycle == wait_for_cycle(stalled.snapshot)


def test_every_step_of_the_observed_cycle_is_a_wait_at_the_stall(stalled: Stalled) -> None:
    edges = set(wait_for_edges(stalled.transport))
    cycle = observed_cycle(stalled)
    assert len(cycle) >= 2
    for edge in closed(cycle):
        assert edge in edges, edge


def test_every_buffer_of_the_cycle_is_full_with_no_credit_coming_back(stalled: Stalled) -> None:
    t = stalled.transport
    now = t.env.now
    for buffer in observed_cycle(stalled):
        blocked = waiters(t, buffer)
        assert blocked, f"nothing waits for {buffer}"
        for msg, port in blocked:
            cost = port.costs[msg]
            assert not port.credit.fits(cost, now), (buffer, msg)
            assert all(c[0] != cost[0] for _, c in port.credit.returning), (buffer, msg)


def test_each_step_of_the_cycle_is_held_by_something_waiting(stalled: Stalled) -> None:
    """Of each edge, the waiting buffer holds a message that waits: a switch head blocked
    at the next buffer's output, a message queued at that output that came over the
    waiting buffer's channel, or a request held at an answering endpoint whose answer
    waits at that output."""
    t = stalled.transport
    for (held_ch, held_vc), (want_ch, want_vc) in closed(observed_cycle(stalled)):
        reasons = []
        for node in t.node_objects:
            if isinstance(node, InputQueuedSwitch):
                reasons += [
                    "switch head"
                    for in_port, vc, msg, out in node.blocked_heads()
                    if (in_port.channel, vc, out.channel, t.vc[msg])
                    == (held_ch, held_vc, want_ch, want_vc)
                ]
            if isinstance(node, AnsweringEndpoint):
                port = t.ports[want_ch]
                answers = [
                    m
                    for m, slot in (port.waiting() if isinstance(port, CreditedPort) else [])
                    if isinstance(slot, AnswerSlot) and slot.endpoint is node
                ]
                reasons += [
                    "held request"
                    for msg, in_port in node.waiting()
                    if in_port.channel == held_ch and t.vc[msg] == held_vc and answers
                ]
        port = t.ports[want_ch]
        if isinstance(port, CreditedPort):
            reasons += [
                "forwarded"
                for _, came_over in port.waiting()
                if isinstance(came_over, OutputPort) and came_over.channel == held_ch
            ]
        assert reasons, ((held_ch, held_vc), (want_ch, want_vc))
