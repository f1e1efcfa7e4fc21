"""Clause properties of training and retraining (phy.retrain_trigger, phy.reset_to_l0).

* phy.retrain_trigger: for arbitrary per-cycle BER sequences, a device with the
  spec's profile retrains exactly when 3 consecutive training cycles measure a BER
  above 1e-6 (the judge passes it), and a device that retrains after another
  number of cycles or at another threshold is flagged exactly when its decisions
  differ from the spec's on the counts it measured.
* phy.reset_to_l0: more channel loss never trains faster (mean over a few links,
  with a tolerance below the cost of one LMS block).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
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


@given(
    bers=st.lists(st.tuples(st.sampled_from(BERS), st.sampled_from(BERS)), min_size=3, max_size=14),
    windows=st.sampled_from([1, 2, 3, 4]),
    threshold=st.sampled_from([1e-7, 1e-6, 1e-5]),
    seed=st.integers(0, 2**16),
)
def test_retraining_is_flagged_exactly_when_it_departs_from_the_spec(
    bers: list[tuple[float, float]], windows: int, threshold: float, seed: int
) -> None:
    device = _LINK.device.model_copy(
        update={"retrain_windows": windows, "retrain_threshold": threshold}
    )
    link = dataclasses.replace(_LINK, device=device)
    tables = _run_device(link, np.array(bers).T, seed)
    verdict = JUDGES["phy.retrain_trigger"](RunContext(tables=tables))
    correct = windows == SPEC_WINDOWS and threshold == SPEC_THRESHOLD
    if correct:
        assert verdict.verdict in ("pass", "n/a"), verdict.detail
        assert not _spec_disagrees(tables)
    elif verdict.verdict != "n/a":
        assert (verdict.verdict == "fail") == _spec_disagrees(tables), verdict.detail


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
