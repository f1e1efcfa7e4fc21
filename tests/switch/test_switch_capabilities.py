"""Switch capabilities (``switch.multicast``, ``switch.reduction``): the scenario's word,
as the accessor the collectives layer will call reports it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sitssim.config.switch_capabilities import SwitchCapabilities
from sitssim.errors import InputError
from sitssim.scenario import load_scenario

BASE = (
    "version: 1\n"
    "name: caps\n"
    "duration: 1us\n"
    "topology:\n"
    "  kind: nvswitch\n"
    "  gpus: 4\n"
    "  planes: 2\n"
    "  links_per_gpu: 2\n"
)


def load(tmp_path: Path, switch: str = "") -> object:
    path = tmp_path / "scenario.yaml"
    path.write_text(BASE + switch, encoding="utf-8")
    return load_scenario(path)


def test_a_scenario_that_says_nothing_has_neither_capability(tmp_path: Path) -> None:
    assert load(tmp_path).switch.capabilities() == SwitchCapabilities(
        multicast=False, reduction=False
    )


@pytest.mark.parametrize(
    ("multicast", "reduction"), [(True, False), (False, True), (True, True), (False, False)]
)
def test_the_accessor_reports_each_flag_as_the_scenario_sets_it(
    tmp_path: Path, multicast: bool, reduction: bool
) -> None:
    # Each flag on its own: an accessor that swapped them, or read one for both, fails a case.
    switch = (
        f"switch:\n  multicast: {str(multicast).lower()}\n  reduction: {str(reduction).lower()}\n"
    )
    caps = load(tmp_path, switch).switch.capabilities()
    assert (caps.multicast, caps.reduction) == (multicast, reduction)


def test_a_capability_that_is_not_a_boolean_is_located_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load(tmp_path, "switch:\n  arbitration: 40ns\n  reduction: sometimes\n")
    assert err.value.line == len(BASE.splitlines()) + 3
    assert err.value.field == "switch.reduction"
