"""waves.vcd from hand-built tables: each link's own states, phases and worse-direction BER."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from vcd_reading import vcd_changes

from sitssim.results.vcd import write_vcd


def _tables() -> dict[str, pd.DataFrame]:
    # Rows of the two links interleaved and out of state_id order, as a merged view can be.
    states = pd.DataFrame(
        {
            "state_id": [3, 0, 4, 1, 2],
            "link": ["b-s.1", "a-s.0", "b-s.1", "a-s.0", "a-s.0"],
            "state": [
                "Detect.Quiet",
                "Detect.Quiet",
                "L0",
                "Recovery.Equalization.Phase2",
                "L0",
            ],
            "t_enter_ns": [0.0, 0.0, 5.0, 1.0, 3.0],
        }
    )
    windows = pd.DataFrame(
        {
            "link": ["a-s.0", "a-s.0", "b-s.1", "a-s.0", "ghost-s.9"],
            "t_ns": [10.0, 10.0, 10.0, 20.0, 10.0],
            "bits": [1000, 1000, 4000, 1000, 10],
            "errors": [1, 3, 2, 0, 5],
        }
    )
    return {"link_states": states, "ber_windows": windows}


def test_each_link_gets_its_own_rows_in_time_order(tmp_path: Path) -> None:
    path = tmp_path / "waves.vcd"
    assert write_vcd(_tables(), path)
    changes = vcd_changes(path)
    assert [v for _, v in changes[("links.a-s_0", "ltssm")]] == [
        "Detect.Quiet",
        "Recovery.Equalization.Phase2",
        "L0",
    ]
    assert [t for t, _ in changes[("links.a-s_0", "ltssm")]] == [0, 1000, 3000]
    assert changes[("links.b-s_1", "ltssm")] == [(0, "Detect.Quiet"), (5000, "L0")]
    assert [v for t, v in changes[("links.a-s_0", "eq_phase")] if t == 1000] == ["10"]


def test_ber_is_the_worse_direction_per_cycle_and_unknown_links_are_left_out(
    tmp_path: Path,
) -> None:
    path = tmp_path / "waves.vcd"
    assert write_vcd(_tables(), path)
    changes = vcd_changes(path)
    # Time 0 holds the initial value (0 before the first cycle).
    ber_a = [(t, float(v)) for t, v in changes[("links.a-s_0", "ber")] if t > 0]
    assert ber_a == [(10_000, 0.003), (20_000, 0.0)]
    ber_b = [(t, float(v)) for t, v in changes[("links.b-s_1", "ber")] if t > 0]
    assert ber_b == [(10_000, 0.0005)]
    assert "ghost" not in path.read_text()
