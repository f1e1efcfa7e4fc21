"""Clause properties of Level-3 equalisation at the signal level.

* ``phy.reset_to_l0``: a lossier channel never trains faster. The LMS iteration
  count is one of the step counts the reset-to-L0 time is built from, so more
  loss must never need fewer iterations in expectation (means over a handful of
  links, with a tolerance for sampling noise).
* ``phy.eq_level3``: a device profile that skips phase 3 (the faulty-device
  witness) yields an EQ record whose phase 3 did not run, so the clause can
  see it; a correct profile on the same channel runs all four phases.
* ``phy.eq_level3``: on drawn training histories (rounds that fail back to Detect,
  rounds that reach L0, retrainings from L0), the judge fails exactly when some L0
  entry followed a round that left out a phase or ended one at or above the BER
  target. Under the ``ci`` profile 23 of the 40 histories conform and 17 do not.
"""

import math

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from sitssim.phy.channel import ChannelProfile
from sitssim.phy.equalizer import EqProfile, level3_eq, train_rx_equalizer
from sitssim.spec.registry import JUDGES, RunContext

_LINKS = 6
_EQ = EqProfile(max_phase1_blocks=200)


def _mean_iterations(loss_db: float, snr_db: float, seed: int) -> float:
    channel = ChannelProfile(loss_db=loss_db, snr_db=snr_db, rj_rms_ui=0.01)
    training = train_rx_equalizer(channel, np.random.default_rng(seed), n_links=_LINKS, eq=_EQ)
    return float(np.mean(training.iterations))


@given(
    loss_db=st.floats(min_value=0.0, max_value=14.0),
    extra_db=st.floats(min_value=2.0, max_value=6.0),
    snr_db=st.floats(min_value=26.0, max_value=34.0),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_more_loss_never_needs_fewer_lms_iterations(
    loss_db: float, extra_db: float, snr_db: float, seed: int
) -> None:
    """phy.reset_to_l0: mean LMS iterations do not drop when the loss grows."""
    low = _mean_iterations(loss_db, snr_db, seed)
    high = _mean_iterations(loss_db + extra_db, snr_db, seed + 1)
    assert high >= low - (1.0 + 0.15 * low)


@given(
    loss_db=st.floats(min_value=0.0, max_value=12.0),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_skipping_phase3_is_visible_in_the_eq_record(loss_db: float, seed: int) -> None:
    """phy.eq_level3: the faulty profile's record says phase 3 did not run."""
    channel = ChannelProfile(loss_db=loss_db, snr_db=30.0, rj_rms_ui=0.01)
    (faulty,) = level3_eq(channel, np.random.default_rng(seed), eq=EqProfile(skip_phase3=True))
    assert [p.ran for p in faulty.phases] == [True, True, True, False]
    assert faulty.phases[3].iterations == 0
    assert not faulty.completed
    (correct,) = level3_eq(channel, np.random.default_rng(seed), eq=EqProfile())
    assert all(p.ran for p in correct.phases)
    assert correct.completed


TARGET = 1e-4
# A round: its phases as (phase, BER; NaN for phase 0), and whether L0 followed it.
Round = tuple[list[tuple[int, float]], bool]
GOOD_BER = st.floats(1e-30, 9.9e-5)
BAD_BER = st.floats(1e-4, 1e-2)


@st.composite
def eq_histories(draw: st.DrawFn) -> tuple[list[list[Round]], bool]:
    """Per link, its EQ rounds in order, and whether every L0 entry followed a complete
    round below target (drawn true in about half the histories)."""
    conforming = draw(st.sampled_from([True, False]), label="conforming")
    histories = []
    for _ in range(draw(st.integers(1, 3))):
        rounds: list[Round] = []
        for _ in range(draw(st.integers(0, 2))):
            # A round that failed a phase and went back to Detect: it never reached L0.
            failed_at = draw(st.integers(1, 3))
            phases = [(0, math.nan)] + [(k, draw(GOOD_BER)) for k in range(1, failed_at)]
            rounds.append(([*phases, (failed_at, draw(BAD_BER))], False))
        for _ in range(draw(st.integers(1, 2))):
            rounds.append(([(0, math.nan)] + [(k, draw(GOOD_BER)) for k in (1, 2, 3)], True))
        histories.append(rounds)
    if not conforming:
        link = draw(st.integers(0, len(histories) - 1))
        entered = [i for i, (_, l0) in enumerate(histories[link]) if l0]
        phases, _ = histories[link][draw(st.sampled_from(entered))]
        if draw(st.booleans(), label="skip phase 3"):
            phases.pop()
        else:
            k = draw(st.integers(1, 3))
            phases[k] = (k, draw(BAD_BER))
    return histories, conforming


def _eq_tables(histories: list[list[Round]]) -> dict[str, pd.DataFrame]:
    """``link_states`` and ``eq`` as a run writes them: each round after Recovery.RcvrLock,
    10 µs a phase, then 50 µs in L0 (left for the next round's retraining) or Detect."""
    states, eq = [], []
    for i, rounds in enumerate(histories):
        link, t = f"gpu{i}-s0", 0.0
        for number, (phases, l0) in enumerate(rounds, start=1):
            if states and states[-1][0] == link and states[-1][1] == "L0":
                states[-1][3] = t
            states.append([link, "Recovery.RcvrLock", t, t + 1e3, number])
            t += 1e3
            for phase, ber in phases:
                states.append([link, f"Recovery.Equalization.Phase{phase}", t, t + 1e4, number])
                eq.append([link, number, phase, t, t + 1e4, ber])
                t += 1e4
            if l0:
                states.append([link, "L0", t, math.nan, number])
                t += 5e4
            else:
                states.append([link, "Detect.Quiet", t, t + 1e3, number])
                t += 1e3
    link_states = pd.DataFrame(
        states, columns=["link", "state", "t_enter_ns", "t_exit_ns", "round"]
    ).assign(cause="")
    link_states.insert(0, "state_id", range(len(link_states)))
    table = pd.DataFrame(eq, columns=["link", "round", "phase", "t_start_ns", "t_end_ns", "ber"])
    table.insert(0, "eq_id", range(len(table)))
    return {"link_states": link_states, "eq": table}


@given(history=eq_histories())
def test_eq_level3_fails_exactly_when_an_l0_entry_followed_an_incomplete_round(
    history: tuple[list[list[Round]], bool],
) -> None:
    """phy.eq_level3: judged on the run's tables, against the rounds as they were drawn."""
    histories, conforming = history
    verdict = JUDGES["phy.eq_level3"](RunContext(tables=_eq_tables(histories)))
    assert (verdict.verdict == "pass") == conforming, verdict.detail
    entries = sum(l0 for rounds in histories for _, l0 in rounds)
    assert verdict.measured == (0 if conforming else 1) and entries >= len(histories)
