"""The shipped examples that sweep collectives (the HGX calibration boards) run clean
through the CLI and match their golden reports, as every other example does
(``tests/test_shipped_scenarios.py``). They are the suite's longest runs, so they have a
file of their own: the suite's workers take a file each, and these then run beside the
other examples instead of after them on one worker."""

from __future__ import annotations

from pathlib import Path

import pytest
from shipped_examples import SWEEPS, check_example


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_a_shipped_sweep_passes_every_clause_it_models(
    path: Path, tmp_path: Path, update_golden: bool
) -> None:
    check_example(path, tmp_path / "out", update_golden)
