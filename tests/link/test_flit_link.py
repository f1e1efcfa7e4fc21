"""Flit mode on a channel: error-free bursts cost nothing extra, failed flits cost replays."""

from __future__ import annotations

import numpy as np

from sitssim.link.flit import flit_time_ns
from sitssim.link.flit_link import TLP_BYTES_PER_FLIT, FlitLink, Recover, ReplayLog
from sitssim.link.replay import ReplayProfile

FLIT_NS = flit_time_ns()


class PhyDouble:
    """Stands in for the PHY stage: each Recovery takes longer than the last, so an outage
    that matches its answer can only come from asking it."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, float]] = []

    def __call__(self, channel: int, t_ns: float) -> float:
        self.calls.append((channel, t_ns))
        return t_ns + 300.0 * len(self.calls)


def make_link(
    p: float,
    seed: int = 0,
    recover: Recover | None = None,
    log: ReplayLog | None = None,
) -> FlitLink:
    return FlitLink(
        channel=3,
        flit_ns=FLIT_NS,
        flight_ns=5.0,
        p_replay=p,
        rng=np.random.default_rng(seed),
        profile=ReplayProfile(flit_time_ns=FLIT_NS),
        dllp_ns=10.0,
        recover=recover if recover is not None else PhyDouble(),
        log=log if log is not None else ReplayLog(),
    )


def test_error_free_link_adds_nothing_and_numbers_every_flit() -> None:
    link = make_link(0.0)
    for _ in range(5):
        assert link.burst(4096, 0.0) == (0.0, 0.0)
    flits = 5 * -(-4096 // TLP_BYTES_PER_FLIT)
    assert link.flits_sent == flits
    assert link.seq == flits % 1023 + 1
    assert not link.log.t_ns


def test_sequence_numbers_wrap_past_1023() -> None:
    link = make_link(0.0)
    for _ in range(100):
        link.burst(TLP_BYTES_PER_FLIT * 11, 0.0)
    assert link.seq == 1100 % 1023 + 1


def test_failed_flits_cost_replays_recorded_in_order() -> None:
    log = ReplayLog()
    link = make_link(0.02, seed=4, log=log)
    extras = [link.burst(4096, i * 2000.0) for i in range(300)]
    busy = np.array([e[0] for e in extras])
    late = np.array([e[1] for e in extras])
    assert (busy >= 0).all() and (late >= 0).all()
    assert (busy > 0).sum() > 0
    assert link.flits_replayed > 0
    # Only new flits count as sent: the replays re-send flits already counted.
    assert link.flits_sent == 300 * -(-4096 // TLP_BYTES_PER_FLIT)
    assert set(log.event) <= {"nak", "timeout", "selective_nak", "enter_recovery", "recovery"}
    assert log.t_ns == sorted(log.t_ns)
    # A replay re-sends at least the failed flit: no replay is free.
    assert busy[busy > 0].min() >= FLIT_NS


def test_failure_count_follows_the_flit_error_probability() -> None:
    p = 0.01
    link = make_link(p, seed=9)
    trials = 200_000
    failures = sum(link._trial() for _ in range(trials))
    sigma = np.sqrt(trials * p * (1 - p))
    assert abs(failures - trials * p) < 5 * sigma


def test_replay_num_rollover_holds_the_link_until_the_phy_says_it_is_back() -> None:
    log = ReplayLog()
    phy = PhyDouble()
    link = make_link(0.9, seed=1, recover=phy, log=log)
    busy, _ = link.burst(TLP_BYTES_PER_FLIT * 4, 0.0)
    assert len(phy.calls) >= 2
    assert {channel for channel, _ in phy.calls} == {3}
    # The link is down from each rollover exactly until the PHY's answer ...
    assert link.recoveries == [(t, t + 300.0 * (i + 1)) for i, (_, t) in enumerate(phy.calls)]
    # ... and the log shows each Recovery entered at its rollover and the retry buffer
    # replayed not before the link is back.
    rows = list(zip(log.event, log.t_ns, strict=True))
    assert [t for e, t in rows if e == "enter_recovery"] == [down for down, _ in link.recoveries]
    assert [t for e, t in rows if e == "recovery"] == [up for _, up in link.recoveries]
    assert busy >= sum(up - down for down, up in link.recoveries)


def test_same_seed_same_replays() -> None:
    runs = []
    for _ in range(2):
        link = make_link(0.05, seed=12)
        runs.append([link.burst(2048, i * 1000.0) for i in range(50)])
    assert runs[0] == runs[1]
