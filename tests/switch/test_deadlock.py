"""Deadlock detection for ``switch.vc_tenants`` (``sitssim.switch.deadlock``).

The pre-run check on the shipped fat tree's own routes: two tenants whose requests and
responses share one VC, requests in opposite directions and responses on the reverse
path, give a message-dependent cycle; the same tenants with separate request and response
VCs, or without the endpoints' answers, or alone, give none. A ring gives a routing cycle
without any answer. The observed wait-for cycle, and the watchdog on a bare SimPy
environment with a fake progress counter, attached as a transport would attach it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import networkx as nx
import pytest
import simpy
from simpy.events import Event

from sitssim.fabric.messages import FC_CLASS_OF_KIND, KIND_TXN_COMPLETION, KIND_TXN_READ
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.switch.deadlock import (
    CLAUSE,
    WATCHDOG_PRIORITY,
    Buffer,
    Flow,
    NoProgressWatchdog,
    Stall,
    cycle_text,
    cycle_warning,
    dependency_cycle,
    dependency_graph,
    normal_cycle,
    wait_for_cycle,
)
from sitssim.switch.input_queued import AFTER_ARRIVALS

ScenarioData = dict[str, Any]
REQUEST = FC_CLASS_OF_KIND[KIND_TXN_READ]
RESPONSE = FC_CLASS_OF_KIND[KIND_TXN_COMPLETION]


def closed(cycle: list[Buffer]) -> Iterator[tuple[Buffer, Buffer]]:
    """The cycle's edges, the last vertex back to the first included."""
    return zip(cycle, [*cycle[1:], cycle[0]], strict=True)


# --- the pre-run check on a fat tree's routes -------------------------------------


@pytest.fixture(scope="module")
def tree(fat_tree_data: Callable[..., ScenarioData]) -> tuple[Fabric, Router]:
    fabric = build_fabric(scenario_from_data(fat_tree_data(probes=None)))
    return fabric, Router(fabric)


def leaf(router: Router, gpu: str) -> str:
    return router.route(gpu, "rc0").nodes[1]


def spine(router: Router, src: str, dst: str) -> str:
    """The top of a leaf-to-leaf route: the spine it turns at."""
    nodes = router.route(src, dst).nodes
    assert len(nodes) == 5, f"{src} and {dst} should sit under different leaves"
    return nodes[2]


def crossing_tenants(router: Router) -> tuple[tuple[str, str], tuple[str, str]]:
    """Tenant A's requester and responder, and tenant B's, B's requests going the other
    way, each tenant's responses on the reverse of its requests' path, and all four routes
    through one spine: the shape of a message-dependent deadlock in an up/down tree."""
    a = ("gpu0", "gpu5")
    top = spine(router, *a)
    assert spine(router, a[1], a[0]) == top, "a pinned pair's response retraces its request"
    gpus = [n for n in router.tables.names if n.startswith("gpu")]
    for requester in gpus:
        for responder in gpus:
            if (
                leaf(router, requester) == leaf(router, a[1])
                and leaf(router, responder) == leaf(router, a[0])
                and requester != a[1]
                and responder != a[0]
                and spine(router, requester, responder) == top
                and spine(router, responder, requester) == top
            ):
                return a, (requester, responder)
    raise AssertionError("the fat tree has no second tenant through tenant A's spine")


def tenant_flows(
    router: Router, tenants: list[tuple[str, str]], request_vc: int, response_vc: int
) -> tuple[list[Flow], list[tuple[int, int]]]:
    """Each tenant's requests and their responses (the reverse route), and the answers."""
    flows: list[Flow] = []
    answers: list[tuple[int, int]] = []
    for requester, responder in tenants:
        flows.append(Flow(router.route(requester, responder).channels, request_vc, REQUEST))
        flows.append(Flow(router.route(responder, requester).channels, response_vc, RESPONSE))
        answers.append((len(flows) - 2, len(flows) - 1))
    return flows, answers


def test_two_tenants_sharing_one_vc_give_a_message_dependent_cycle(
    tree: tuple[Fabric, Router],
) -> None:
    fabric, router = tree
    a, b = crossing_tenants(router)
    flows, answers = tenant_flows(router, [a, b], request_vc=0, response_vc=0)
    graph = dependency_graph(flows, answers)
    cycle = normal_cycle(graph)
    assert cycle is not None
    assert cycle == dependency_cycle(flows, answers)
    assert cycle[0] == min(cycle) and len(set(cycle)) == len(cycle)
    assert all(graph.has_edge(u, v) for u, v in closed(cycle))
    # Both tenants' endpoints close it: each holds a request until it can queue a response.
    answered = [(u, v) for u, v in closed(cycle) if graph.edges[u, v]["answer"]]
    ch = fabric.channels
    assert sorted((ch[u[0]].dst, ch[v[0]].src) for u, v in answered) == sorted(
        [(a[1], a[1]), (b[1], b[1])]
    )
    # What waits at each edge: the requests at the endpoints' answers, and along the
    # routes each tenant's requests and the other tenant's responses.
    assert {graph.edges[e]["classes"] for e in answered} == {frozenset({REQUEST})}
    along = {c for e in closed(cycle) if e not in answered for c in graph.edges[e]["classes"]}
    assert along == {REQUEST, RESPONSE}
    # Every buffer of it is on VC 0, and the cycle turns at the shared spine.
    assert {vc for _, vc in cycle} == {0}
    assert spine(router, *a) in {ch[c].dst for c, _ in cycle}


def test_separate_request_and_response_vcs_give_no_cycle(tree: tuple[Fabric, Router]) -> None:
    _, router = tree
    flows, answers = tenant_flows(router, list(crossing_tenants(router)), 0, 1)
    assert dependency_cycle(flows, answers) is None
    # The answers still link the two VCs, one way only: requests' buffers to responses'.
    graph = dependency_graph(flows, answers)
    assert {(u[1], v[1]) for u, v in graph.edges if graph.edges[u, v]["answer"]} == {(0, 1)}


def test_up_down_routes_alone_and_one_tenant_alone_give_no_cycle(
    tree: tuple[Fabric, Router],
) -> None:
    _, router = tree
    a, b = crossing_tenants(router)
    flows, _ = tenant_flows(router, [a, b], 0, 0)
    # Endpoints that consume whatever arrives: reading 9, a tree cannot deadlock by itself.
    assert dependency_cycle(flows) is None
    alone, answered = tenant_flows(router, [a], 0, 0)
    assert dependency_cycle(alone, answered) is None


def test_the_warning_names_the_cycle_on_one_line(tree: tuple[Fabric, Router]) -> None:
    fabric, router = tree
    flows, answers = tenant_flows(router, list(crossing_tenants(router)), 0, 0)
    graph = dependency_graph(flows, answers)
    cycle = normal_cycle(graph)
    assert cycle is not None

    def name(c: int) -> str:
        return fabric.channels[c].name

    line = cycle_warning(cycle, graph, name)
    assert "\n" not in line
    assert CLAUSE in line and "message-dependent deadlock" in line
    assert f"cycle of {len(cycle)} buffers" in line
    text = cycle_text(cycle, name, graph)
    assert line.endswith(text)
    hops = text.replace(" => ", " -> ").split(" -> ")
    assert hops == [f"{name(c)} VC{vc}" for c, vc in [*cycle, cycle[0]]]
    assert text.count(" => ") == 2


def test_a_ring_gives_a_routing_cycle_without_answers() -> None:
    """Four switches in a ring, each sending two hops clockwise on one VC: the textbook
    routing deadlock. Channel i runs from switch i to switch i + 1."""
    flows = [Flow((i, (i + 1) % 4), 0, REQUEST) for i in range(4)]
    cycle = dependency_cycle(flows)
    assert cycle == [(0, 0), (1, 0), (2, 0), (3, 0)]
    # The normal form does not depend on the order the flows are listed in.
    assert dependency_cycle(flows[::-1]) == cycle
    assert dependency_cycle(flows[2:] + flows[:2]) == cycle
    line = cycle_warning(cycle, dependency_graph(flows))
    assert "routing deadlock" in line and "=>" not in line
    assert line.endswith("0 VC0 -> 1 VC0 -> 2 VC0 -> 3 VC0 -> 0 VC0")


@pytest.mark.parametrize(
    ("flows", "answers", "problem"),
    [
        ([Flow((), 0, REQUEST)], [], "no channel"),
        ([Flow((1, 2, 1), 0, REQUEST)], [], "twice"),
        ([Flow((1,), -1, REQUEST)], [], "negative"),
        ([Flow((1,), 0, 7)], [], "class 7"),
        ([Flow((1,), 0, REQUEST)], [(0, 1)], "not listed"),
    ],
)
def test_malformed_flows_are_refused(
    flows: list[Flow], answers: list[tuple[int, int]], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        dependency_graph(flows, answers)


# --- the observed wait-for cycle ------------------------------------------------


def test_the_observed_wait_for_cycle_leaves_out_the_buffers_queued_behind_it() -> None:
    # Buffers (9, 0) and (8, 1) are blocked behind the cycle but are not part of it; (5, 0)
    # is a virtual-output-queue buffer waiting for two outputs, one of them in the cycle.
    waits = [
        ((7, 1), (3, 0)),
        ((3, 0), (5, 0)),
        ((5, 0), (7, 1)),
        ((5, 0), (6, 0)),
        ((9, 0), (3, 0)),
        ((8, 1), (9, 0)),
    ]
    cycle = wait_for_cycle(waits)
    assert cycle == [(3, 0), (5, 0), (7, 1)]
    assert wait_for_cycle(waits[::-1]) == cycle
    assert cycle_text(cycle, lambda c: f"ch{c}") == "ch3 VC0 -> ch5 VC0 -> ch7 VC1 -> ch3 VC0"


def test_blocked_buffers_waiting_on_a_draining_one_are_no_deadlock() -> None:
    # A chain ending at a buffer that waits for nothing (it drains into an endpoint).
    assert wait_for_cycle([((1, 0), (2, 0)), ((2, 0), (3, 0)), ((4, 0), (2, 0))]) is None
    assert wait_for_cycle([]) is None


def test_both_cycles_share_one_normal_form() -> None:
    """The same dependencies seen before the run and observed in it give the same list."""
    edges = [((4, 0), (2, 1)), ((2, 1), (6, 0)), ((6, 0), (4, 0))]
    graph = nx.DiGraph(edges)
    assert normal_cycle(graph) == wait_for_cycle(edges) == [(2, 1), (6, 0), (4, 0)]


# --- the watchdog on a bare environment -------------------------------------------


class FakeFabric:
    """What a transport gives its watchdog: a counter of messages moved and the messages
    in flight, and the hook that wakes the watchdog when work appears."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.moved = 0
        self.in_flight = 0
        self.last_move = math.nan
        self.snapshots = 0
        self.dog: NoProgressWatchdog[list[tuple[Buffer, Buffer]]] | None = None

    def attach(self, window_ns: float) -> NoProgressWatchdog[list[tuple[Buffer, Buffer]]]:
        self.dog = NoProgressWatchdog(
            self.env,
            window_ns,
            progress=lambda: self.moved,
            outstanding=lambda: self.in_flight,
            snapshot=self.snapshot,
        )
        return self.dog

    def snapshot(self) -> list[tuple[Buffer, Buffer]]:
        self.snapshots += 1
        return [((1, 0), (2, 0)), ((2, 0), (1, 0))]

    def inject(self, n: int = 1) -> None:
        # A transport arms its watchdog on an injection that finds nothing in flight.
        if not self.in_flight and self.dog is not None:
            self.dog.arm()
        self.in_flight += n

    def move(self, delivered: int = 0) -> None:
        self.moved += 1
        self.in_flight -= delivered
        self.last_move = self.env.now


def worker(
    env: simpy.Environment, fab: FakeFabric, period: float, moves: int, deliver: bool
) -> Generator[Event, object, None]:
    """Inject one message and move it every ``period`` ns, ``moves`` times; deliver it at
    the last move, or leave it stuck."""
    fab.inject()
    for k in range(moves):
        yield env.timeout(period)
        fab.move(delivered=int(deliver and k == moves - 1))


def run_to_end(env: simpy.Environment, max_steps: int = 100_000) -> None:
    """Run ``env`` to its end, failing instead of hanging on a run that never ends (and on a
    watchdog that fires: its ``StopSimulation`` escapes ``step``)."""
    for _ in range(max_steps):
        if env.peek() == math.inf:
            return
        env.step()
    raise AssertionError(f"the run was still going after {max_steps} events")


GUARD_NS = 1e5
"""An end for a stalled test run, far past any fire: a watchdog that failed to fire
makes ``env.run`` return None there instead of hanging on an endless heartbeat."""


def heartbeat(env: simpy.Environment, period: float) -> Generator[Event, object, None]:
    """Events that carry no progress and never stop (clock sync, say)."""
    while True:
        yield env.timeout(period)


def test_the_watchdog_ends_a_stalled_run_that_would_never_end_by_itself() -> None:
    env = simpy.Environment()
    fab = FakeFabric(env)
    dog = fab.attach(window_ns=50.0)
    env.process(worker(env, fab, period=10.0, moves=10, deliver=False))
    env.process(heartbeat(env, 7.0))
    wall = time.perf_counter()
    stall = env.run(until=GUARD_NS)
    wall = time.perf_counter() - wall
    assert isinstance(stall, Stall) and stall is dog.stall
    # The last move is at 100 ns, at the same instant as a check, which runs after it and
    # sees it (WATCHDOG_PRIORITY): the next check, one window on, fires.
    assert fab.last_move == 100.0
    assert (stall.t_ns, stall.quiet_since_ns) == (150.0, 100.0)
    assert env.now == stall.t_ns
    assert (stall.progress, stall.outstanding) == (10, 1)
    assert stall.snapshot == [((1, 0), (2, 0)), ((2, 0), (1, 0))] and fab.snapshots == 1
    assert wait_for_cycle(stall.snapshot) == [(1, 0), (2, 0)]
    assert dog.checks == 3 and not dog.armed
    assert wall < 5.0
    # A fired watchdog stays fired: arming it again schedules nothing.
    dog.arm()
    assert not dog.armed


def test_a_deadlock_that_empties_the_queue_is_still_caught() -> None:
    """Bounded buffers that deadlock schedule nothing more: without the watchdog the run
    would just end with work in flight; with it, the run ends by the watchdog."""
    env = simpy.Environment()
    fab = FakeFabric(env)
    dog = fab.attach(window_ns=30.0)
    env.process(worker(env, fab, period=20.0, moves=3, deliver=False))
    stall = env.run(until=GUARD_NS)
    assert isinstance(stall, Stall)
    assert 30.0 <= stall.t_ns - fab.last_move < 60.0
    assert dog.stall is stall


def test_a_run_that_finishes_is_not_kept_alive() -> None:
    env = simpy.Environment()
    fab = FakeFabric(env)
    dog = fab.attach(window_ns=50.0)
    env.process(worker(env, fab, period=10.0, moves=10, deliver=True))
    run_to_end(env)
    assert dog.stall is None and not dog.armed and fab.snapshots == 0
    # The last check, the one that found nothing in flight, is within a window of the end.
    assert fab.last_move <= env.now < fab.last_move + dog.window_ns
    assert env.peek() == math.inf


def test_the_watchdog_and_a_self_re_arming_report_both_let_the_run_end() -> None:
    """A progress report that re-arms while any other event remains, as the transport's
    does: a watchdog re-arming on other events too would keep it going, and it on them."""
    env = simpy.Environment()
    fab = FakeFabric(env)
    dog = fab.attach(window_ns=25.0)
    reports: list[float] = []

    def report(_ev: Event) -> None:
        reports.append(env.now)
        if env.peek() != math.inf:
            env.timeout(40.0).callbacks.append(report)

    env.timeout(40.0).callbacks.append(report)
    env.process(worker(env, fab, period=10.0, moves=20, deliver=True))
    run_to_end(env)
    assert dog.stall is None
    assert env.now < fab.last_move + 40.0 + dog.window_ns
    assert len(reports) <= 200.0 / 40.0 + 2


def test_the_watchdog_sleeps_through_idle_time_and_wakes_with_new_work() -> None:
    env = simpy.Environment()
    fab = FakeFabric(env)
    dog = fab.attach(window_ns=10.0)

    def bursts() -> Generator[Event, object, None]:
        yield env.process(worker(env, fab, period=5.0, moves=4, deliver=True))
        yield env.timeout(10_000.0)
        yield env.process(worker(env, fab, period=5.0, moves=4, deliver=False))

    env.process(bursts())
    stall = env.run(until=GUARD_NS)
    assert isinstance(stall, Stall)
    assert 10.0 <= stall.t_ns - fab.last_move < 20.0
    # Idle, nothing in flight: no check runs in the 10 µs gap.
    assert dog.checks <= 8


def test_the_watchdog_ends_a_run_given_an_until() -> None:
    env = simpy.Environment()
    fab = FakeFabric(env)
    fab.attach(window_ns=50.0)
    env.process(worker(env, fab, period=10.0, moves=2, deliver=False))
    env.process(heartbeat(env, 3.0))
    stall = env.run(until=1e9)
    # The last move at 20 ns, seen by the check at 50 ns; the one at 100 ns fires.
    assert isinstance(stall, Stall) and stall.t_ns == env.now == 100.0


def test_a_check_comes_after_everything_else_due_at_its_instant() -> None:
    assert WATCHDOG_PRIORITY > AFTER_ARRIVALS


@pytest.mark.parametrize("window", [0.0, -1.0, math.inf, math.nan])
def test_a_window_that_is_not_positive_and_finite_is_refused(window: float) -> None:
    with pytest.raises(ValueError, match="window"):
        NoProgressWatchdog(simpy.Environment(), window, lambda: 0, lambda: 0)
