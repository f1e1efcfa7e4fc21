"""Every shipped example runs clean through the CLI, as the README tells users to run it,
and every shipped scenario's report.json is byte for byte its golden copy.

`sitssim run` differs from `simulate` by its progress reports, tables, figures and
traces; a shipped scenario that only the library ever ran once hid a progress tick every
0.02 ns (hgx_h100: 12 minutes instead of seconds). Violations are tested one by one
elsewhere, each against the clauses it must fail; here only their reports are compared.
The examples that sweep collectives are checked the same way in
``tests/test_shipped_sweeps.py``; the helpers and the golden rules are in
``tests/shipped_examples.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shipped_examples import (
    EXAMPLES,
    GOLDEN,
    REFERENCES,
    SWEEPS,
    VIOLATIONS,
    check_example,
    check_golden,
    golden_path,
)

from sitssim.results.report import report_json
from sitssim.scenario import load_scenario
from sitssim.simulation import simulate


def test_the_examples_are_found() -> None:
    assert len(EXAMPLES) >= 6
    # The calibration boards' sweeps are found, and tested in their own file.
    assert {p.stem for p in SWEEPS} >= {"hgx_h100", "hgx_a100"}


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p not in SWEEPS], ids=lambda p: p.stem)
def test_a_shipped_example_passes_every_clause_it_models(
    path: Path, tmp_path: Path, update_golden: bool
) -> None:
    check_example(path, tmp_path / "out", update_golden)


@pytest.mark.parametrize("path", VIOLATIONS, ids=lambda p: p.stem)
def test_a_violation_report_is_its_golden_copy(path: Path, update_golden: bool) -> None:
    check_golden(path, report_json(simulate(load_scenario(path))), update_golden)


@pytest.mark.slow
@pytest.mark.parametrize("path", REFERENCES, ids=lambda p: p.stem)
def test_a_reference_report_is_its_golden_copy(path: Path, update_golden: bool) -> None:
    check_golden(path, report_json(simulate(load_scenario(path))), update_golden)


def test_every_golden_report_belongs_to_a_shipped_scenario() -> None:
    kept = {golden_path(p) for p in EXAMPLES + VIOLATIONS + REFERENCES}
    assert set(GOLDEN.rglob("*.json")) == kept
