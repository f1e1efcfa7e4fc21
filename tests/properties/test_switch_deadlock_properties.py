"""Property tests of deadlock detection for clause ``switch.vc_tenants``
(``sitssim.switch.deadlock``).

- The pre-run detector finds a cycle in every generated dependency graph that has one and
  none in the acyclic ones. Graphs are made as a DAG over a random topological order,
  and half of them get back edges, each closing a path of the DAG, so they have a cycle;
  their edges reach the detector as flows, each edge either a route step (a two-channel
  flow) or an endpoint's answer (a request flow's last buffer waiting for a response
  flow's first). A found cycle is a cycle of the graph, in normal form, and the same
  whatever the order of the flows; the wait-for detector gives the same one from the
  edges. A separate test checks that both kinds of graph come out in real proportion.
- The watchdog never fires on a run that makes progress within every window while work is
  outstanding (bursts of moves with gaps below the window, separated by idle time with
  nothing in flight, beside events that carry no progress), and lets it end; and always
  fires when progress stops with work outstanding, at least one and less than two windows
  after the last progress, even beside events that never stop.
- The clause, on whole runs of small NVSwitch fabrics with request-and-completion traffic
  of one to nine tenants: it fails exactly when the run stalled, as the transport's
  ``messages`` table shows it (messages never delivered), and a tenant whose requests and
  completions have VCs of their own never stalls. Of the ci profile's 6 runs with shared
  VCs 5 stall and fail, 1 passes; its 6 runs with separate VCs pass. The detector's
  graphs come out 118 acyclic and 110 cyclic.

Counted running this file alone under the ci profile. Hypothesis seeds a derandomised
test from its source (docstring included) and draws some values from the literals of the
sitssim modules loaded so far, so another commit or run order draws other examples, in
about these proportions.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Generator
from pathlib import Path

import networkx as nx
import pytest
import simpy
from hypothesis import event, given, settings
from hypothesis import strategies as st
from properties.budget import examples
from simpy.events import Event

from sitssim.link.credit_link import N_CLASSES
from sitssim.scenario import load_scenario
from sitssim.simulation import simulate
from sitssim.switch.deadlock import (
    Buffer,
    Flow,
    NoProgressWatchdog,
    Stall,
    dependency_cycle,
    dependency_graph,
    wait_for_cycle,
)

Edge = tuple[Buffer, Buffer]


@st.composite
def dependency_graphs(draw: st.DrawFn) -> tuple[set[Edge], list[Flow], list[tuple[int, int]]]:
    """A graph's edges between buffers, and flows and answers that make exactly those
    edges. Vertex k is buffer ``(channel[k], vc[k])``: channels are a shuffle, so the
    buffers' order is not the vertices' and the normal form's rotation has work to do."""
    n = draw(st.integers(2, 10))
    order = draw(st.permutations(range(n)))
    rank = {v: i for i, v in enumerate(order)}
    forward = [(u, v) for u in range(n) for v in range(n) if rank[u] < rank[v]]
    dag = draw(st.lists(st.sampled_from(forward), max_size=2 * n, unique=True))
    edges = set(dag)
    if draw(st.booleans()):
        # Each back edge v -> u closes a path u ~> v of the DAG, made here if there is none.
        graph = nx.DiGraph(dag)
        graph.add_nodes_from(range(n))
        for u, v in draw(st.lists(st.sampled_from(forward), min_size=1, max_size=3)):
            if v not in nx.descendants(graph, u):
                edges.add((u, v))
            edges.add((v, u))
    channels = draw(st.permutations(range(100, 100 + n)))
    vcs = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    buffer = [(channels[k], vcs[k]) for k in range(n)]
    flows: list[Flow] = [Flow((channels[k],), vcs[k], 0) for k in range(n)]
    answers: list[tuple[int, int]] = []
    for u, v in sorted(edges):
        fc = draw(st.integers(0, N_CLASSES - 1))
        if vcs[u] == vcs[v] and draw(st.booleans()):
            flows.append(Flow((channels[u], channels[v]), vcs[u], fc))
        else:
            # One-channel flows for the two ends: the answer is their only edge.
            flows.append(Flow((channels[u],), vcs[u], fc))
            flows.append(Flow((channels[v],), vcs[v], fc))
            answers.append((len(flows) - 2, len(flows) - 1))
    return {(buffer[u], buffer[v]) for u, v in edges}, flows, answers


@settings(max_examples=examples(200))
@given(dependency_graphs(), st.randoms(use_true_random=False))
def test_the_detector_finds_a_cycle_exactly_when_there_is_one(
    generated: tuple[set[Edge], list[Flow], list[tuple[int, int]]], rng: random.Random
) -> None:
    edges, flows, answers = generated
    graph = dependency_graph(flows, answers)
    assert set(graph.edges) == edges
    acyclic = nx.is_directed_acyclic_graph(nx.DiGraph(list(edges)))
    event("acyclic" if acyclic else "cyclic")
    cycle = dependency_cycle(flows, answers)
    if acyclic:
        assert cycle is None
        assert wait_for_cycle(edges) is None
        return
    assert cycle is not None
    assert len(set(cycle)) == len(cycle) and cycle[0] == min(cycle)
    assert all(e in edges for e in zip(cycle, [*cycle[1:], cycle[0]], strict=True))
    # The answer depends on the dependencies only: not on the flows' order, nor on
    # whether they reach it as flows or as observed waits.
    shuffled = list(range(len(flows)))
    rng.shuffle(shuffled)
    where = {old: new for new, old in enumerate(shuffled)}
    moved = [flows[i] for i in shuffled]
    assert dependency_cycle(moved, [(where[q], where[r]) for q, r in answers]) == cycle
    assert wait_for_cycle(edges) == cycle


def test_generated_graphs_are_cyclic_and_acyclic_in_real_proportion() -> None:
    seen: Counter[bool] = Counter()

    @settings(max_examples=examples(200))
    @given(dependency_graphs())
    def record(generated: tuple[set[Edge], list[Flow], list[tuple[int, int]]]) -> None:
        seen[nx.is_directed_acyclic_graph(nx.DiGraph(list(generated[0])))] += 1

    record()
    total = sum(seen.values())
    assert min(seen[True], seen[False]) >= 0.25 * total, seen


# --- the watchdog -------------------------------------------------------------------


class Run:
    """A fake fabric driven by bursts of work: per burst an idle time with nothing in
    flight, then one message moved after each gap (delivered at the last move, unless the
    run stalls there), and a heartbeat beside it that carries no progress."""

    def __init__(self, window: int, stall: bool) -> None:
        self.env = simpy.Environment()
        self.moved = 0
        self.in_flight = 0
        self.last_move = math.nan
        self.stall = stall
        self.dog: NoProgressWatchdog[None] = NoProgressWatchdog(
            self.env, float(window), lambda: self.moved, lambda: self.in_flight
        )

    def work(self, bursts: list[tuple[int, list[int]]]) -> Generator[Event, object, None]:
        for b, (idle, gaps) in enumerate(bursts):
            yield self.env.timeout(idle)
            if not self.in_flight:
                self.dog.arm()
            self.in_flight += 1
            for k, gap in enumerate(gaps):
                yield self.env.timeout(gap)
                self.moved += 1
                self.last_move = self.env.now
                last = k == len(gaps) - 1
                if last and not (self.stall and b == len(bursts) - 1):
                    self.in_flight -= 1

    def beat(self, period: int, until: float) -> Generator[Event, object, None]:
        while self.env.now + period <= until:
            yield self.env.timeout(period)


@st.composite
def runs(draw: st.DrawFn) -> tuple[int, list[tuple[int, list[int]]], int]:
    """A window, bursts of (idle time, gaps between moves, each below the window), and
    a heartbeat period; whole nanoseconds, so every time is exact in floating point."""
    window = draw(st.integers(2, 500))
    gaps = st.lists(st.integers(1, window - 1), min_size=1, max_size=25)
    bursts = draw(st.lists(st.tuples(st.integers(0, 3 * window), gaps), min_size=1, max_size=4))
    return window, bursts, draw(st.integers(1, 3 * window))


def span(bursts: list[tuple[int, list[int]]]) -> int:
    return sum(idle + sum(gaps) for idle, gaps in bursts)


@settings(max_examples=examples(150))
@given(runs(), st.booleans())
def test_the_watchdog_never_fires_on_a_run_making_progress(
    run: tuple[int, list[tuple[int, list[int]]], int], beats: bool
) -> None:
    window, bursts, period = run
    fake = Run(window, stall=False)
    fake.env.process(fake.work(bursts))
    if beats:
        fake.env.process(fake.beat(period, until=span(bursts) + 2 * window))
    # Stepped, so that a watchdog keeping a finished run alive fails here, not hangs; a
    # watchdog that fires fails here too (its StopSimulation escapes ``step``).
    for _ in range(100_000):
        if fake.env.peek() == math.inf:
            break
        fake.env.step()
    assert fake.dog.stall is None and fake.in_flight == 0
    # It let the run end: no check is left, and the last one was within a window of the
    # last event other than its own.
    assert fake.env.peek() == math.inf and not fake.dog.armed
    end = span(bursts) + 2 * window if beats else span(bursts)
    assert fake.env.now < end + window
    # Checks run only while work is in flight: at most one per window of it, plus one
    # per burst (the check that finds the burst over).
    busy = sum(sum(gaps) for _, gaps in bursts)
    assert fake.dog.checks <= busy / window + 2 * len(bursts)


@settings(max_examples=examples(150))
@given(runs(), st.booleans())
def test_the_watchdog_fires_between_one_and_two_windows_after_progress_stops(
    run: tuple[int, list[tuple[int, list[int]]], int], beats: bool
) -> None:
    window, bursts, period = run
    fake = Run(window, stall=True)
    fake.env.process(fake.work(bursts))
    if beats:
        # Beats without end: only the watchdog can end this run.
        fake.env.process(fake.beat(period, until=math.inf))
    # The end is a guard, far past any fire: a watchdog that failed to fire makes the
    # run return None there instead of hanging on the endless heartbeat.
    stall = fake.env.run(until=span(bursts) + 10 * window)
    assert isinstance(stall, Stall) and stall is fake.dog.stall
    assert stall.progress == fake.moved == sum(len(g) for _, g in bursts)
    assert stall.outstanding == 1
    assert window <= stall.t_ns - fake.last_move < 2 * window
    assert stall.quiet_since_ns == stall.t_ns - window >= fake.last_move
    assert fake.env.now == stall.t_ns


# --- the clause on whole runs ---------------------------------------------------------

NINE_TENANTS = (
    Path(__file__).resolve().parents[2] / "scenarios" / "violations" / "nine_tenants.yaml"
)
ACK_TIMEOUT_NS = 1000.0


@st.composite
def tenant_fabrics(draw: st.DrawFn, vcs: str) -> dict:
    """Edits of the shipped nine-tenant witness into a small fabric (3 or 4 GPUs, one
    NVSwitch plane, one or two links per GPU) under 50 to 90 % load for 1 us, with shallow
    completion queues and a 1 us ACK timeout so that a stall shows within the run.
    ``shared``: one to nine tenants, one VC each, which its requests and completions share
    (and, past eight tenants, with another tenant's). ``separate``: one or two tenants, a VC
    per flow-control class each, so completions never wait behind requests."""
    shape = {
        "gpus": draw(st.integers(3, 4)),
        "planes": 1,
        "links_per_gpu": draw(st.integers(1, 2)),
    }
    tenants = draw(st.integers(1, 9) if vcs == "shared" else st.integers(1, 2))
    traffic = {
        "load": draw(st.sampled_from([0.5, 0.7, 0.9])),
        "completion_queue": draw(st.integers(1, 2)),
        "ack_timeout": f"{ACK_TIMEOUT_NS:g}ns",
    }
    return {
        "seed": draw(st.integers(0, 1000)),
        "shape": shape,
        "tenants": [{"name": f"t{k}"} for k in range(tenants)],
        "vcs_per_tenant": 1 if vcs == "shared" else 3,
        "traffic": traffic,
    }


# Each example is a whole run (about 0.3 s): a sixth of the profile's examples per side.
@pytest.mark.parametrize("vcs", ["shared", "separate"])
@settings(max_examples=examples(6))
@given(data=st.data())
def test_switch_vc_tenants_fails_exactly_when_the_run_stalls(vcs: str, data: st.DataObject) -> None:
    """switch.vc_tenants: the verdict fails, measured 1 deadlock, exactly when some message
    was never delivered (the transport's record, not the deadlock stage's); the stall it
    reports came after the last delivery, within one to two ACK timeouts, with every
    undelivered message outstanding. Tenants with a VC per class never stall."""
    drawn = data.draw(tenant_fabrics(vcs))

    def edit(scenario: dict) -> None:
        scenario.update(duration="1us", seed=drawn["seed"], tenants=drawn["tenants"])
        scenario["topology"] = {**scenario["topology"], **drawn["shape"]}
        scenario["switch"]["vc_quota"] = {"vcs_per_tenant": drawn["vcs_per_tenant"]}
        scenario["workloads"][0].update(drawn["traffic"])

    run = simulate(load_scenario(NINE_TENANTS, edit=edit))
    delivered = run.tables["messages"]["t_deliver_ns"]
    stalled = bool(delivered.isna().any())
    event(f"{vcs}: {'stalled: fail' if stalled else 'all delivered: pass'}")
    (verdict,) = [v for v in run.verdicts if v.id == "switch.vc_tenants"]
    assert (verdict.verdict, verdict.measured) == (("fail", 1.0) if stalled else ("pass", 0.0))
    if vcs == "separate":
        assert not stalled
    if stalled:
        (seen,) = run.tables["deadlocks"].query("kind == 'observed'").itertuples()
        assert seen.last_delivery_ns == delivered.max()
        assert ACK_TIMEOUT_NS <= seen.t_ns - seen.last_delivery_ns < 2 * ACK_TIMEOUT_NS
        assert seen.outstanding == delivered.isna().sum()
