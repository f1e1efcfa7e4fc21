"""The shipped examples that sweep collectives (the HGX calibration boards) run clean
through the CLI and match their golden reports, as every other example does
(``tests/test_shipped_scenarios.py``), at reduced size: each sweep stops at
``shipped_examples.SWEEP_TOP`` instead of 2 GiB, so that the suite's longest runs stay
out of its critical path. Their golden reports are those of the reduced sweeps."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from shipped_examples import SWEEP_TOP, SWEEPS, check_example, golden_path, reduced_sweep

from sitssim.units import parse_size_bytes


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_a_shipped_sweep_passes_every_clause_it_models(
    path: Path, tmp_path: Path, update_golden: bool
) -> None:
    reduced = reduced_sweep(path, tmp_path / "scenario")
    check_example(reduced, tmp_path / "out", update_golden, golden_path(path))
    calls = pd.read_parquet(tmp_path / "out" / "collectives.parquet")
    assert calls["bytes"].max() == parse_size_bytes(SWEEP_TOP)
