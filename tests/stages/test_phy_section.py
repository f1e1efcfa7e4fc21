"""The PHY stage's section: what the links are built from, with the scenario's indices."""

from __future__ import annotations

import dataclasses

import pytest
from phy import phy_helpers as phy

from sitssim.config.phy_profile import PHY_FAULTS
from sitssim.errors import InputError, Locator
from sitssim.fabric.topology import build_fabric
from sitssim.phy.links import check_phy_references, phy_links
from sitssim.stages.phy import STAGE, phy_section

FAULTS = [
    {"kind": "synchronizer_flops", "device": "gpu0", "peer": "s0", "flops": 3},
    {"kind": "retrain_threshold", "link": "s0-gpu1", "ber": 1e-3},
    {"kind": "synchronizer_flops", "device": "gpu1", "peer": "s0", "flops": 3},
    {"kind": "skip_eq_phase3", "link": "gpu0-s0"},
]
DRIFT = [
    {"link": "gpu1-s0", "start": "8us", "snr_db": 20},
    {"link": "gpu0-s0", "start": "2us", "snr_db": 25},
]


def test_the_section_holds_the_phy_faults_by_their_index_in_faults() -> None:
    scenario = phy.star(faults=FAULTS, drift=DRIFT, seed=7)
    section = phy_section(scenario)
    assert [(i, f.kind) for i, f in section.faults] == [
        (1, "retrain_threshold"),
        (3, "skip_eq_phase3"),
    ]
    assert all(isinstance(f, PHY_FAULTS) for _, f in section.faults)
    # Drift entries stay in the order written: their index is their position.
    assert [d.start for d in section.drift] == [8000.0, 2000.0]
    assert section.links is scenario.links and section.device is scenario.phy
    assert (section.seed, section.duration) == (7, scenario.duration)
    assert STAGE.section is phy_section


def test_each_fault_changes_only_the_device_of_the_link_it_names() -> None:
    scenario = phy.star(faults=FAULTS)
    built = phy_links(phy_section(scenario), build_fabric(scenario))
    links = {link.name: link.device for link in built}
    assert links["gpu1-s0"].retrain_threshold == 1e-3 and links["gpu1-s0"].run_eq_phase3
    assert not links["gpu0-s0"].run_eq_phase3
    assert links["gpu0-s0"].retrain_threshold == scenario.phy.retrain_threshold


@dataclasses.dataclass
class _Recorder:
    """A scenario's error factory that keeps the locs it is asked for."""

    locs: list[tuple] = dataclasses.field(default_factory=list)

    def __call__(self, loc: tuple, message: str) -> InputError:
        self.locs.append(loc)
        return InputError(message, field=".".join(map(str, loc)))


@pytest.mark.parametrize(
    ("faults", "drift", "loc"),
    [
        ([FAULTS[0], {**FAULTS[3], "link": "gpu0-gpu1"}], [], ("faults", 1, "link")),
        ([], [DRIFT[0], {**DRIFT[1], "link": "gpu9-s0"}], ("drift", 1, "link")),
        ([], [DRIFT[0], {**DRIFT[1], "start": "30us"}], ("drift", 1, "start")),
    ],
)
def test_a_reference_error_goes_through_the_locator_at_the_scenarios_loc(
    faults: list[dict], drift: list[dict], loc: tuple
) -> None:
    scenario = phy.star(faults=faults, drift=drift)
    recorder = _Recorder()
    with pytest.raises(InputError):
        check_phy_references(phy_section(scenario), build_fabric(scenario), Locator(recorder))
    assert recorder.locs == [loc]
