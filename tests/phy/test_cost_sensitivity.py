"""The step-cost sensitivity table of docs/assumptions.md holds: each documented value is
where the phy.reset_to_l0 verdict of the nominal fat tree or the lossy witness flips.

The physics of a run does not depend on the costs (only the timing does), so each run
below reuses the signal-level computation of the first and costs a walk of the LTSSM.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from sitssim.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[2]
FAT_TREE = ROOT / "scenarios" / "fat_tree_8gpu.yaml"
LOSSY = ROOT / "scenarios" / "violations" / "lossy_links.yaml"
# constant: (fat tree fails above, ns; as the table shows it), (lossy passes below, ns or
# None: fails even at 0; as shown).
FLIPS: dict[str, tuple[tuple[float, str], tuple[float | None, str]]] = {
    "lms_block": ((5230.9, "5.23 µs"), (1198.1, "1.20 µs")),
    "preset_hold": ((17693.2, "17.7 µs"), (None, "never")),
    "eq_handshake": ((26039.8, "26.0 µs"), (None, "never")),
    "state_handshake": ((8846.6, "8.85 µs"), (None, "never")),
    "detect_quiet": ((101159.1, "101 µs"), (None, "never")),
    "detect_active": ((101159.1, "101 µs"), (None, "never")),
    "cdr_update": ((2127.4, "2.13 µs"), (None, "never")),
}
MARGIN = 0.005


def _verdict(phy: ModuleType, scenario: Scenario, name: str, value: float) -> str:
    costs = scenario.phy.costs.model_copy(update={name: value})
    changed = scenario.model_copy(update={"phy": scenario.phy.model_copy(update={"costs": costs})})
    return phy.phy_verdicts(changed)["phy.reset_to_l0"].verdict


@pytest.mark.parametrize("name", FLIPS)
def test_the_nominal_fat_tree_fails_above_the_documented_cost(phy: ModuleType, name: str) -> None:
    (above, _), _ = FLIPS[name]
    scenario = load_scenario(FAT_TREE)
    assert _verdict(phy, scenario, name, above * (1 - MARGIN)) == "pass"
    assert _verdict(phy, scenario, name, above * (1 + MARGIN)) == "fail"


@pytest.mark.parametrize("name", FLIPS)
def test_the_lossy_witness_passes_only_below_the_documented_cost(
    phy: ModuleType, name: str
) -> None:
    _, (below, _) = FLIPS[name]
    scenario = load_scenario(LOSSY)
    if below is None:
        assert _verdict(phy, scenario, name, 0.0) == "fail"
        return
    assert _verdict(phy, scenario, name, below * (1 - MARGIN)) == "pass"
    assert _verdict(phy, scenario, name, below * (1 + MARGIN)) == "fail"


def test_the_table_in_the_docs_shows_these_values() -> None:
    text = (ROOT / "docs" / "assumptions.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if re.match(r"^\| `[a-z_]+`", line)]
    for name, ((_, above), (_, below)) in FLIPS.items():
        (row,) = [r for r in rows if f"`{name}`" in r.split("|")[1]]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[-2].startswith(above) and cells[-1].startswith(below), (name, cells)
