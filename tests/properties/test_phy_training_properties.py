"""Clause properties of training and retraining (phy.retrain_trigger, phy.reset_to_l0).

* phy.retrain_trigger: for arbitrary per-cycle BER sequences, a device with the
  spec's profile retrains exactly when 3 consecutive training cycles measure a BER
  above 1e-6 (the judge passes it), and a device that retrains after another
  number of cycles or at another threshold is flagged exactly when its decisions
  differ from the spec's on the counts it measured (a plain replay of the rule).
  Under the ``ci`` profile 25 of the 40 draws are the spec's device and 15 faulty
  ones; the judge passes 26 and fails 14 (one faulty device's decisions matched the
  spec's on the counts it saw).
* phy.reset_to_l0: on drawn reset histories (failed attempts back to Detect, a link
  that never trains, retrainings after L0), the judge fails exactly when some link's
  first L0 entry is later than 200 µs, and measures the latest. Under the ``ci``
  profile 18 of the 40 histories conform and 22 do not.
* phy.reset_to_l0: more channel loss never trains faster (mean over a few links,
  with a tolerance below the cost of one LMS block).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from phy import phy_helpers as phy

from sitssim.fabric.topology import build_fabric
from sitssim.phy.ber_monitor import monitor_link
from sitssim.phy.links import PhyLink, phy_links
from sitssim.phy.ltssm import State
from sitssim.phy.training import LinkTrace, StateRow
from sitssim.spec.registry import JUDGES, RunContext
from sitssim.stages.phy import PhyStage, phy_section

_SCENARIO = phy.star(gpus=1)
_LINK = phy_links(phy_section(_SCENARIO), build_fabric(_SCENARIO))[0]
SPEC_WINDOWS, SPEC_THRESHOLD = 3, 1e-6
BERS = [0.0, 1e-7, 9e-7, 1.2e-6, 3e-6, 2e-5]


def _run_device(link: PhyLink, bers: np.ndarray, seed: int) -> dict:
    """Monitor one link in L0 over a BER sequence (indexed by cycle on the PHY clock);
    retraining takes half a cycle. Returns the PHY tables."""
    window = link.device.training_cycle_bits / link.lane_rate_bits_per_ns
    trace = LinkTrace(link=link, states=[StateRow(State.L0, 0.0, math.nan, "idle_received", 1)])

    def ber_at(mids: np.ndarray) -> np.ndarray:
        index = np.minimum((mids // window).astype(int), bers.shape[1] - 1)
        return bers[:, index]

    def retrain_at(t: float) -> None:
        trace.states[-1].t_exit_ns = t
        trace.states.append(StateRow(State.RECOVERY_RCVRLOCK, t, t + window / 2, "ber_retrain", 2))
        trace.states.append(StateRow(State.L0, t + window / 2, math.nan, "idle_received", 2))

    end = bers.shape[1] * window
    rows = monitor_link(trace, end, np.random.default_rng(seed), ber_at, retrain_at)
    stage = PhyStage([link], [trace], rows, 0.0, end, [])
    return stage.tables()


def _spec_disagrees(tables: dict) -> bool:
    """Plain replay: does any L0 interval's retraining differ from the spec rule's?"""
    states = tables["link_states"].sort_values("state_id")
    windows = tables["ber_windows"]
    l0 = states[states["state"] == "L0"]
    for row in l0.itertuples():
        end = row.t_exit_ns if math.isfinite(row.t_exit_ns) else math.inf
        mine = windows[(windows["t_start_ns"] >= row.t_enter_ns) & (windows["t_ns"] <= end)]
        runs: dict[str, int] = {}
        due_at = None
        for w in mine.sort_values(["t_ns", "direction"]).itertuples():
            runs[w.direction] = runs.get(w.direction, 0) + 1 if w.errors / w.bits > 1e-6 else 0
            if runs[w.direction] >= SPEC_WINDOWS:
                due_at = w.t_ns
                break
        retrained_at = row.t_exit_ns if math.isfinite(row.t_exit_ns) else None
        if due_at != retrained_at:
            return True
    return False


@st.composite
def retrain_devices(draw: st.DrawFn) -> tuple[int, float]:
    """(windows, threshold): the spec's in about half the draws, else a faulty device's."""
    if draw(st.sampled_from([True, False]), label="spec device"):
        return SPEC_WINDOWS, SPEC_THRESHOLD
    faulty = st.tuples(st.sampled_from([1, 2, 3, 4]), st.sampled_from([1e-7, 1e-6, 1e-5]))
    return draw(faulty.filter(lambda d: d != (SPEC_WINDOWS, SPEC_THRESHOLD)))


# Per-cycle BERs of the two directions, in runs of equal cycles (runs above the threshold
# are where a faulty device's count of cycles shows), 3 to 14 cycles.
BER_RUNS = st.lists(
    st.tuples(st.sampled_from(BERS), st.sampled_from(BERS), st.integers(1, 4)),
    min_size=1,
    max_size=6,
).map(lambda runs: [(a, b) for a, b, n in runs for _ in range(n)][:14])


@given(
    bers=BER_RUNS.filter(lambda cycles: len(cycles) >= 3),
    device=retrain_devices(),
    seed=st.integers(0, 2**16),
)
def test_retraining_is_flagged_exactly_when_it_departs_from_the_spec(
    bers: list[tuple[float, float]], device: tuple[int, float], seed: int
) -> None:
    """phy.retrain_trigger: the judge against a plain replay of the spec's rule."""
    windows, threshold = device
    profile = _LINK.device.model_copy(
        update={"retrain_windows": windows, "retrain_threshold": threshold}
    )
    link = dataclasses.replace(_LINK, device=profile)
    tables = _run_device(link, np.array(bers).T, seed)
    verdict = JUDGES["phy.retrain_trigger"](RunContext(tables=tables))
    # At least three cycles were monitored, so the clause always has something to judge.
    expected = "fail" if _spec_disagrees(tables) else "pass"
    assert verdict.verdict == expected, verdict.detail
    if windows == SPEC_WINDOWS and threshold == SPEC_THRESHOLD:
        assert expected == "pass"


def _mean_l0_us(loss_db: float, seed: int) -> float:
    stage = phy.phy_run(phy.star(gpus=3, seed=seed, channel={"loss_db": loss_db}))
    return float(np.mean([t.first_l0_ns for t in stage.traces])) / 1e3


@settings(max_examples=8)
@given(
    half_db=st.integers(min_value=0, max_value=28),
    extra_half_db=st.integers(min_value=8, max_value=16),
    seed=st.integers(min_value=0, max_value=3),
)
def test_more_channel_loss_never_trains_faster(half_db: int, extra_half_db: int, seed: int) -> None:
    """phy.reset_to_l0: the reset-to-L0 time is monotone in loss, statistically."""
    low = _mean_l0_us(half_db / 2, seed)
    high = _mean_l0_us((half_db + extra_half_db) / 2, seed + 1)
    # One LMS block costs 2 µs: a lossier channel needing fewer blocks would show.
    assert high >= low - 1.0


@st.composite
def reset_histories(draw: st.DrawFn) -> tuple[list[float], list[int], list[bool], bool]:
    """Per link: its first L0 entry after the reset (µs; inf: never), the failed attempts
    before it, whether it retrains later; and whether every link is in L0 by 200 µs
    (drawn true in about half the histories)."""
    conforming = draw(st.booleans(), label="conforming")
    n = draw(st.integers(1, 5))
    firsts = [draw(st.floats(20.0, 200.0)) for _ in range(n)]
    if not conforming:
        late = st.floats(200.001, 600.0) | st.just(math.inf)
        for k in draw(st.sets(st.integers(0, n - 1), min_size=1)):
            firsts[k] = draw(late)
    attempts = [draw(st.integers(0, 2)) for _ in range(n)]
    retrains = [draw(st.booleans()) for _ in range(n)]
    return firsts, attempts, retrains, conforming


def _reset_rows(firsts: list[float], attempts: list[int], retrains: list[bool]) -> list[list]:
    """``link_states`` rows (link, state, enter, exit, cause) of those histories."""
    rows: list[list] = []
    for i, (first_us, tries, retrain) in enumerate(zip(firsts, attempts, retrains, strict=True)):
        link = f"gpu{i}-s0"
        end = first_us * 1e3 if math.isfinite(first_us) else 900e3
        cuts = np.linspace(0.0, end, 2 * tries + 3)
        for k in range(tries):
            # Detect on to EQ, then back to Detect: a failed attempt.
            rows.append([link, "Detect.Quiet", cuts[2 * k], cuts[2 * k + 1], "reset"])
            phase1 = "Recovery.Equalization.Phase1"
            rows.append([link, phase1, cuts[2 * k + 1], cuts[2 * k + 2], "phase_done"])
        rows.append([link, "Detect.Quiet", cuts[-3], cuts[-2], "timeout"])
        if not math.isfinite(first_us):
            rows.append([link, "Detect.Quiet", cuts[-2], math.nan, "timeout"])
            continue
        rows.append([link, "Recovery.Idle", cuts[-2], end, "ts2_received"])
        if retrain:
            # Back in L0 long after the budget: only the first entry counts.
            rows.append([link, "L0", end, end + 5e4, "idle_received"])
            rows.append([link, "Recovery.RcvrLock", end + 5e4, end + 3e5, "ber_retrain"])
            rows.append([link, "L0", end + 3e5, math.nan, "idle_received"])
        else:
            rows.append([link, "L0", end, math.nan, "idle_received"])
    return rows


@given(history=reset_histories(), data=st.data())
def test_reset_to_l0_fails_exactly_when_a_link_first_reaches_l0_after_200_us(
    history: tuple[list[float], list[int], list[bool], bool], data: st.DataObject
) -> None:
    """phy.reset_to_l0: judged on the tables (rows in any order), against the first L0
    entries as drawn."""
    firsts, attempts, retrains, conforming = history
    rows = _reset_rows(firsts, attempts, retrains)
    order = data.draw(st.permutations(range(len(rows))), label="row order")
    states = pd.DataFrame(
        [rows[j] for j in order], columns=["link", "state", "t_enter_ns", "t_exit_ns", "cause"]
    ).assign(round=1)
    states.insert(0, "state_id", range(len(states)))
    links = pd.DataFrame({"link": [f"gpu{i}-s0" for i in range(len(firsts))]})
    verdict = JUDGES["phy.reset_to_l0"](
        RunContext(tables={"phy_links": links, "link_states": states})
    )
    assert (verdict.verdict == "pass") == conforming, verdict.detail
    assert verdict.measured == pytest.approx(max(firsts))
    late = [i for i, f in enumerate(firsts) if f > 200.0]
    # The late links' L0 entries (a link that never trains has none), else the latest.
    assert verdict.evidence[0].total == (len(late) if late else 1)
