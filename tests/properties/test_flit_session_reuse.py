"""Reusing the shape of a burst with one or two failures gives what playing it in full gives.

Flit mode with Ack/Nak replay (no SPEC.md clause ID): ``FlitLink.session`` plays a
burst with up to ``REUSED_FAILURES`` failing transmissions once per shape (burst length,
countdowns between failures, timing, profile) and reuses it. Against a link that plays
every such burst through the replay cores, the same draws must give the same extra busy
and delivery times, the same ``replays`` rows,
Recoveries and counters, whatever the profile, the burst sizes and the error rate. Times
agree to float rounding: the shape is timed from 0 and shifted, the full playback adds up
from the burst's start (timings here are not binary fractions, so that shows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sitssim.link.flit_link import TLP_BYTES_PER_FLIT, FlitLink, ReplayLog
from sitssim.link.replay import NakPolicy, ReplayProfile

# An x3 link at 64 GT/s: a flit every 32/3 ns.
FLIT_NS = 32 / 3


@st.composite
def profiles(draw: st.DrawFn) -> ReplayProfile:
    selective = draw(st.booleans())
    return ReplayProfile(
        flit_time_ns=FLIT_NS,
        replay_num_bits=draw(st.integers(1, 3)),
        nak_policy=NakPolicy.SELECTIVE if selective else NakPolicy.STANDARD,
        selective_hold_flits=draw(st.integers(1, 3)) if selective else 0,
        ack_every_flits=draw(st.integers(1, 4)),
        ack_delay_ns=draw(st.sampled_from([0.0, 7.0, 40.0])),
        replay_timeout_flits=draw(st.sampled_from([64, 1500])),
    )


def link(profile: ReplayProfile, p_replay: float, rng: Any, reuse: bool) -> FlitLink:
    # Recovery takes a fixed 500 ns from its request: enough to tell the two apart.
    return FlitLink(
        channel=1,
        flit_ns=FLIT_NS,
        flight_ns=1.7,
        p_replay=p_replay,
        rng=rng,
        profile=profile,
        dllp_ns=3.3,
        recover=lambda _channel, t: t + 500.0,
        log=ReplayLog(),
        reuse_sessions=reuse,
    )


def same_log(reused: ReplayLog, full: ReplayLog) -> None:
    """The same rows; times to float rounding."""
    for name in ("link", "seq", "event", "flits", "replay_num"):
        assert getattr(reused, name) == getattr(full, name), name
    assert reused.t_ns == pytest.approx(full.t_ns, rel=1e-12)


@given(
    profile=profiles(),
    p_replay=st.sampled_from([0.002, 0.02, 0.1, 0.3]),
    seed=st.integers(0, 2**16),
    bursts=st.lists(st.integers(1, 40), min_size=1, max_size=60),
)
def test_a_reused_burst_shape_equals_the_full_playback(
    profile: ReplayProfile, p_replay: float, seed: int, bursts: list[int]
) -> None:
    full = link(profile, p_replay, np.random.default_rng(seed), reuse=False)
    reused = link(profile, p_replay, np.random.default_rng(seed), reuse=True)
    t = 0.0
    for flits in bursts:
        size = flits * TLP_BYTES_PER_FLIT
        assert reused.burst(size, t) == pytest.approx(full.burst(size, t), rel=1e-12, abs=1e-9)
        t += 3_001.7
    same_log(reused.log, full.log)
    assert reused.recoveries == pytest.approx(full.recoveries, rel=1e-12)
    for name in ("flits_sent", "flits_replayed", "clean_flits", "seq"):
        assert getattr(reused, name) == getattr(full, name), name


class ScriptedGaps:
    """An RNG whose countdowns are given: the boundary cases a random one rarely draws."""

    def __init__(self, gaps: list[int]) -> None:
        self.gaps = list(gaps)

    def geometric(self, _p: float) -> int:
        return self.gaps.pop(0)


@given(profile=profiles(), n=st.integers(2, 30), data=st.data())
def test_a_second_failure_on_the_sessions_last_transmission_is_played_in_full(
    profile: ReplayProfile, n: int, data: st.DataObject
) -> None:
    """The shape is reused only if the next failure falls after the session's last
    transmission; one on that very transmission (or any before) changes the burst."""
    k = data.draw(st.integers(1, n))
    probe = link(profile, 0.5, ScriptedGaps([k, 10**9]), reuse=False)
    probe.burst(n * TLP_BYTES_PER_FLIT, 0.0)
    after = probe.transmissions - k
    for second in (after, after + 1):
        links = []
        for reuse in (False, True):
            one = link(profile, 0.5, ScriptedGaps([k, second, 10**9, 10**9]), reuse=reuse)
            links.append((one, one.burst(n * TLP_BYTES_PER_FLIT, 0.0)))
        (full, full_extra), (reused, reused_extra) = links
        assert reused_extra == pytest.approx(full_extra, rel=1e-12, abs=1e-9)
        same_log(reused.log, full.log)
        assert reused.clean_flits == full.clean_flits
