"""PHY figures: what the retrainings figure reads out of ``link_states``."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from sitssim.results.phy_plots import retrain_episodes, retrain_timeline


def states(rows: list[tuple[str, str, float, str]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["link", "state", "t_enter_ns", "cause"])
    frame["t_exit_ns"] = math.nan
    return frame


TRAINED_TWICE = states(
    [
        ("a-b", "Detect.Quiet", 0.0, "reset"),
        ("a-b", "L0", 100.0, "idle_received"),
        ("a-b", "Recovery.RcvrLock", 500.0, "ber_retrain"),
        ("a-b", "Recovery.Equalization.Phase0", 520.0, "rcvr_locked"),
        ("a-b", "L0", 600.0, "idle_received"),
        ("a-b", "Recovery.RcvrLock", 900.0, "replay_rollover"),
        ("c-d", "Detect.Quiet", 0.0, "reset"),
        ("c-d", "L0", 120.0, "idle_received"),
    ]
)


def test_episodes_start_after_the_first_l0_and_end_back_in_l0() -> None:
    episodes = retrain_episodes(TRAINED_TWICE)
    assert list(episodes.itertuples(index=False, name=None)) == [
        ("a-b", "ber_retrain", 500.0, 600.0),
        ("a-b", "replay_rollover", 900.0, math.inf),
    ]


def test_the_figure_is_drawn_only_when_a_link_retrained(tmp_path: Path) -> None:
    assert retrain_timeline({"link_states": TRAINED_TWICE}, "t", tmp_path / "r.png", 1000.0)
    assert (tmp_path / "r.png").stat().st_size > 0
    untouched = TRAINED_TWICE[TRAINED_TWICE["link"] == "c-d"]
    assert not retrain_timeline({"link_states": untouched}, "t", tmp_path / "n.png", 1000.0)
    assert not (tmp_path / "n.png").exists()
