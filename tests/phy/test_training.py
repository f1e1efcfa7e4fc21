"""Link training: step counts from the channel, costs from the device, the LTSSM walked."""

from __future__ import annotations

import itertools
import math
from types import ModuleType

import pytest

import sitssim.phy.training as training
from sitssim.phy.ltssm import EQ_PHASES, TIMEOUT_NS, State


def first_l0(stage: object) -> dict[str, float]:
    return {t.link.name: t.first_l0_ns for t in stage.traces}  # type: ignore[attr-defined]


def test_states_follow_each_other_without_gaps_from_the_reset(phy: ModuleType) -> None:
    stage = phy.phy_run(phy.star(gpus=2))
    for trace in stage.traces:
        rows = trace.states
        assert rows[0].state == State.DETECT_QUIET and rows[0].t_enter_ns == 0.0
        for before, after in itertools.pairwise(rows):
            assert before.t_exit_ns == pytest.approx(after.t_enter_ns)
            assert after.t_enter_ns > before.t_enter_ns
        assert rows[-1].state == State.L0
        phases = [r.state for r in rows if r.state in EQ_PHASES]
        assert phases == list(EQ_PHASES)


def test_each_step_cost_is_charged_once_per_step_the_channel_needed(phy: ModuleType) -> None:
    """Raising one device cost delays L0 by that cost times the step count."""
    base = phy.phy_run(phy.star(gpus=2))
    lms = phy.phy_run(phy.star(gpus=2, phy={"costs": {"lms_block": "3us"}}))
    hold = phy.phy_run(phy.star(gpus=2, phy={"costs": {"preset_hold": "4us"}}))
    for b, m, h in zip(base.traces, lms.traces, hold.traces, strict=True):
        iterations = sum(r["iterations"] for r in b.eq)
        presets = sum(r["presets_tried"] for r in b.eq)
        assert iterations > 0 and presets > 0
        assert m.first_l0_ns - b.first_l0_ns == pytest.approx(iterations * 1000.0)
        assert h.first_l0_ns - b.first_l0_ns == pytest.approx(presets * 3000.0)


def test_a_lossier_channel_needs_more_lms_iterations_and_reaches_l0_later(
    phy: ModuleType,
) -> None:
    nominal = phy.phy_run(phy.star(gpus=3))
    lossy = phy.phy_run(phy.star(gpus=3, channel={"loss_db": "21dB"}))
    for n, lo in zip(nominal.traces, lossy.traces, strict=True):
        assert sum(r["iterations"] for r in lo.eq) > sum(r["iterations"] for r in n.eq)
        assert lo.first_l0_ns > n.first_l0_ns


def test_each_receiver_counts_its_partners_symbols_in_a_gate_of_its_own_clock(
    phy: ModuleType,
) -> None:
    fast = phy.phy_run(phy.star(gpus=1)).tables()["symbol_timing"]
    slow = phy.phy_run(phy.star(gpus=1, rate="32GT/s")).tables()["symbol_timing"]
    nrz = phy.phy_run(phy.star(gpus=1, modulation="nrz")).tables()["symbol_timing"]
    # The gate is the receiver's: the same length whatever the link runs at.
    for t in (fast, slow, nrz):
        assert set(t["gate_ns"]) == {4096.0}
        assert (t["t_end_ns"] - t["t_start_ns"] == t["gate_ns"]).all()
    # 32 GBd puts 131 072 symbols in 4.096 µs; half the rate half as many, NRZ twice.
    assert set(fast["symbols"]) == {131_072}
    assert set(slow["symbols"]) == {65_536}
    assert set(nrz["symbols"]) == {262_144}
    assert set(nrz["bits_per_symbol"]) == {1} and set(fast["bits_per_symbol"]) == {2}


def test_the_rate_gate_opens_in_polling_active_after_eight_sets(phy: ModuleType) -> None:
    stage = phy.phy_run(phy.star(gpus=1))
    timing = stage.tables()["symbol_timing"]
    states = stage.tables()["link_states"]
    polling = states[states["state"] == "Polling.Active"].iloc[0]
    set_ns = (512 + 16) * 0.03125
    assert (timing["t_start_ns"] >= polling["t_enter_ns"] + 8 * set_ns).all()
    assert (timing["t_start_ns"] < polling["t_enter_ns"] + 8 * set_ns + 4.0).all()
    assert (timing["t_start_ns"] % 4.0 == 0).all()


def test_links_with_one_channel_share_one_batched_computation(
    phy: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = training.level3_eq_detail

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args[2] if len(args) > 2 else kwargs["n_links"])  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(training, "level3_eq_detail", counting)
    training.group_physics.cache_clear()
    stage = phy.phy_run(phy.star(gpus=4, seed=11))
    assert calls == [4]
    # One batch, but every link direction has its own noise, jitter and PRBS phase.
    cdr = stage.tables()["cdr"]
    assert cdr["lock_time_ui"].nunique() > 1
    eq = stage.tables()["eq"]
    assert eq.loc[eq["phase"] == 1, "ber"].nunique() == 4

    calls.clear()
    training.group_physics.cache_clear()
    spread = phy.phy_run(phy.star(gpus=4, seed=11, channel={"loss_spread_db": "2dB"}))
    losses = {link.channel.loss_db for link in spread.links}
    assert len(calls) == len(losses) > 1 and sum(calls) == 4


def test_a_state_that_outlasts_its_timeout_times_out_where_the_table_says(
    phy: ModuleType,
) -> None:
    # A device whose adaptation engine needs 10 ms per block cannot finish phase 1
    # (12 ms timeout) however few blocks the channel needs.
    stage = phy.phy_run(phy.star(gpus=1, phy={"costs": {"lms_block": "10ms"}}))
    (trace,) = stage.traces
    phase1 = [r for r in trace.states if r.state == State.EQ_PHASE1]
    assert len(phase1) == training.MAX_ATTEMPTS
    for row in phase1:
        assert row.t_exit_ns - row.t_enter_ns == TIMEOUT_NS[State.EQ_PHASE1]
    timed_out = [r for r in trace.eq if r["phase"] == 1]
    assert all(not r["converged"] for r in timed_out)
    assert [r["t_end_ns"] - r["t_start_ns"] for r in timed_out] == [
        TIMEOUT_NS[State.EQ_PHASE1]
    ] * len(timed_out)
    after = [trace.states[trace.states.index(r) + 1] for r in phase1]
    assert all(r.state == State.DETECT_QUIET and r.cause == "timeout" for r in after)
    assert math.isinf(trace.first_l0_ns)
    assert math.isnan(trace.states[-1].t_exit_ns)
    assert trace.rounds == training.MAX_ATTEMPTS
