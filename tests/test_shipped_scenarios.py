"""Every shipped example runs clean through the CLI, as the README tells users to run it,
and every shipped scenario's report.json is byte for byte its golden copy.

`sitssim run` differs from `simulate` by its progress reports, tables, figures and
traces; a shipped scenario that only the library ever ran once hid a progress tick every
0.02 ns (hgx_h100: 12 minutes instead of seconds). Violations are tested one by one
elsewhere, each against the clauses it must fail; here only their reports are compared.

The golden reports (``tests/golden/``) guard behaviour: a change that moves any figure of
any shipped scenario fails here. Regenerate them with ``pytest tests/test_shipped_scenarios.py
--update-golden`` only for a change meant to move figures, and say which and why in the
commit. The package version is the one field not compared.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.results.report import report_json
from sitssim.scenario import load_scenario
from sitssim.simulation import simulate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "scenarios").glob("*.yaml"))
VIOLATIONS = sorted((ROOT / "scenarios" / "violations").glob("*.yaml"))
# Reference benches (a switch model against a published result) are not spec examples:
# each states in its header the verdicts it expects, some of them failures.
REFERENCES = sorted((ROOT / "scenarios" / "reference").glob("*.yaml"))
GOLDEN = Path(__file__).resolve().parent / "golden"


def golden_path(scenario: Path) -> Path:
    return GOLDEN / scenario.relative_to(ROOT / "scenarios").with_suffix(".json")


def without_version(text: str) -> str:
    """The report with the package version blanked: a release alone moves no figure."""
    return re.sub(r'^  "sitssim": "[^"]*",$', '  "sitssim": "",', text, count=1, flags=re.M)


def check_golden(scenario: Path, report: str, update: bool) -> None:
    path = golden_path(scenario)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(without_version(report), encoding="utf-8")
    assert path.exists(), f"no golden report for {scenario.name}: run with --update-golden"
    expected = path.read_text(encoding="utf-8")
    # Compared as text (byte identity is the contract); the assert names the first
    # difference through pytest's diff of the parsed reports.
    if without_version(report) != expected:
        assert json.loads(without_version(report)) == json.loads(expected)
        raise AssertionError(f"{scenario.name}: same values, different bytes (formatting)")


def test_the_examples_are_found() -> None:
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_a_shipped_example_passes_every_clause_it_models(
    path: Path, tmp_path: Path, update_golden: bool
) -> None:
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "report.json").read_text(encoding="utf-8")
    check_golden(path, text, update_golden)
    report = json.loads(text)
    verdicts = {c["id"]: c["verdict"] for c in report["clauses"]}
    assert "fail" not in verdicts.values(), verdicts
    assert verdicts["fabric.hop_limit"] == verdicts["fabric.topology_limits"] == "pass"
    # A clause the run cannot judge says why.
    assert all(c["detail"] for c in report["clauses"] if c["verdict"] == "n/a")


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
