"""BER per training cycle in L0, drift of the channel, and dynamic retraining."""

from __future__ import annotations

import itertools
import math
from types import ModuleType

import numpy as np
import pytest

from sitssim.config.phy_profile import ChannelDrift
from sitssim.phy.ber_monitor import drifted_channel, monitor_link, retrain_due
from sitssim.phy.channel import ChannelProfile
from sitssim.phy.ltssm import State
from sitssim.phy.training import LinkTrace, StateRow


def drift(**fields: object) -> ChannelDrift:
    return ChannelDrift.model_validate({"link": "gpu0-s0", **fields})


def test_a_step_holds_its_values_until_its_end_and_a_ramp_moves_in_steps() -> None:
    base = ChannelProfile(loss_db=6.0, snr_db=30.0)
    step = [drift(start="10us", end="20us", snr_db=20)]
    assert drifted_channel(base, step, 9_999.0) is base
    assert drifted_channel(base, step, 10_000.0).snr_db == 20
    assert drifted_channel(base, step, 20_000.0) is base
    ramp = [drift(kind="ramp", start="0us", end="10us", loss_db=16)]
    losses = [drifted_channel(base, ramp, t).loss_db for t in np.linspace(0, 12_000, 25)]
    assert losses[0] == 6.0 and losses[-1] == 16.0
    assert all(b >= a for a, b in itertools.pairwise(losses))
    assert all(abs(x * 10 - round(x * 10)) < 1e-9 for x in losses)
    # Entries apply in order of start: a ramp after a lasting step starts from the step.
    both = [drift(start="0us", snr_db=25), drift(kind="ramp", start="5us", end="6us", snr_db=15)]
    assert drifted_channel(base, both, 4_000.0).snr_db == 25
    assert drifted_channel(base, both, 5_500.0).snr_db == 20
    assert drifted_channel(base, both, 7_000.0).snr_db == 15


def test_retraining_is_due_at_the_end_of_the_nth_consecutive_cycle_above() -> None:
    bits = 1e9

    def due(up: list[int], down: list[int], threshold: float = 1e-6, windows: int = 3) -> object:
        return retrain_due(np.array([up, down]), bits, threshold, windows)

    assert due([0, 2000, 2000, 2000, 2000], [0] * 5) == 3
    assert due([2000, 2000, 0, 2000, 2000], [0] * 5) is None
    # Either direction's run counts; runs of the two directions do not add up.
    assert due([2000, 0, 2000, 0], [0, 2000, 0, 2000]) is None
    assert due([0, 0, 0, 0], [0, 5000, 5000, 5000]) == 3
    # Strictly above: exactly the threshold's count is not above it.
    assert due([1000] * 4, [0] * 4) is None
    assert due([1001] * 4, [0] * 4) == 2
    assert due([2000, 2000, 0], [0, 0, 0], windows=2) == 1
    assert due([2000, 2000, 2000], [0, 0, 0], threshold=1e-5) is None


def _trace_in_l0(phy: ModuleType) -> LinkTrace:
    stage = phy.phy_run(phy.star(gpus=1))
    trace = stage.traces[0]
    trace.states = [StateRow(State.L0, 0.0, math.nan, "idle_received", 1)]
    return trace


def test_counting_restarts_after_each_retraining(phy: ModuleType) -> None:
    trace = _trace_in_l0(phy)
    window = trace.link.device.training_cycle_bits / trace.link.lane_rate_bits_per_ns
    retrains: list[float] = []

    def retrain_at(t: float) -> None:
        retrains.append(t)
        trace.states[-1].t_exit_ns = t
        trace.states.append(StateRow(State.RECOVERY_RCVRLOCK, t, t + 500.0, "ber_retrain", 2))
        trace.states.append(StateRow(State.L0, t + 500.0, math.nan, "idle_received", 2))

    rows = monitor_link(
        trace,
        end_ns=10.5 * window,
        rng=np.random.default_rng(0),
        ber_at=lambda mids: np.full((2, mids.size), 1e-5),
        retrain_at=retrain_at,
    )
    assert retrains == pytest.approx([3 * window, 6 * window + 500.0, 9 * window + 1000.0])
    # Three runs of three cycles, then one whole cycle before the end.
    assert len(rows) == 2 * 10
    assert all(r["errors"] > 1000 for r in rows)


def test_a_clean_link_counts_every_whole_cycle_and_never_retrains(phy: ModuleType) -> None:
    trace = _trace_in_l0(phy)
    window = trace.link.device.training_cycle_bits / trace.link.lane_rate_bits_per_ns

    def never(t: float) -> None:
        raise AssertionError(f"retrained at {t}")

    rows = monitor_link(
        trace, 4.9 * window, np.random.default_rng(0), lambda m: np.zeros((2, m.size)), never
    )
    assert [r["t_ns"] for r in rows[::2]] == pytest.approx([window * k for k in (1, 2, 3, 4)])
    assert {r["errors"] for r in rows} == {0}


def test_snr_drift_triggers_one_retraining_on_the_drifted_channel(phy: ModuleType) -> None:
    scenario = phy.star(
        gpus=2, duration="5ms", drift=[{"link": "s0-gpu0", "start": "1ms", "snr_db": "20dB"}]
    )
    stage = phy.phy_run(scenario)
    tables = stage.tables()
    states, windows, eq = tables["link_states"], tables["ber_windows"], tables["eq"]
    retrain = states[(states["cause"] == "ber_retrain")]
    assert list(retrain["link"]) == ["gpu0-s0"]
    t_retrain = float(retrain["t_enter_ns"].iloc[0])
    drift_at = stage.traffic_start_ns + 1e6
    mine = windows[windows["link"] == "gpu0-s0"]
    before = mine[mine["t_ns"] <= drift_at]
    assert (before["errors"] == 0).all()
    # The request comes at the end of the third cycle measured on the drifted channel.
    above = mine[mine["errors"] / mine["bits"] > 1e-6]
    assert above["t_ns"].nunique() >= 3
    assert sorted(above["t_ns"].unique())[2] == pytest.approx(t_retrain)
    # The new EQ round ran on the drifted channel: its BER is far above the nominal one.
    rounds = eq[(eq["link"] == "gpu0-s0") & (eq["phase"] == 1)].sort_values("round")
    assert list(rounds["round"]) == [1, 2]
    assert rounds["ber"].iloc[1] > 1e3 * rounds["ber"].iloc[0]
    # The other link neither saw errors nor retrained.
    assert (windows.loc[windows["link"] == "gpu1-s0", "errors"] == 0).all()
    # While retraining, both of the link's channels are down for traffic.
    back = float(
        states[(states["link"] == "gpu0-s0") & (states["state"] == "L0")]["t_enter_ns"].max()
    )
    outages = stage.outages()
    trace = next(t for t in stage.traces if t.link.name == "gpu0-s0")
    assert sorted(c for c, _, _ in outages) == sorted(trace.link.channels)
    for _, start, end in outages:
        assert start == pytest.approx(t_retrain - stage.traffic_start_ns)
        assert end == pytest.approx(back - stage.traffic_start_ns)


def test_a_link_that_never_trains_is_down_for_the_whole_traffic_phase(phy: ModuleType) -> None:
    stage = phy.phy_run(phy.star(gpus=1, phy={"costs": {"lms_block": "10ms"}}))
    duration = stage.end_ns - stage.traffic_start_ns
    assert stage.outages() == [(c, 0.0, duration) for c in stage.links[0].channels]
    assert stage.windows == []
