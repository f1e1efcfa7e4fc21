"""Randomised end-to-end runs: small valid scenarios drawn at random keep the online
invariants and repeat themselves.

Each example is one scenario from ``random_scenarios.random_scenarios()`` (every topology
kind, link profiles, switch models, credits, flit errors, CDC, clocks, tenants and VCs,
ECMP, PHY variants, workloads, seeds: see that module), the profile's examples shared
evenly by the five topology kinds. It runs twice in one process:

1. through ``simulate`` under ``run_observer.observed_run``, which checks at each event
   that no message is lost or duplicated, that credits are conserved per channel and
   (VC, class) pool and never overdrawn, that no switch buffer or credited receive buffer
   holds more than its size, and that every LTSSM transition is legal; and at the end
   that the run drained (or, stopped by a watchdog, lost nothing) and that the
   ``messages`` and ``link_states`` tables say what happened;
2. through plain ``simulate``, whose ``report.json`` (``results.report.report_json``, what
   the CLI writes) must be byte for byte the observed run's, and every table equal: the
   run is deterministic, and the instruments change nothing.

One illegal LTSSM step is let through (and counted): a Recovery cut short by a BER
retraining recorded later (``sitssim.stages.phy`` says why). The planted-fault tests show
that the observer catches what it checks. The last section holds what the random runs
found, each cut down to a regular test.

``pytest tests/properties/test_random_runs.py -n 0 -s`` prints the tally of what was
drawn; ``test_the_draws_cover_every_kind`` gives the ``ci`` profile's and holds it.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from phy import phy_helpers as phy
from properties.random_scenarios import (
    PHY_KINDS,
    SWITCHES,
    TOPOLOGIES,
    WORKLOADS,
    RandomScenario,
    random_scenarios,
)
from properties.run_observer import Violation, check_link_states, observed_run

from sitssim.fabric.nodes import Node
from sitssim.fabric.ports import OutputPort
from sitssim.fabric.transport import Transport
from sitssim.link.credit_link import Cost, CreditLink
from sitssim.phy.ltssm import Event, Ltssm, Transition
from sitssim.protocol.ltssm_states import State
from sitssim.results.report import report_json
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate

TALLY: Counter[tuple[str, str]] = Counter()
RUNS: Counter[str] = Counter()


def _tally(case: RandomScenario) -> None:
    for dimension, label in case.variety.items():
        event(f"{dimension}={label}")
        for part in label.split("+"):
            TALLY[(dimension, part)] += 1


# The topology kinds share the profile's examples evenly, rather than as the generator
# happens to spread a few dozen draws.
EXAMPLES_PER_TOPOLOGY = max(1, settings.default.max_examples // len(TOPOLOGIES))


@pytest.mark.parametrize("topology", TOPOLOGIES)
@settings(max_examples=EXAMPLES_PER_TOPOLOGY)
@given(data=st.data())
def test_a_random_run_keeps_the_online_invariants_and_repeats_itself(
    topology: str, data: st.DataObject
) -> None:
    case = data.draw(random_scenarios(topology), label="scenario")
    scenario = scenario_from_data(case.data)
    observed, observer = observed_run(scenario)
    _tally(case)
    RUNS["examples"] += 1
    RUNS["messages"] += len(observer.at)
    RUNS["stopped"] += observer.transport is not None and observer.transport.stopped is not None
    RUNS["credited channels"] += len(observer.ledgers)
    RUNS["ltssm transitions"] += observer.ltssm.transitions
    RUNS["full switch buffers"] += any(observer.peak[n] == b for n, b in observer.bound.items())
    RUNS["full credit buffers"] += any(ledger.filled for ledger in observer.ledgers.values())
    RUNS["cut recoveries let through"] += observer.cut_recoveries

    plain = simulate(scenario)
    assert report_json(plain) == report_json(observed)
    assert plain.tables.keys() == observed.tables.keys()
    for name, table in plain.tables.items():
        pd.testing.assert_frame_equal(table, observed.tables[name], check_exact=True, obj=name)


def test_the_draws_cover_every_kind() -> None:
    """Every kind of each dimension was drawn, and the bounds were reached.

    Measured under the ``ci`` profile (40 examples, derandomised; about 19 s of CPU for this
    file on one core): 8 runs of each topology kind; switches output-queued 7,
    input-queued FIFO 17, VOQ 7, none 9 (direct RC, switchless graphs); credits on 25,
    off 15; flit errors 18, clean 22; clocks 12; VC quota tables 19; CDC 2; ECMP 1;
    PHY nominal 27, noisy with BER retraining 2, lossy 6, no EQ phase 3 3, SNR step 2;
    workloads synthetic 15, probes 16, collectives 15, transactions 9, tenants' requests
    13, crossbar bench 5. 36,979 messages, 149 credited channels, 3,298 LTSSM
    transitions; 7 runs stopped by the watchdog with messages in flight, 15 filled a
    credited buffer exactly and 1 a switch's input buffer.
    """
    print("\nrandom runs:", dict(RUNS))
    for key, n in sorted(TALLY.items()):
        print(f"  {key[0]:10s} {key[1]:32s} {n}")
    assert RUNS["examples"] == EXAMPLES_PER_TOPOLOGY * len(TOPOLOGIES)
    for dimension, labels in (
        ("topology", TOPOLOGIES),
        ("switch", SWITCHES),
        ("phy", PHY_KINDS),
        ("workloads", WORKLOADS),
        ("credits", ("on", "off")),
        ("flit", ("errors", "clean")),
        ("cdc", ("on", "off")),
        ("clocks", ("on", "off")),
        ("vcs", ("quota", "vc0")),
        ("ecmp", ("on", "off")),
    ):
        for label in labels:
            assert TALLY[(dimension, label)], (dimension, label)
    for reached in ("stopped", "full credit buffers", "full switch buffers"):
        assert RUNS[reached], reached


# --- the observer catches what it checks: faults planted in the model ------------------


def _bench(**switch: object) -> dict[str, object]:
    """Three senders saturating three receivers through one input-queued switch whose
    inputs advertise one header credit per class."""
    return {
        "name": "bench",
        "seed": 3,
        "duration": "1us",
        "topology": {"kind": "crossbar", "ports": 3},
        "links": {"default": {"rate": "64GT/s", "lanes": 4}},
        "link_layer": {
            "credits": {
                "header_credits": 1,
                "data_credits": 16,
                "max_payload": "256B",
                "advertised_by": ["switch"],
            }
        },
        "switch": {"model": "input_queued", "input_buffer": 1, **switch},
        "workloads": [
            {
                "kind": "synthetic",
                "pattern": "uniform_random",
                "sources": ["in0", "in1", "in2"],
                "destinations": ["out0", "out1", "out2"],
                "message_bytes": "256B",
                "load": 1.3,
            }
        ],
    }


def test_the_planted_faults_bench_runs_clean() -> None:
    """The bench the faults below are planted in keeps every invariant as it stands, and
    fills a switch buffer and a credited buffer to their bounds."""
    _, observer = observed_run(scenario_from_data(_bench()))
    assert any(observer.peak[n] == b for n, b in observer.bound.items())
    assert any(ledger.filled for ledger in observer.ledgers.values())


def test_a_sender_that_ignores_its_credits_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def regardless(self: CreditLink, cost: Cost, ready: float, now: float) -> bool:
        pool, hdr, data = cost
        self.sync(ready)
        self.avail_hdr[pool] -= hdr
        self.avail_data[pool] -= data
        return True

    monkeypatch.setattr(CreditLink, "take", regardless)
    with pytest.raises(Violation, match="without credit"):
        observed_run(scenario_from_data(_bench()))


def test_a_credit_that_is_not_charged_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CreditLink, "take", lambda self, cost, ready, now: True)
    with pytest.raises(Violation, match="more than the 0 given back"):
        observed_run(scenario_from_data(_bench()))


def test_a_credit_given_back_twice_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    release = CreditLink.release

    def twice(self: CreditLink, cost: Cost, t_leave: float, now: float) -> float:
        release(self, cost, t_leave, now)
        return self.pass_through(cost, t_leave, now)

    monkeypatch.setattr(CreditLink, "release", twice)
    with pytest.raises(Violation, match="sender \\+ returning \\+ wire \\+ far buffer"):
        observed_run(scenario_from_data(_bench()))


def test_a_switch_buffer_past_its_bound_is_caught_before_the_switch_sees_it() -> None:
    """Without credits nothing holds the senders back: the observer's own count of the
    switch's input buffer passes its bound before the switch's check would."""
    data = _bench()
    data["link_layer"] = {}
    with pytest.raises(Violation, match="above its 1"):
        observed_run(scenario_from_data(data))


def test_an_ltssm_step_outside_its_table_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    handle = Ltssm.handle

    def skips_polling(machine: Ltssm, event: Event) -> Transition:
        taken = handle(machine, event)
        if machine.state is State.POLLING_ACTIVE:
            machine.state = State.POLLING_CONFIGURATION
        return taken

    monkeypatch.setattr(Ltssm, "handle", skips_polling)
    with pytest.raises(Violation, match="which its transition table has no row for"):
        observed_run(scenario_from_data(_bench()))


def test_a_message_delivered_twice_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    take = Node.take

    def twice(self: Node, msg: int, in_port: OutputPort) -> None:
        take(self, msg, in_port)
        self._deliver(msg)

    monkeypatch.setattr(Node, "take", twice)
    with pytest.raises(Violation, match="delivered a second time"):
        observed_run(scenario_from_data(_bench()))


def test_a_messages_table_that_misstates_a_route_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    route_ids = Transport.route_ids
    # Each message given the route of the one before it.
    monkeypatch.setattr(Transport, "route_ids", lambda self: np.roll(route_ids(self), 1))
    with pytest.raises(Violation, match="the messages table says"):
        observed_run(scenario_from_data(_bench()))


# --- what the random runs found, each cut down to its cause ----------------------------


@pytest.mark.parametrize("gap_ns", [100.0, 5_000.0])
def test_a_rollover_computed_after_a_later_one_waits_in_rcvrlock_and_joins_it(
    gap_ns: float,
) -> None:
    """Found by the random runs (2 of 40 in one derandomised draw: a flit link at BER 3e-4
    with a 1-bit REPLAY_NUM, both directions rolling over): one direction's session, played
    first, asks for Recovery at t; the other's, played after it, for an earlier time, while
    its own walk would still be in Recovery at t. The earlier episode was cut where the
    later one starts, in Recovery.RcvrLock (gap 100 ns) or EQ phase 1 (5 us), and the later
    one entered Recovery.RcvrLock from there, which no LTSSM transition does. Now the link
    waits in RcvrLock from the earlier request and goes on with the later walk: legal
    states, one Recovery, and both directions back when it ends."""
    stage = phy.phy_run(phy.star(gpus=1))
    (link,) = stage.links
    later = 200_000.0
    back = stage.recover(link.channels[0], later)
    assert stage.recover(link.channels[1], later - gap_ns) == back
    states = stage.tables()["link_states"]
    check_link_states(states)
    start = stage.traffic_start_ns
    recovery = states[states["t_enter_ns"] >= start + later - gap_ns]
    assert recovery["state"].iloc[0] == "Recovery.RcvrLock"
    assert recovery["t_enter_ns"].iloc[0] == start + later - gap_ns
    assert recovery["cause"].iloc[0] == "replay_rollover"
    in_l0 = recovery[recovery["state"] == "L0"]
    assert len(in_l0) == 1
    assert in_l0["t_enter_ns"].iloc[0] == start + back


def test_a_rollover_computed_after_a_later_one_it_ends_before_keeps_its_own_walk() -> None:
    """The other side of the rule above: a Recovery requested for an earlier time that
    is over before the recorded one starts stands as its own walk, L0 between the two."""
    stage = phy.phy_run(phy.star(gpus=1))
    (link,) = stage.links
    later, earlier = 200_000.0, 20_000.0
    back_later = stage.recover(link.channels[0], later)
    back_earlier = stage.recover(link.channels[1], earlier)
    assert earlier < back_earlier < later < back_later
    states = stage.tables()["link_states"]
    check_link_states(states)
    after = states[states["t_enter_ns"] >= stage.traffic_start_ns + earlier]
    assert after["state"].tolist().count("L0") == 2
    assert after["state"].tolist().count("Recovery.Equalization.Phase0") == 2


def test_a_recovery_is_never_over_before_it_was_asked_for() -> None:
    """Found while shrinking a random run: a link whose BER retraining gave up (down to
    the end of traffic) rolled over after the traffic phase, at a time that t + the
    traffic start rounds down on the PHY clock. ``PhyStage.recover`` answered through the
    PHY clock, half an ulp before the request, and the replay core stopped the run
    (ReplayInvariantError: time went backwards)."""
    scenario = phy.star(
        gpus=1, duration="2ms", drift=[{"link": "s0-gpu0", "start": "100us", "snr_db": "5dB"}]
    )
    stage = phy.phy_run(scenario)
    (link,) = stage.links
    start = stage.traffic_start_ns
    after_traffic = stage.end_ns - start
    # A request time after the traffic phase that the PHY clock rounds down.
    t = next(t for t in (after_traffic + k / 7 for k in range(1, 1000)) if (t + start) - start < t)
    assert stage.recover(link.channels[0], t) >= t


def test_a_run_the_watchdog_stops_keeps_the_reads_it_never_issued_out_of_probes() -> None:
    """Found while shrinking a random run: tenants' requests deadlock two GPUs on one
    switch (one header credit, a completion queue of one), the watchdog stops the run at
    about 10 us, and a transactions workload drawn up to 20 us has reads it never issued.
    Building the probes table looked up their request message (-1, none): KeyError, exit
    3 on a valid scenario."""
    data = {
        "name": "stopped_with_reads_left",
        "seed": 1,
        "duration": "2us",
        "topology": {"kind": "nvswitch", "gpus": 2, "planes": 1, "links_per_gpu": 1},
        "links": {"default": {"rate": "64GT/s", "lanes": 2, "length": "25cm"}},
        "link_layer": {"credits": {"header_credits": 1, "data_credits": 16, "max_payload": "256B"}},
        "switch": {"model": "input_queued", "input_buffer": 3},
        "workloads": [
            {
                "kind": "tenant_requests",
                "load": 0.8,
                "turnaround": "100ns",
                "completion_queue": 1,
                "ack_timeout": "5us",
            },
            {"kind": "transactions", "interval": "200ns", "stop": "20us"},
        ],
    }
    result = simulate(scenario_from_data(data))
    txns = result.tables["transactions"]
    issued = txns["request_msg"] >= 0
    assert not issued.all()
    reads = txns.loc[issued & (txns["class"] == "NP"), "request_msg"]
    assert sorted(result.tables["probes"]["probe_id"]) == sorted(reads)
