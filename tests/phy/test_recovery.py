"""Recovery on the link layer's request (REPLAY_NUM rollover): an L1 retraining, walked and timed
by the PHY model, kept beside the recorded trace and shown in its tables."""

from __future__ import annotations

import itertools
import math
from types import ModuleType

import pandas as pd
import pytest

from sitssim.phy.ltssm import EQ_PHASES, State
from sitssim.spec.registry import JUDGES, RunContext
from sitssim.stages.phy import PhyStage

ROLLOVER = "replay_rollover"


def link_rows(stage: PhyStage, table: str, link: str) -> pd.DataFrame:
    frame = stage.tables()[table]
    return frame[frame["link"] == link].drop(columns=frame.columns[0]).reset_index(drop=True)


def assert_contiguous(states: pd.DataFrame) -> None:
    for (_, before), (_, after) in itertools.pairwise(states.iterrows()):
        assert before["t_exit_ns"] == pytest.approx(after["t_enter_ns"])
        assert after["round"] >= before["round"]


def assert_every_l0_entry_follows_level3_eq(stage: PhyStage) -> None:
    ctx = RunContext(tables=stage.tables())
    verdict = JUDGES["phy.eq_level3"](ctx)
    assert verdict.verdict == "pass", verdict.detail


def test_a_rollover_takes_the_link_through_a_full_retraining_and_back(phy: ModuleType) -> None:
    stage = phy.phy_run(phy.star(gpus=2))
    link = stage.links[0]
    other = link_rows(stage, "link_states", stage.links[1].name)
    t = 5_000.0
    back = stage.recover(link.channels[0], t)

    states = link_rows(stage, "link_states", link.name)
    assert_contiguous(states)
    (start,) = states.index[states["cause"] == ROLLOVER]
    request = states.loc[start]
    assert request["state"] == State.RECOVERY_RCVRLOCK.value
    assert request["t_enter_ns"] == pytest.approx(t + stage.traffic_start_ns)
    assert states.loc[start - 1, "state"] == State.L0.value
    # Back in L0 when the PHY said, after one new EQ round, and in L0 to the end.
    episode = states.loc[start:]
    l0 = episode[episode["state"] == State.L0.value]
    assert len(l0) == 1 and l0.index[0] == states.index[-1]
    assert l0["t_enter_ns"].iloc[0] == pytest.approx(back + stage.traffic_start_ns)
    assert math.isnan(l0["t_exit_ns"].iloc[0])
    walked = [s for s in episode["state"] if s.startswith("Recovery.Equalization")]
    assert walked == [p.value for p in EQ_PHASES]
    eq = link_rows(stage, "eq", link.name)
    new_round = eq[eq["t_start_ns"] >= request["t_enter_ns"]]
    assert list(new_round["phase"]) == [0, 1, 2, 3] and new_round["converged"].all()
    assert new_round["round"].nunique() == 1
    assert (new_round["t_end_ns"] <= back + stage.traffic_start_ns).all()
    assert_every_l0_entry_follows_level3_eq(stage)
    # The other link is untouched.
    pd.testing.assert_frame_equal(link_rows(stage, "link_states", stage.links[1].name), other)
    assert stage.metrics()["replay_recoveries"] == 1

    # The reverse direction's rollover during that Recovery joins it.
    assert stage.recover(link.channels[1], t + 1_000.0) == back
    assert stage.metrics()["replay_recoveries"] == 1


def test_a_lossier_channel_recovers_more_slowly(phy: ModuleType) -> None:
    durations, iterations = [], []
    for channel in ({}, {"loss_db": "21dB"}):
        stage = phy.phy_run(phy.star(gpus=1, channel=channel))
        (link,) = stage.links
        t = 2_000.0
        durations.append(stage.recover(link.channels[0], t) - t)
        eq = link_rows(stage, "eq", link.name)
        iterations.append(eq.loc[eq["round"] == eq["round"].max(), "iterations"].sum())
    assert durations[1] > durations[0] > 0
    assert iterations[1] > iterations[0]


def test_a_rollover_meets_the_ber_retraining_recorded_before_the_traffic(
    phy: ModuleType,
) -> None:
    scenario = phy.star(
        gpus=1, duration="5ms", drift=[{"link": "s0-gpu0", "start": "1ms", "snr_db": "20dB"}]
    )
    stage = phy.phy_run(scenario)
    (trace,) = stage.traces
    ch = trace.link.channels[0]
    retrain = next(r for r in trace.states if r.cause == "ber_retrain").t_enter_ns
    retrained = trace.states[-1].t_enter_ns
    assert trace.states[-1].state == State.L0

    # During it: the link is already out of L0, and back when the retraining is done.
    assert stage.recover(ch, retrain - stage.traffic_start_ns + 1_000.0) == pytest.approx(
        retrained - stage.traffic_start_ns
    )
    assert stage.metrics()["replay_recoveries"] == 0
    # Shortly before it: the Recovery is still walking when the retraining starts over.
    t = retrain - stage.traffic_start_ns - 20_000.0
    assert stage.recover(ch, t) == pytest.approx(retrained - stage.traffic_start_ns)
    states = link_rows(stage, "link_states", trace.link.name)
    assert_contiguous(states)
    (start,) = states.index[states["cause"] == ROLLOVER]
    (cut,) = states.index[states["cause"] == "ber_retrain"]
    assert cut > start + 1
    assert not (states.loc[start:cut, "state"] == State.L0.value).any()
    assert states.loc[cut - 1, "t_exit_ns"] == pytest.approx(retrain)
    eq = link_rows(stage, "eq", trace.link.name)
    interrupted = eq[(eq["t_start_ns"] < retrain) & (eq["t_end_ns"] > t)]
    assert not interrupted["converged"].iloc[-1]
    assert (eq["t_end_ns"] <= eq["t_start_ns"].shift(-1).fillna(math.inf)).all()
    assert_every_l0_entry_follows_level3_eq(stage)


def test_requests_computed_out_of_time_order_give_one_consistent_trace(
    phy: ModuleType,
) -> None:
    stage = phy.phy_run(phy.star(gpus=1))
    (link,) = stage.links
    later = stage.recover(link.channels[0], 200_000.0)
    # The other direction's session, computed afterwards, rolls over earlier, and its walk
    # would still be in Recovery at the later one: the link waits in RcvrLock from the
    # earlier rollover and goes on with the later walk, back when that one is done. One
    # Recovery, with no row of the walk that lost.
    assert stage.recover(link.channels[1], 150_000.0) == later
    states = link_rows(stage, "link_states", link.name)
    assert_contiguous(states)
    starts = states.loc[states["cause"] == ROLLOVER, "t_enter_ns"] - stage.traffic_start_ns
    assert list(starts) == pytest.approx([150_000.0])
    waiting = states.loc[states["cause"] == ROLLOVER].iloc[0]
    assert waiting["state"] == State.RECOVERY_RCVRLOCK.value
    assert waiting["t_exit_ns"] > 200_000.0 + stage.traffic_start_ns
    assert stage.metrics()["replay_recoveries"] == 1
    between = states[
        (states["t_enter_ns"] > starts.iloc[0] + stage.traffic_start_ns)
        & (states["t_enter_ns"] < later + stage.traffic_start_ns)
    ]
    assert not (between["state"] == State.L0.value).any()
    eq = link_rows(stage, "eq", link.name)
    assert eq["round"].is_monotonic_increasing and eq["t_start_ns"].is_monotonic_increasing
    assert_every_l0_entry_follows_level3_eq(stage)


def test_each_episode_depends_on_its_link_and_index_not_on_other_links(
    phy: ModuleType,
) -> None:
    scenario = phy.star(gpus=2, seed=7)
    requests = [(0, 3_000.0), (1, 4_000.0), (0, 120_000.0)]
    tables = []
    for order in (requests, [requests[1], requests[0], requests[2]]):
        stage = phy.phy_run(scenario)
        backs = {(i, t): stage.recover(stage.links[i].channels[0], t) for i, t in order}
        tables.append((backs, stage.tables()))
    (backs_a, a), (backs_b, b) = tables
    assert backs_a == backs_b
    for name in ("link_states", "eq", "cdr", "training_sets"):
        pd.testing.assert_frame_equal(a[name], b[name])
    # The two links drew their own physics: their Recoveries are not copies of each other.
    assert backs_a[(0, 3_000.0)] - 3_000.0 != backs_a[(1, 4_000.0)] - 4_000.0


def test_a_recovery_that_gives_up_keeps_the_link_down_to_the_end_of_traffic(
    phy: ModuleType,
) -> None:
    scenario = phy.star(
        gpus=1, duration="2ms", drift=[{"link": "s0-gpu0", "start": "100us", "snr_db": "5dB"}]
    )
    stage = phy.phy_run(scenario)
    (link,) = stage.links
    t = 200_000.0
    assert stage.recover(link.channels[0], t) == stage.end_ns - stage.traffic_start_ns
    states = link_rows(stage, "link_states", link.name)
    after = states[states["t_enter_ns"] > t + stage.traffic_start_ns]
    assert len(after) and not (after["state"] == State.L0.value).any()
    assert math.isnan(states["t_exit_ns"].iloc[-1])
    # A later rollover finds the link still down.
    assert stage.recover(link.channels[1], 2 * t) == stage.end_ns - stage.traffic_start_ns
    assert stage.metrics()["replay_recoveries"] == 1
