"""Randomised end-to-end runs: what they found, each cut down to its cause.

Each test below reproduces a failure that random runs of small valid scenarios
(``random_scenarios.random_scenarios()`` under ``run_observer.observed_run``) found.
"""

from __future__ import annotations

import pytest
from phy import phy_helpers as phy
from properties.run_observer import Violation, check_link_states

from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate

# --- what the random runs found, each cut down to its cause ----------------------------


@pytest.mark.xfail(
    strict=True,
    raises=Violation,
    reason="PhyStage._merged_states cuts a Recovery episode where a later-recorded one "
    "starts and joins the two with no LTSSM transition: Recovery.RcvrLock -> "
    "Recovery.RcvrLock, or Recovery.Equalization.Phase0/1 -> Recovery.RcvrLock",
)
@pytest.mark.parametrize("gap_ns", [100.0, 5_000.0])
def test_rollovers_computed_out_of_time_order_leave_legal_link_states(gap_ns: float) -> None:
    """Found by the random runs (2 of 40 in one derandomised draw: a flit link at BER 3e-4
    with a 1-bit REPLAY_NUM, both directions rolling over): one direction's session, played
    first, asks for Recovery at t; the other's, played after it, for an earlier time, while
    the first episode would still be in Recovery. The earlier episode is cut where the later
    one starts, in Recovery.RcvrLock (gap 100 ns) or EQ phase 1 (5 us), and the later one
    enters Recovery.RcvrLock from there: no row of the transition table does that."""
    stage = phy.phy_run(phy.star(gpus=1))
    (link,) = stage.links
    stage.recover(link.channels[0], 200_000.0)
    stage.recover(link.channels[1], 200_000.0 - gap_ns)
    check_link_states(stage.tables()["link_states"])


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
