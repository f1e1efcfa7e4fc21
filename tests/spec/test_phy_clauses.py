"""L1 judges: each passes on a behaving fabric and fails on an honest witness.

Witnesses: misconfiguration (a 32 GT/s or NRZ link), faulty devices (``faults:``:
PRBS15 or 256-symbol training, skipped EQ phase 3, retraining after 2 cycles or at
1e-5), emergent (a wide TRAIN_CTRL window, a lossy channel). The retrain judge is
also checked on hand-made tables, where the expected verdict is plain.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from phy import phy_helpers as phy

from sitssim.spec.registry import JUDGES, RunContext


@pytest.fixture(scope="module")
def nominal() -> dict:
    return phy.phy_verdicts(phy.star(gpus=3))


def test_a_nominal_fabric_passes_every_l1_clause(nominal: dict) -> None:
    for clause_id, verdict in nominal.items():
        if clause_id == "phy.retrain_trigger":
            # 20 µs of traffic is shorter than one 1e9-bit training cycle.
            assert verdict.verdict == "n/a" and "training cycle" in verdict.detail
        else:
            assert verdict.verdict == "pass", (clause_id, verdict.detail)
            assert verdict.evidence[0].rows


@pytest.mark.parametrize(
    ("link", "measured"), [({"rate": "32GT/s"}, 16.0), ({"modulation": "nrz"}, 64.0)]
)
def test_a_link_not_at_32_gbd_pam4_fails_the_symbol_rate(link: dict, measured: float) -> None:
    verdict = phy.phy_verdicts(phy.star(gpus=1, **link))["phy.symbol_rate"]
    assert verdict.verdict == "fail"
    assert verdict.measured == pytest.approx(measured)
    assert "gpu0-s0" in verdict.detail


def _timing(symbols: list[int], bits_per_symbol: list[int]) -> RunContext:
    """Receivers' counts in 4096 ns gates, on links configured for 64 GT/s PAM4."""
    n = len(symbols)
    timing = pd.DataFrame(
        {
            "timing_id": range(n),
            "link": [f"l{i}" for i in range(n)],
            "direction": "a>b",
            "t_start_ns": 2000.0,
            "t_end_ns": 6096.0,
            "gate_ns": 4096.0,
            "symbols": symbols,
            "bits_per_symbol": bits_per_symbol,
            "lanes": 16,
        }
    )
    links = pd.DataFrame({"link": timing["link"], "rate_gts": 64.0})
    return RunContext(tables={"symbol_timing": timing, "phy_links": links})


@pytest.mark.parametrize(
    ("symbols", "bits", "verdict", "measured", "basis"),
    [
        ([131_072, 131_072], [2, 2], "pass", 32.0, "measured"),
        # Half as many symbols in the gate: whatever the link was configured to.
        ([131_072, 65_536], [2, 2], "fail", 16.0, "measured"),
        # 299 ppm fast is within the transmitter UI tolerance, 320 ppm is not.
        ([131_072, 131_111], [2, 2], "pass", 131_111 / 4096, "measured"),
        ([131_072, 131_114], [2, 2], "fail", 131_114 / 4096, "measured"),
        # Counted right, but the link is configured NRZ: that failure rests on no count.
        ([131_072, 131_072], [2, 1], "fail", 32.0, "configured"),
    ],
)
def test_the_symbol_rate_is_judged_on_the_receivers_count(
    symbols: list[int], bits: list[int], verdict: str, measured: float, basis: str
) -> None:
    judged = JUDGES["phy.symbol_rate"](_timing(symbols, bits))
    assert (judged.verdict, judged.basis) == (verdict, basis)
    assert judged.measured == pytest.approx(measured)
    if verdict == "fail":
        assert list(judged.evidence[0].rows) == [1] and "l1 a>b" in judged.detail


def _sets(**columns: list) -> RunContext:
    n = len(next(iter(columns.values())))
    base = {
        "check_id": range(n),
        "link": [f"l{i}" for i in range(n)],
        "direction": "a>b",
        "round": 1,
        "t_ns": 0.0,
        "framed": True,
        "sets": 7,
        "symbols_per_set": 512,
        "checker_order": 31,
        "locked": True,
        "locks": 1,
        "bits_checked": 8000,
        "errors": 0,
        "detected_order": 31,
    }
    return RunContext(tables={"training_sets": pd.DataFrame({**base, **columns})})


@pytest.mark.parametrize(
    ("columns", "named"),
    [
        ({"symbols_per_set": [512, 256]}, "256-symbol sets observed"),
        ({"framed": [True, False], "symbols_per_set": [512, 0]}, "no set boundaries"),
        ({"detected_order": [31, 15], "locked": [True, False]}, "PRBS15 received"),
        ({"locks": [1, 2]}, "lost lock (2 locks)"),
    ],
)
def test_the_training_sequence_is_judged_on_what_the_receiver_observed(
    columns: dict, named: str
) -> None:
    judged = JUDGES["phy.training_sequence"](_sets(**columns))
    assert (judged.verdict, judged.measured) == ("fail", 1.0)
    assert named in judged.detail and "l1 a>b" in judged.detail and "l0" not in judged.detail
    assert list(judged.evidence[0].rows) == [1]
    assert JUDGES["phy.training_sequence"](_sets(sets=[7, 8])).verdict == "pass"


@pytest.mark.parametrize(
    ("fault", "named"),
    [
        ({"kind": "training_prbs", "order": 15}, "PRBS15 received"),
        ({"kind": "training_symbols", "symbols": 256}, "256-symbol sets observed"),
    ],
)
def test_a_device_training_with_the_wrong_sequence_is_caught(fault: dict, named: str) -> None:
    scenario = phy.star(gpus=2, faults=[{**fault, "link": "gpu1-s0"}])
    verdict = phy.phy_verdicts(scenario)["phy.training_sequence"]
    assert verdict.verdict == "fail" and verdict.measured == 2
    assert named in verdict.detail
    assert "gpu1-s0" in verdict.detail and "gpu0-s0" not in verdict.detail


def test_a_device_that_skips_eq_phase3_is_caught_entering_l0() -> None:
    verdicts = phy.phy_verdicts(
        phy.star(gpus=2, faults=[{"kind": "skip_eq_phase3", "link": "s0-gpu1"}])
    )
    verdict = verdicts["phy.eq_level3"]
    assert verdict.verdict == "fail"
    assert "gpu1-s0" in verdict.detail and "phase 3 not run" in verdict.detail
    assert "gpu0-s0" not in verdict.detail
    # The shortcut trains faster: the clause on time alone would not have seen it.
    assert verdicts["phy.reset_to_l0"].verdict == "pass"


def test_a_wide_train_ctrl_window_misses_the_256_ui_lock() -> None:
    narrow = phy.phy_verdicts(phy.star(gpus=2, phy={"train_ctrl": 0}))["phy.phase_alignment"]
    wide = phy.phy_verdicts(phy.star(gpus=2, phy={"train_ctrl": 3}))["phy.phase_alignment"]
    assert narrow.verdict == "pass"
    assert wide.verdict == "fail" and wide.measured > 256
    assert "TRAIN_CTRL 3: 32 UI/update" in wide.detail


def test_lossy_links_miss_200_us_and_are_named_with_their_times() -> None:
    scenario = phy.star(gpus=3, channel={"loss_db": "22dB"})
    stage = phy.phy_run(scenario)
    verdict = phy.phy_verdicts(scenario, stage)["phy.reset_to_l0"]
    assert verdict.verdict == "fail" and verdict.measured > 200
    states = stage.tables()["link_states"]
    for trace in stage.traces:
        assert f"{trace.link.name} at {trace.first_l0_ns / 1e3:.1f} µs" in verdict.detail
    rows = states.set_index("state_id").loc[list(verdict.evidence[0].rows)]
    assert set(rows["state"]) == {"L0"}


def test_a_link_that_never_trains_fails_reset_to_l0_as_never() -> None:
    scenario = phy.star(gpus=2, faults=[], phy={"costs": {"lms_block": "10ms"}})
    verdict = phy.phy_verdicts(scenario)["phy.reset_to_l0"]
    assert verdict.verdict == "fail" and math.isinf(verdict.measured)
    assert "gpu0-s0 never" in verdict.detail


@pytest.mark.parametrize(
    ("fault", "verdict"),
    [
        (None, "pass"),
        ({"kind": "retrain_windows", "windows": 2}, "fail"),
        ({"kind": "retrain_threshold", "ber": 1e-5}, "fail"),
    ],
)
def test_retraining_is_judged_against_the_spec_rule(fault: dict | None, verdict: str) -> None:
    scenario = phy.star(
        gpus=1,
        duration="5ms",
        faults=[{**fault, "link": "gpu0-s0"}] if fault else [],
        drift=[{"link": "gpu0-s0", "start": "1ms", "snr_db": "20dB"}],
    )
    judged = phy.phy_verdicts(scenario)["phy.retrain_trigger"]
    assert judged.verdict == verdict, judged.detail


# --- the retrain judge on hand-made tables ---------------------------------------------

W = 1000.0  # one training cycle, ns


def _judge_retrain(errors: list[int], retrain_after: int | None) -> str:
    """A link in L0 from t = 0 counting ``errors`` per cycle (one direction), retraining
    at the end of cycle ``retrain_after`` (1-based) if given."""
    count = len(errors) if retrain_after is None else retrain_after
    windows = pd.DataFrame(
        {
            "window_id": range(count),
            "link": "l",
            "direction": "a>b",
            "t_start_ns": [k * W for k in range(count)],
            "t_ns": [(k + 1) * W for k in range(count)],
            "bits": 10**9,
            "errors": errors[:count],
        }
    )
    states = [("L0", 0.0, math.nan, "idle_received")]
    if retrain_after is not None:
        t = retrain_after * W
        states = [
            ("L0", 0.0, t, "idle_received"),
            ("Recovery.RcvrLock", t, t + 10, "ber_retrain"),
            ("L0", t + 10, math.nan, "idle_received"),
        ]
    link_states = pd.DataFrame(states, columns=["state", "t_enter_ns", "t_exit_ns", "cause"])
    link_states.insert(0, "link", "l")
    link_states.insert(0, "state_id", range(len(link_states)))
    ctx = RunContext(tables={"link_states": link_states, "ber_windows": windows})
    return JUDGES["phy.retrain_trigger"](ctx).verdict


@pytest.mark.parametrize(
    ("errors", "retrain_after", "expected"),
    [
        ([0, 2000, 2000, 2000, 0], 4, "pass"),
        ([0, 2000, 2000, 2000, 0], 3, "fail"),  # after two cycles
        ([0, 2000, 2000, 2000, 0], None, "fail"),  # never
        ([2000, 2000, 0, 2000, 2000, 0], None, "pass"),  # never three in a row
        ([2000, 2000, 0, 2000, 2000, 0], 2, "fail"),
        ([1000, 1000, 1000, 1000], None, "pass"),  # exactly 1e-6 is not above it
    ],
)
def test_retrain_judge_on_hand_made_counts(
    errors: list[int], retrain_after: int | None, expected: str
) -> None:
    assert _judge_retrain(errors, retrain_after) == expected
